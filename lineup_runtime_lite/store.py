"""The runtime's SQLite store: one file, WAL, synchronous=FULL, `BEGIN IMMEDIATE` per change."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lineup_runtime_lite import faults
from lineup_sdk.errors import LineupError

__all__ = ["SCHEMA_VERSION", "Store", "store_error"]

#: The schema a new database gets (`_SCHEMA`) and an older one is migrated to on open.
SCHEMA_VERSION = 2

#: The whole current schema, for a new database. A change here needs a step in
#: `_MIGRATIONS` (and `SCHEMA_VERSION` bumped to it): `tests/runtime/test_store_migrations.py`
#: checks that a database migrated from the oldest version has exactly this schema.
_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE app_versions (
  scope TEXT NOT NULL, version TEXT NOT NULL, manifest BLOB NOT NULL,
  manifest_sha256 TEXT NOT NULL, key_id TEXT NOT NULL, dir TEXT NOT NULL,
  installed_ms INTEGER NOT NULL, PRIMARY KEY (scope, version));
CREATE TABLE apps (scope TEXT PRIMARY KEY, version TEXT NOT NULL);
CREATE TABLE app_sessions (
  app_session_id TEXT PRIMARY KEY, conversation_id TEXT NOT NULL, scope TEXT NOT NULL,
  version TEXT NOT NULL, created_ms INTEGER NOT NULL, next_seq INTEGER NOT NULL DEFAULT 1,
  UNIQUE (conversation_id, scope));
CREATE TABLE activations (
  activation_id TEXT PRIMARY KEY, app_session_id TEXT NOT NULL, trigger_call_id TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('starting','ready','failed','cancelled')),
  requires_foreground INTEGER NOT NULL, worker_ready INTEGER NOT NULL DEFAULT 0,
  foreground INTEGER NOT NULL DEFAULT 0, reason TEXT, deadline_ms INTEGER NOT NULL,
  created_ms INTEGER NOT NULL, ended_ms INTEGER);
CREATE INDEX activations_session ON activations (app_session_id, created_ms);
CREATE TABLE calls (
  call_id TEXT PRIMARY KEY, fingerprint TEXT NOT NULL, conversation_id TEXT NOT NULL,
  scope TEXT NOT NULL, method TEXT NOT NULL, params TEXT NOT NULL,
  app_session_id TEXT, activation_id TEXT, seq INTEGER,
  state TEXT NOT NULL CHECK (state IN ('queued','delivered','running','done')),
  created_ms INTEGER NOT NULL, UNIQUE (app_session_id, seq));
CREATE INDEX calls_queue ON calls (app_session_id, state, seq);
CREATE TABLE receipts (
  call_id TEXT NOT NULL, stage TEXT NOT NULL, n INTEGER NOT NULL, body TEXT NOT NULL,
  PRIMARY KEY (call_id, stage));
CREATE TABLE outbox (
  id INTEGER PRIMARY KEY AUTOINCREMENT, msg_id TEXT NOT NULL UNIQUE, call_id TEXT NOT NULL,
  body TEXT NOT NULL, acked INTEGER NOT NULL DEFAULT 0);
CREATE INDEX outbox_pending ON outbox (acked, id);
CREATE TABLE session_data (
  scope TEXT NOT NULL, app_session_id TEXT NOT NULL, revision INTEGER NOT NULL CHECK (revision >= 1),
  data TEXT NOT NULL, PRIMARY KEY (scope, app_session_id));
CREATE TABLE operations (
  operation_id TEXT PRIMARY KEY, call_id TEXT NOT NULL UNIQUE, conversation_id TEXT NOT NULL,
  app_session_id TEXT NOT NULL, kind TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('focusing','completed','interrupted')),
  started_ms INTEGER NOT NULL, ends_ms INTEGER NOT NULL, ended_ms INTEGER, params TEXT NOT NULL);
CREATE TABLE im_records (
  operation_id TEXT PRIMARY KEY, conversation_id TEXT NOT NULL, body TEXT NOT NULL,
  created_ms INTEGER NOT NULL);
CREATE TABLE host_intents (
  id INTEGER PRIMARY KEY AUTOINCREMENT, dedup_key TEXT NOT NULL UNIQUE, body TEXT NOT NULL,
  delivered INTEGER NOT NULL DEFAULT 0, instance TEXT NOT NULL DEFAULT '',
  superseded INTEGER NOT NULL DEFAULT 0);
CREATE TABLE host_events (dedup_key TEXT PRIMARY KEY, body TEXT NOT NULL);
CREATE INDEX host_intents_pending ON host_intents (delivered, superseded, instance, id);
"""

