"""What differs between one runtime on its database and several nodes on one PostgreSQL
database (SPEC 15), behind one interface, `Coordination`:

- `Solo` (`coordination.solo`): one runtime. Every App session is its own; nothing to
  lock, filter or tell.
- `Nodes` (`coordination.nodes`): a node among several. Its lease, the owners of App
  sessions, the row locks that stand in for SQLite's single writer, the wake-ups between
  nodes (LISTEN/NOTIFY), the fencing of a node that lost its lease.

`store.facts` asks it for conditions and statements to run in the transaction at hand (it
never names a node or an engine); the drivers ask it whose App sessions are whose, start
it (`join`) and register again after a lost lease (`rejoin`), through the node's life on
the runtime's loop (`coordination.lifecycle`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

__all__ = ["Coordination", "Statement"]

#: An SQL statement (`?` placeholders) and its arguments, for the facts to run in the
#: transaction at hand.
Statement = tuple[str, tuple[Any, ...]]


class Coordination(Protocol):
    """One runtime (`Solo`) or a node among several (`Nodes`)."""

    # -- in a transaction: what the facts run or add (nothing for one runtime) ---------
    def mine(self, column: str, *, or_none: bool = False) -> tuple[str, tuple[Any, ...]]:
        """The condition (` AND …` and its arguments) that the App session `column` names
        (a column named with its table) is this node's; with `or_none`, a NULL passes."""
        ...

    def lock(self, where: str, args: tuple[Any, ...]) -> Sequence[Statement]:
        """What locks the App session(s) `where` names before a step reads their facts
        (the per-session mutex SQLite's single writer gives for free): once per step."""
        ...

    def lock_all(self, pairs: Sequence[tuple[str, str]]) -> Sequence[Statement]:
        """What locks the App sessions of `(conversation_id, scope)` pairs in one order
        (a batch's reads taken ahead: no deadlock between two batches)."""
        ...

    def new_step(self) -> None:
        """A batch step begins (a rolled-back savepoint gave its locks back)."""
        ...

    def owner(self, app_session_id: str) -> Sequence[Statement]:
        """What records a new App session as this node's (the node whose call made it)."""
        ...

    def wake(self, payloads: Sequence[str]) -> Sequence[Statement]:
        """What wakes the nodes when the transaction commits (work for an owner, or news
        for every node: `coordination.nodes` lists the payloads)."""
        ...

    def tell(self, payload: str) -> Sequence[Statement]:
        """What tells a waiter on another node when the transaction commits (only while
        another node is live)."""
        ...

    # -- on the runtime's loop: the node's life ----------------------------------------
    def owned(self) -> set[str] | None:
        """The App sessions this node owns now (None: all, there is one runtime)."""
        ...

    def join(
        self,
        *,
        on_wake: Callable[[list[str]], None],
        on_taken: Callable[[list[str]], None],
        on_lost: Callable[[], None],
    ) -> None:
        """Start the node's heartbeat and listener; their news arrive on their threads."""
        ...

    def rejoin(self) -> None:
        """After the lease was lost: stop and register again (a new epoch)."""
        ...
