"""What the facts need of a database connection: what both engines' connections provide
(SQLite's router in `store.sqlite`, PostgreSQL's in `store.postgres`), `?` placeholders and
rows read by column name (`store.records.Row`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

__all__ = ["SqlConnection", "SqlCursor"]


class SqlCursor(Protocol):
    """A statement's result: its rows, or how many rows a write changed."""

    @property
    def rowcount(self) -> int: ...
    def fetchone(self) -> Any: ...
    def fetchall(self) -> list[Any]: ...


class SqlConnection(Protocol):
    """One connection as the facts see it.

    A connection that pipelines its statements (PostgreSQL's in a batch) checks a guarded
    write's row count when its result arrives (`defer_guard`) and compares a read sent
    again with the one taken ahead of the batch before COMMIT (`witness`); one that does
    not (SQLite's) checks both at once.
    """

    def execute(self, sql: str, args: Sequence[Any] = (), /) -> SqlCursor: ...
    def executemany(self, sql: str, seq: Sequence[Sequence[Any]], /) -> Any: ...
    @property
    def in_transaction(self) -> bool: ...

    def defer_guard(self, cur: SqlCursor) -> bool:
        """Keep `cur` (a guarded write) to check when its result is in: True; False when
        the caller checks its row count now."""
        ...

    def witness(self, cur: SqlCursor, taken: Any) -> None:
        """`cur` is a read sent again where a step took `taken` (its result read ahead of
        the batch): both must agree, or the step lost its race (`LostRace`)."""
        ...