#: The versioned steps, in one place: `_MIGRATIONS[n]` moves a database from schema n-1 to
#: n. Each step runs in one transaction with its version bump, so a failed or interrupted
#: migration leaves the database at the version before it. Never edit a released step; add
#: the next one.
_MIGRATIONS: dict[int, tuple[str, ...]] = {
    # 2: Host intents are ordered per instance (SPEC 5.7): each names its instance (the
    # activation), and one whose activation ended is marked superseded, never delivered.
    # Intents of activations that ended before this version are superseded by the relay.
    2: (
        "ALTER TABLE host_intents ADD COLUMN instance TEXT NOT NULL DEFAULT ''",
        "ALTER TABLE host_intents ADD COLUMN superseded INTEGER NOT NULL DEFAULT 0",
        "UPDATE host_intents SET instance = json_extract(body, '$.instance')",
        "CREATE INDEX host_intents_pending ON host_intents (delivered, superseded, instance, id)",
    ),
}
assert sorted(_MIGRATIONS) == list(range(2, SCHEMA_VERSION + 1)), "one step per version"


def store_error(exc: BaseException, path: str) -> LineupError | None:
    """The stable error for a database failure, or None for a programming error.

    Damaged or foreign files are `store_corrupt`; a read-only, full, busy or failing disk is
    `store_unavailable` (the transaction was rolled back; retrying may succeed).
    """
    text = str(exc)
    low = text.lower()
    if isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.OperationalError):
        if "not a database" in low or "malformed" in low or "corrupt" in low:
            return LineupError(
                "store_corrupt", f"{path} is damaged or not a LineUp database: {text}"
            )
        if type(exc) is sqlite3.DatabaseError:
            return LineupError("store_unavailable", f"{path}: {text}")
        return None  # integrity, programming and interface errors are bugs, not the disk
    if isinstance(exc, sqlite3.OperationalError):
        if "malformed" in low or "not a database" in low:
            return LineupError(
                "store_corrupt", f"{path} is damaged or not a LineUp database: {text}"
            )
        return LineupError("store_unavailable", f"{path}: {text}; nothing was changed")
    if isinstance(exc, OSError):
        return LineupError(
            "store_unavailable", f"{path}: {exc.strerror or exc}; nothing was changed"
        )
    return None


