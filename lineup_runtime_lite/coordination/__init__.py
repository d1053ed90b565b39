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

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

__all__ = ["Coordination", "OwnedSessions", "Statement"]

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
    def several(self) -> bool:
        """Whether App sessions have owners (several nodes): the runtime then asks whose
        each is (`OwnedSessions`); with one runtime every session is its own."""
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


class OwnedSessions:
    """Whose App sessions are this node's, as the runtime asks on a database of several
    nodes: each looked up when first asked (`mine(app_session_id)`, one keyed read) and
    remembered, the most recently asked `limit` at most — never every session the node
    ever owned, loaded at open. An answer stands while the node lives: a session becomes
    this node's only when it creates it or takes it over (`add`), and another node takes
    this node's sessions only after its lease lapsed, when it stops and starts over."""

    def __init__(self, mine: Callable[[str], bool], limit: int = 65_536) -> None:
        self._mine = mine
        self._limit = limit
        self._known: OrderedDict[str, bool] = OrderedDict()
        self._lock = threading.Lock()

    def __contains__(self, app_session_id: object) -> bool:
        sid = str(app_session_id)
        with self._lock:
            known = self._known.get(sid)
            if known is not None:
                self._known.move_to_end(sid)
                return known
        found = self._mine(sid)
        self._remember({sid: found})
        return found

    def add(self, session_ids: Iterable[str]) -> None:
        """Sessions that are this node's now (made here, or taken over)."""
        self._remember(dict.fromkeys(session_ids, True))

    def _remember(self, answers: dict[str, bool]) -> None:
        with self._lock:
            for sid, mine in answers.items():
                self._known[sid] = mine
                self._known.move_to_end(sid)
            while len(self._known) > self._limit:
                self._known.popitem(last=False)

    def __len__(self) -> int:
        """How many answers are remembered (at most `limit`)."""
        with self._lock:
            return len(self._known)
