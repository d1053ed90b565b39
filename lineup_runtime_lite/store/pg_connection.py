"""A psycopg connection with the face `SqlFacts` reads (`store.postgres`'s writer and reader
connections): `?` placeholders, rows by name and index, `in_transaction`, round trips
counted, and pipeline mode for a batch (guards checked as results arrive, reads sent ahead
witnessed before COMMIT).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from lineup_runtime_lite.core.port import LostRace

if TYPE_CHECKING:
    import psycopg

__all__ = ["PgConnection", "PgRow", "PipelinedCursor", "pg_rows"]


class PgRow(tuple[Any, ...]):
    """A row read by index (`row[0]`) or by column name (`row["state"]`), as `sqlite3.Row`."""

    _index: dict[str, int]

    def __new__(cls, values: Sequence[Any], index: dict[str, int]) -> PgRow:
        row = super().__new__(cls, values)
        row._index = index
        return row

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            return tuple.__getitem__(self, self._index[key])
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        return list(self._index)


def pg_rows(cursor: Any) -> Callable[[Sequence[Any]], PgRow]:
    description = cursor.description or ()
    index: dict[str, int] = {}
    for i, column in enumerate(description):
        index.setdefault(column.name, i)  # `s.*, a.state`: the first of a name, as SQLite

    def make(values: Sequence[Any]) -> PgRow:
        return PgRow(values, index)

    return make


class PgConnection:
    """The face of `sqlite3.Connection` that `SqlFacts` and the store use, over psycopg:
    `?` placeholders become `%s` (each statement translated once), booleans are written
    as the integers the columns hold, and every round trip to the server is counted.

    During a batch the writer connection is in pipeline mode (`pipelined`): statements are
    sent without waiting, a read waits for its result (one round trip, carrying every write
    before it), and a guarded write's row count is checked when its result has arrived
    (`defer_guard`, `check_guards`).
    """

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn
        self._sql: dict[str, str] = {}
        #: Round trips to the server: each statement outside a pipeline, each sync in one.
        self.round_trips = 0
        self._pipeline: Any = None
        self._unsynced = False
        self._deferred: list[Any] = []
        #: Reads sent again where a step took them from those sent ahead, with what it
        #: took (`witness`): compared before COMMIT.
        self._witnesses: list[tuple[Any, Any]] = []
        #: Check each guard where it is written (a batch's careful run), not on arrival.
        self.immediate_guards = False
        #: Rolled back once: replaced before the next transaction (`_rolled_back`).
        self.tainted = False

    def _rolled_back(self) -> None:
        """A ROLLBACK makes psycopg drop its prepared statements and deallocate them on the
        server later, which in pipeline mode can land after the statements prepared next
        ("prepared statement … does not exist"): this connection prepares nothing more,
        and the store replaces it before its next transaction (`tainted`)."""
        self.conn.prepare_threshold = None
        self.tainted = True

    def _translated(self, sql: str) -> str:
        out = self._sql.get(sql)
        if out is None:
            out = self._sql[sql] = sql.replace("?", "%s")
        return out

    @staticmethod
    def _args(args: Sequence[Any]) -> tuple[Any, ...]:
        return tuple(int(a) if isinstance(a, bool) else a for a in args)

    def execute(self, sql: str, args: Sequence[Any] = ()) -> Any:
        if sql.startswith("ROLLBACK"):
            self._rolled_back()
        cur = self.conn.execute(self._translated(sql), self._args(args))
        if self._pipeline is None:
            self.round_trips += 1
            return cur
        self._unsynced = True
        return PipelinedCursor(self, cur)

    def executemany(self, sql: str, seq: Sequence[Sequence[Any]]) -> None:
        with self.conn.cursor() as cur:
            cur.executemany(self._translated(sql), [self._args(a) for a in seq])
        if self._pipeline is None:
            self.round_trips += 1
        else:
            self._unsynced = True

    @property
    def in_transaction(self) -> bool:
        from psycopg import pq

        return self.conn.info.transaction_status != pq.TransactionStatus.IDLE

    # -- pipeline mode (a batch) ---------------------------------------------------------
    @contextlib.contextmanager
    def pipelined(self) -> Iterator[None]:
        """Pipeline mode for the block; leaving it waits for what is still on the wire."""
        pipeline = self.conn.pipeline()
        self._pipeline = pipeline.__enter__()

        def leave() -> None:
            self._pipeline = None
            self._deferred.clear()
            self._witnesses.clear()
            self._unsynced = False

        try:
            yield
        except BaseException as exc:
            leave()
            with contextlib.suppress(Exception):  # the failure is raised where it happened
                pipeline.__exit__(type(exc), exc, exc.__traceback__)
            raise
        leave()
        try:
            pipeline.__exit__(None, None, None)
        except Exception:
            if not self.conn.closed and not self.conn.broken:
                raise  # a connection lost and replaced in the block has nothing left

    def result_needed(self, raw: Any) -> None:
        """`raw`'s result is about to be read: unless it has arrived, the pending
        statements go (one round trip, which brings every result sent so far)."""
        if self._unsynced and not raw.pgresult:
            self.round_trips += 1
            self._unsynced = False

    def sync(self) -> None:
        """Send everything pending and wait for its results."""
        if self._pipeline is not None and self._unsynced:
            self.round_trips += 1
            self._unsynced = False
            self._pipeline.sync()

    def defer_guard(self, cur: Any) -> bool:
        """Keep a guarded write's cursor to check when its result is in (True), or False
        outside a pipeline or with `immediate_guards` (check it now)."""
        if self._pipeline is None or self.immediate_guards:
            return False
        self._deferred.append(cur.raw if isinstance(cur, PipelinedCursor) else cur)
        return True

    def witness(self, cur: Any, taken: Any) -> None:
        """`cur` is a read sent again where a step took `taken`, its result sent ahead of
        the batch (`SqlFacts.read_ahead`): before COMMIT both must agree."""
        self._witnesses.append((cur.raw if isinstance(cur, PipelinedCursor) else cur, taken))

    def recover(self) -> None:
        """After a refused statement: take the pipeline's error (and the results aborted
        behind it), so the transaction can be rolled back."""
        import psycopg

        self._deferred.clear()
        self._witnesses.clear()
        self._unsynced = False
        if self._pipeline is not None:
            with contextlib.suppress(psycopg.Error):
                self._pipeline.sync()

    def check_guards(self, *, sync: bool) -> None:
        """`LostRace` when a guarded write whose result has arrived changed no row (with
        `sync`, after waiting for every result)."""
        if sync:
            self.sync()
        deferred, self._deferred = self._deferred, []
        if any(cur.rowcount == 0 for cur in deferred):
            raise LostRace()
        if sync and self._witnesses:  # a read taken ahead went stale: the batch again
            witnesses, self._witnesses = self._witnesses, []
            if any(cur.fetchone() != taken for cur, taken in witnesses):
                raise LostRace()


class PipelinedCursor:
    """A cursor in pipeline mode: reading its rows (or its row count) waits for its result,
    which carries the results before it; a guarded write among those that changed nothing
    is a lost race, raised here."""

    __slots__ = ("_db", "raw")

    def __init__(self, db: PgConnection, raw: Any) -> None:
        self._db, self.raw = db, raw

    def _arrived(self) -> None:
        self._db.result_needed(self.raw)

    def fetchone(self) -> Any:
        self._arrived()
        row = self.raw.fetchone()
        self._db.check_guards(sync=False)
        return row

    def fetchall(self) -> list[Any]:
        self._arrived()
        rows = list(self.raw.fetchall())
        self._db.check_guards(sync=False)
        return rows

    @property
    def rowcount(self) -> int:
        self._db.sync()
        return int(self.raw.rowcount)
