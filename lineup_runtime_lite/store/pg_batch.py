"""A group-commit batch on PostgreSQL, pipelined (`PostgresStore.batch` commits it).

The batch first runs without savepoints (they cost two round trips a step), its guards
checked as results arrive, and the acceptance reads its steps name (`ReadingStep`) sent
ahead of the first one, so they all ride its first round trip (each is sent again where its
step stands and compared before COMMIT: `SqlFacts.read_ahead`); only when a step raises,
loses its race or has a write refused is the transaction rolled back and the batch run
again carefully: a savepoint per step, each guard checked where it is written. A step only
reads facts and returns its decision, so running it again decides again on the same facts.
A serialization failure or a deadlock (another node's transaction) runs it from its start.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from lineup_runtime_lite.core.port import LostRace, reads_of
from lineup_runtime_lite.store.facts import SqlFacts
from lineup_runtime_lite.store.pg_connection import PgConnection

__all__ = ["RETRIES", "is_database_error", "run_pipelined"]

T = TypeVar("T")

#: How often a batch that met a serialization failure or a deadlock (another node's
#: transaction) runs again from its start.
RETRIES = 8


def is_database_error(exc: BaseException) -> bool:
    """A failure of the database (psycopg's), of the fault points' emulated disk
    (`sqlite3`'s) or of the OS: never a programming error."""
    import sqlite3

    import psycopg

    return isinstance(exc, psycopg.Error | sqlite3.Error | OSError)


def _is_disk_error(exc: BaseException) -> bool:
    """The fault points' emulated disk failures (`sqlite3` errors) and OS errors."""
    import sqlite3

    return isinstance(exc, sqlite3.Error | OSError)


def run_pipelined(
    db: PgConnection,
    facts: SqlFacts,
    lease_guard: tuple[str, tuple[Any, ...]],
    lost_lease: Callable[[], None],
    steps: Sequence[Callable[[SqlFacts], T]],
) -> tuple[list[T | BaseException], int]:
    """The batch's steps in a transaction on `db` (in pipeline mode) left open for COMMIT,
    and its id: first pipelined, again carefully when a step raised or lost a race, and
    from the start when the server found a serialization failure or a deadlock.
    `lease_guard` (statement, arguments) is sent after BEGIN; when it finds no row,
    `lost_lease()` is called (it raises)."""
    import psycopg

    for attempt in range(RETRIES):
        try:
            guard, xid = _begin(db, lease_guard)
            out = _steps(db, facts, steps, careful=False)
            if out is None:  # a step raised or lost a race: again, carefully
                db.execute("ROLLBACK")
                guard, xid = _begin(db, lease_guard)
                out = _steps(db, facts, steps, careful=True)
                assert out is not None
            if guard.fetchone() is None:  # arrived with the last step's results
                lost_lease()
            return out, int(xid.fetchone()[0])
        except (psycopg.errors.SerializationFailure, psycopg.errors.DeadlockDetected):
            if attempt == RETRIES - 1:
                raise
            db.recover()
            db.execute("ROLLBACK")
    raise AssertionError("unreachable")


def _begin(db: PgConnection, lease_guard: tuple[str, tuple[Any, ...]]) -> tuple[Any, Any]:
    """BEGIN, the lease guard and the transaction's id, sent with what follows (both read
    before COMMIT, from results that have arrived by then)."""
    db.execute("BEGIN")
    guard = db.execute(*lease_guard)
    return guard, db.execute("SELECT txid_current()")


def _steps(
    db: PgConnection,
    facts: SqlFacts,
    steps: Sequence[Callable[[SqlFacts], T]],
    *,
    careful: bool,
) -> list[T | BaseException] | None:
    """Run `steps` in the open transaction.

    Not `careful` (the first run): the steps' acceptance reads go ahead, guards are
    checked as their results arrive, and the first step that raises, a lost race (a
    read taken ahead that went stale is one), or a statement the server refused (a write
    that a lost race made impossible) stops the run: None, and the caller runs the
    batch again. `careful`: each step in its own savepoint (a single step needs none),
    each guard checked where it is written, as on SQLite: a step that raises or loses
    its race is rolled back to its savepoint and gets its exception.
    """
    import psycopg

    single = len(steps) == 1
    db.immediate_guards = careful
    out: list[T | BaseException] = []
    reads = [r for r in map(reads_of, steps) if r is not None] if not careful else []
    if reads and not single:  # they ride with the batch's first round trip
        facts.read_ahead(reads)
    try:
        for step in steps:
            facts.new_step()
            if careful and not single:
                db.execute("SAVEPOINT step")
            try:
                result = step(facts)
                if careful or step is steps[-1]:
                    db.check_guards(sync=True)  # its writes stand, or it lost its race
                out.append(result)
            except Exception as exc:
                lost = isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError)
                if not careful and not lost and not _is_disk_error(exc):
                    db.recover()  # what was sent after the failure is dropped
                    return None
                if isinstance(exc, psycopg.errors.UniqueViolation):
                    db.recover()
                    exc = LostRace()  # another node wrote the same row first
                elif is_database_error(exc):
                    raise  # the database: the whole batch goes
                db.execute("ROLLBACK" if single else "ROLLBACK TO SAVEPOINT step")
                if single:
                    db.execute("BEGIN")  # nothing of it to keep: COMMIT ends an empty one
                out.append(exc)
            if careful and not single:
                db.execute("RELEASE SAVEPOINT step")
    finally:
        db.immediate_guards = False
        facts.forget_ahead()
    return out
