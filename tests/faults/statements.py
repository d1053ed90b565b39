"""Database errors injected at a chosen statement (SPEC 16.1, "Races between nodes are
decisions"): the harness counts every statement the runtime sends while an entry runs and
raises, in place of the N-th, the error a racing node or a failing server would cause —
`UniqueViolation`, `SerializationFailure`, `DeadlockDetected` or `OperationalError` on
PostgreSQL, `sqlite3.IntegrityError` or `sqlite3.OperationalError` on SQLite.

PostgreSQL statements are counted at psycopg's cursor (every `execute`/`executemany` of
the store, the node and the admin connections); SQLite's at the connection, which the
store opens through `sqlite3.connect` (patched to hand it a counting connection class).
The node's own threads (heartbeat, listener: `lineup-node-*`) are not counted: their
failures are the lease's to judge, and their timing would make the count vary.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest

__all__ = ["KINDS", "Injector", "injecting"]


def _pg_kinds() -> dict[str, Callable[[], BaseException]]:
    import psycopg

    return {
        "unique_violation": lambda: psycopg.errors.UniqueViolation(
            'injected: duplicate key value violates unique constraint "x_pkey"'
        ),
        "serialization_failure": lambda: psycopg.errors.SerializationFailure(
            "injected: could not serialize access due to concurrent update"
        ),
        "deadlock_detected": lambda: psycopg.errors.DeadlockDetected("injected: deadlock"),
        "operational_error": lambda: psycopg.OperationalError(
            "injected: server closed the connection unexpectedly"
        ),
    }


#: The errors injected on each engine, by name.
KINDS: dict[str, dict[str, Callable[[], BaseException]]] = {
    "sqlite": {
        "integrity_error": lambda: sqlite3.IntegrityError("injected: UNIQUE constraint failed"),
        "operational_error": lambda: sqlite3.OperationalError("injected: disk I/O error"),
    },
}


@dataclass
class Injector:
    """Counts statements (`count`) and raises `make()` in place of statement `at`."""

    count: int = 0
    at: int | None = None
    make: Callable[[], BaseException] | None = None
    fired: int = 0
    #: The statement the error took the place of.
    where: str = ""
    counting: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def statement(self, sql: Any = None) -> None:
        if not self.counting or threading.current_thread().name.startswith("lineup-node-"):
            return
        with self.lock:
            self.count += 1
            hit = self.at is not None and self.count == self.at
            if hit:
                self.at = None
                self.fired += 1
                self.where = str(sql)[:120]
        if hit:
            assert self.make is not None
            raise self.make()

    @contextmanager
    def run(
        self, at: int | None = None, make: Callable[[], BaseException] | None = None
    ) -> Iterator[None]:
        """Count the statements of the block (from 0), raising in place of statement `at`."""
        with self.lock:
            self.count, self.at, self.make, self.fired = 0, at, make, 0
            self.counting = True
        try:
            yield
        finally:
            with self.lock:
                self.counting, self.at = False, None


class _CountingConnection(sqlite3.Connection):
    injector: Injector

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
        self.injector.statement(sql)
        return super().execute(sql, *args)

    def executemany(self, sql: str, *args: Any) -> sqlite3.Cursor:
        self.injector.statement(sql)
        return super().executemany(sql, *args)


@contextmanager
def injecting(monkeypatch: pytest.MonkeyPatch, engine: str) -> Iterator[Injector]:
    """Patch the engine's driver so every statement goes through one `Injector`."""
    injector = Injector()
    if engine == "postgresql":
        import psycopg

        KINDS.setdefault("postgresql", _pg_kinds())
        real_execute, real_many = psycopg.Cursor.execute, psycopg.Cursor.executemany

        def execute(self: Any, *args: Any, **kwargs: Any) -> Any:
            injector.statement(args[0] if args else None)
            return real_execute(self, *args, **kwargs)

        def executemany(self: Any, *args: Any, **kwargs: Any) -> Any:
            injector.statement(args[0] if args else None)
            return real_many(self, *args, **kwargs)

        monkeypatch.setattr(psycopg.Cursor, "execute", execute)
        monkeypatch.setattr(psycopg.Cursor, "executemany", executemany)
    else:
        real_connect = sqlite3.connect
        counting = type("Counting", (_CountingConnection,), {"injector": injector})

        def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
            kwargs.setdefault("factory", counting)
            conn: sqlite3.Connection = real_connect(*args, **kwargs)
            return conn

        monkeypatch.setattr(sqlite3, "connect", connect)
    yield injector