class Store:
    """One SQLite connection, used only from the runtime's loop thread.

    Every state change goes through `transaction()`: `BEGIN IMMEDIATE`, the writes, COMMIT —
    or ROLLBACK, leaving every table as it was. Disk and file failures surface as
    `store_unavailable` / `store_corrupt` (see `store_error`).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self._lock_fd: int | None = None
        #: How many transactions committed; a caller that sees an exception compares it
        #: with its own count to tell "rolled back" from "committed, then failed".
        self.commits = 0
        target = self.path
        if self.path != ":memory:":
            target = self._take_lock()
        try:
            self.db = sqlite3.connect(target, isolation_level=None, check_same_thread=False)
            self.db.row_factory = sqlite3.Row
            self._check_integrity()  # before any write: a foreign file is left as it was
            if self.path != ":memory:":
                self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=FULL")
            self.db.execute("PRAGMA foreign_keys=ON")
            self._migrate()
        except (sqlite3.Error, OSError) as exc:
            self._close_quietly()
            mapped = store_error(exc, self.path)
            if mapped is None:
                raise
            raise mapped from None
        except BaseException:
            self._close_quietly()
            raise

    def _close_quietly(self) -> None:
        db = getattr(self, "db", None)
        if db is not None:
            with contextlib.suppress(sqlite3.Error):
                db.close()
        self._release_lock()

    # -- locking -------------------------------------------------------------------------
    def _take_lock(self) -> str:
        """Lock the database file itself (its inode, through whatever name it was given),
        so no symlink or hard-link alias opens a second runtime; `kill -9` releases it.

        Returns the resolved path SQLite opens.
        """
        import fcntl

        real = os.path.realpath(self.path)
        flags = os.O_RDWR | os.O_CREAT | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
        try:
            fd = os.open(real, flags, 0o644)
        except IsADirectoryError:
            raise LineupError(
                "store_corrupt", f"{self.path} is a folder, not a LineUp database"
            ) from None
        except OSError as exc:
            mapped = store_error(exc, self.path)
            assert mapped is not None
            raise mapped from None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise LineupError(
                    "store_corrupt", f"{self.path} is not a regular file, so not a LineUp database"
                )
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                raise LineupError(
                    "runtime_locked", f"another runtime has {self.path} open"
                ) from None
        except BaseException:
            os.close(fd)
            raise
        self._lock_fd = fd
        return real

    def _release_lock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def _check_integrity(self) -> None:
        """A damaged file, or an SQLite database that is not a LineUp one, is refused."""
        rows = self.db.execute("PRAGMA quick_check").fetchall()
        if [tuple(r) for r in rows] != [("ok",)]:
            first = str(rows[0][0]) if rows else "no answer"
            raise LineupError("store_corrupt", f"{self.path} is damaged: {first}")
        names = {r[0] for r in self.db.execute("SELECT name FROM sqlite_master")}
        if names and "meta" not in names:
            raise LineupError(
                "store_corrupt", f"{self.path} is an SQLite database, but not a LineUp one"
            )

    # -- schema --------------------------------------------------------------------------
    def _migrate(self) -> None:
        """Create a new database at `SCHEMA_VERSION`, or move an older one forward through
        `_MIGRATIONS`; a newer (or unknown) version is `store_schema_unsupported`."""
        has_meta = self.db.execute(
            "SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'"
        ).fetchone()
        if not has_meta:
            with self.transaction(fault_points=False):
                for stmt in _SCHEMA.strip().split(";"):
                    if stmt.strip():
                        self.db.execute(stmt)
                self.db.execute(
                    "INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),)
                )
            return
        row = self.db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        try:
            version = int(row[0]) if row else 0
        except ValueError:
            raise LineupError(
                "store_corrupt", f"{self.path} has a damaged schema version"
            ) from None
        if not 1 <= version <= SCHEMA_VERSION:
            written = (
                "a newer LineUp wrote it" if version > SCHEMA_VERSION else "no LineUp wrote it"
            )
            raise LineupError(
                "store_schema_unsupported",
                f"{self.path} has store schema {version} ({written}); this runtime reads "
                f"schemas 1 to {SCHEMA_VERSION}",
            )
        for step in range(version + 1, SCHEMA_VERSION + 1):
            with self.transaction(fault_points=False):
                for stmt in _MIGRATIONS[step]:
                    self.db.execute(stmt)
                self.db.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(step),))

    # -- transactions --------------------------------------------------------------------
    @contextlib.contextmanager
    def transaction(self, *, fault_points: bool = True) -> Iterator[sqlite3.Connection]:
        """`BEGIN IMMEDIATE` … COMMIT; any exception rolls everything back.

        Raises:
            LineupError: `store_unavailable` / `store_corrupt` when the database fails
                (after the rollback: nothing of this transaction was kept).
        """
        try:
            if fault_points:
                faults.hit("commit.before")
            self.db.execute("BEGIN IMMEDIATE")
        except (sqlite3.Error, OSError) as exc:
            raise self._mapped(exc) from None
        try:
            yield self.db
            if fault_points:
                faults.hit("commit.after_write")
            self.db.execute("COMMIT")
            self.commits += 1
        except BaseException as exc:
            if self.db.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    self.db.execute("ROLLBACK")
            if isinstance(exc, sqlite3.Error | OSError):
                raise self._mapped(exc) from None
            raise
        if fault_points:
            faults.hit("commit.after")

    def _mapped(self, exc: BaseException) -> BaseException:
        mapped = store_error(exc, self.path)
        return mapped if mapped is not None else exc

    def one(self, sql: str, args: tuple[Any, ...] = ()) -> sqlite3.Row | None:
        """The first row of a read, or None."""
        try:
            row: sqlite3.Row | None = self.db.execute(sql, args).fetchone()
        except sqlite3.Error as exc:
            raise self._mapped(exc) from None
        return row

    def all(self, sql: str, args: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
        """Every row of a read."""
        try:
            return list(self.db.execute(sql, args).fetchall())
        except sqlite3.Error as exc:
            raise self._mapped(exc) from None

    def meta(self, key: str) -> str | None:
        """A value from the meta table."""
        row = self.one("SELECT value FROM meta WHERE key=?", (key,))
        return str(row[0]) if row else None

    def dump(self) -> dict[str, list[tuple[Any, ...]]]:
        """Every row of every table (tests compare dumps before and after a failed commit)."""
        tables = [
            r[0]
            for r in self.db.execute(
                "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%' "
                "ORDER BY name"
            )
        ]
        return {t: [tuple(r) for r in self.db.execute(f"SELECT * FROM {t}")] for t in tables}

    def close(self) -> None:
        """Close the connection and release the lock."""
        try:
            self.db.close()
        finally:
            self._release_lock()
