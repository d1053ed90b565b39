"""What the drivers and the API need of a database, whichever engine holds it, and the one
place that picks the engine from what the user named (a file, `:memory:`, or a
`postgresql://` URL)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

from lineup_runtime_lite.coordination import Coordination
from lineup_runtime_lite.store.facts import SqlFacts

__all__ = ["Database", "open_database"]

T = TypeVar("T")


class Database(Protocol):
    """A store: `Store` (SQLite) or `PostgresStore`."""

    #: What messages and listings show: the file, or the URL with its password redacted.
    path: str
    #: Transactions committed so far (a caller that saw an exception compares counts).
    commits: int
    facts: SqlFacts

    @property
    def coordination(self) -> Coordination:
        """One runtime (`Solo`, SQLite) or a node among several (`Nodes`, PostgreSQL)."""
        ...

    #: The connection the facts run on (`sqlite3.Connection`, or psycopg's behind an adapter
    #: with its face): for the store's own tests.
    db: Any

    def transaction(
        self, *, fault_points: bool = True
    ) -> contextlib.AbstractContextManager[Any]: ...
    def batch(self, steps: Sequence[Callable[[SqlFacts], T]]) -> list[T | BaseException]: ...

    #: Whether `GroupCommit` runs batches on a store thread (PostgreSQL) or on the loop.
    off_loop: bool
    #: Whether installed bundles are kept in the database (PostgreSQL: every node unpacks
    #: them into its own cache) or only as the unpacked folders (SQLite).
    keeps_bundles: bool

    def save_bundle(self, digest: str, data: bytes) -> None: ...
    def load_bundle(self, digest: str) -> bytes | None: ...
    def one(self, sql: str, args: tuple[Any, ...] = ()) -> Any: ...
    def all(self, sql: str, args: tuple[Any, ...] = ()) -> list[Any]: ...
    def set_meta(self, key: str, value: str) -> None: ...
    def meta(self, key: str) -> str | None: ...
    def dump(self) -> dict[str, list[tuple[Any, ...]]]: ...
    def close(self) -> None: ...


def open_database(
    target: str | Path,
    *,
    schema: str | None = None,
    node_id: str | None = None,
    lease_s: float | None = None,
) -> Database:
    """The store `target` names: a `postgresql://` URL opens `PostgresStore` (in `schema`
    when given: a private one; registered as node `node_id` with a lease of `lease_s`);
    anything else is an SQLite file (or `:memory:`)."""
    from lineup_runtime_lite.coordination.nodes import DEFAULT_LEASE_S
    from lineup_runtime_lite.store.postgres import PostgresStore, is_postgres_url
    from lineup_runtime_lite.store.sqlite import Store

    if is_postgres_url(target):
        return PostgresStore(
            str(target), schema=schema, node_id=node_id, lease_s=lease_s or DEFAULT_LEASE_S
        )
    return Store(target)
