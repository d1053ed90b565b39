"""The runtime's SQLite store: one file, WAL, synchronous=FULL, `BEGIN IMMEDIATE` per change;
group commits on a store thread, reads on the loop from a second connection."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from lineup_runtime_lite.store import faults
from lineup_runtime_lite.store.facts import LostRace, SqlFacts
from lineup_runtime_lite.store.schema import MIGRATIONS, SCHEMA, SCHEMA_VERSION
from lineup_sdk.errors import LineupError

__all__ = ["LostRace", "Store", "StoreRace", "store_error"]

T = TypeVar("T")

#: The `meta` key `close()` writes and open clears: present means the last close was clean.
_CLEAN_CLOSE = "closed_clean"
#: Set (to anything) to run the whole-file `quick_check` on every open, as before the rule.
_FULL_CHECK_ENV = "LINEUP_STORE_FULL_CHECK"
#: The first byte of a b-tree page: interior/leaf, index/table.
_BTREE_PAGE_TYPES = frozenset({b"\x02", b"\x05", b"\x0a", b"\x0d"})


class StoreRace(LineupError):
    """A write another writer's got ahead of (a key it wrote first, a serialization
    failure, a deadlock): rolled back, nothing changed. `store_unavailable` to whoever
    does not retry it; a caller that decides again on the facts (`install`) retries."""

    def __init__(self, path: str, text: str) -> None:
        super().__init__(
            "store_unavailable",
            f"{path}: another write got there first ({text}); nothing was changed",
            hint="retry: the next attempt decides on what the other write left",
        )


def store_error(exc: BaseException, path: str) -> LineupError | None:
    """The stable error for a database failure, or None for a programming error.

    Damaged or foreign files are `store_corrupt`; a read-only, full, busy or failing disk is
    `store_unavailable` (the transaction was rolled back; retrying may succeed).
    """
    text = str(exc)
    low = text.lower()
    if isinstance(exc, sqlite3.IntegrityError):  # a row there already: no other writer
        return StoreRace(path, text)  # on SQLite, but the same decision as on PostgreSQL
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


class _SqliteRouter:
    """The connection `SqlFacts` and the store's reads see (as PostgreSQL's router): the
    writer connection for the thread that holds the store's write lock (a batch on the
    store thread, a transaction on the loop), the reader connection (WAL: committed facts
    only) for every other read, so a read on the event loop never waits for a batch in
    flight, nor sees what it has not committed yet (SPEC 5.6).

    A statement failing outside a transaction (a read of its own: `apps()`,
    `outbox.fetch`, recovery's reads) is answered with the stable error at once, never the
    raw `sqlite3` one. Inside a transaction it is raised as is: the transaction or batch
    rolls back and maps it."""

    __slots__ = ("_store",)

    def __init__(self, store: Store) -> None:
        self._store = store

    def _target(self) -> sqlite3.Connection:
        store = self._store
        reader = store._reader
        if reader is None or store._owner == threading.get_ident():
            return store.db
        return reader

    def _failed(self, db: sqlite3.Connection, exc: sqlite3.Error) -> BaseException:
        mapped = None if db.in_transaction else store_error(exc, self._store.path)
        return exc if mapped is None else mapped

    def execute(self, sql: str, args: Sequence[Any] = ()) -> sqlite3.Cursor:
        db = self._target()
        try:
            return db.execute(sql, args)
        except sqlite3.Error as exc:
            failed = self._failed(db, exc)
            if failed is exc:
                raise
            raise failed from None

    def executemany(self, sql: str, seq: Any) -> sqlite3.Cursor:
        db = self._target()
        try:
            return db.executemany(sql, seq)
        except sqlite3.Error as exc:
            failed = self._failed(db, exc)
            if failed is exc:
                raise
            raise failed from None

    @property
    def in_transaction(self) -> bool:
        return self._target().in_transaction


class Store:
    """One SQLite database: a writer connection, and for a file a reader connection.

    Every state change goes through `transaction()` or `batch()` under the store's write
    lock: `BEGIN IMMEDIATE`, the writes, COMMIT — or ROLLBACK, leaving every table as it
    was. Group commits run on a store thread (`off_loop`, `drivers.commit.GroupCommit`):
    the COMMIT and its fsync never hold up the event loop, whose reads go to the reader
    connection meanwhile. Disk and file failures surface as `store_unavailable` /
    `store_corrupt` (see `store_error`).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self._lock_fd: int | None = None
        #: The thread holding the write lock (a batch, a transaction) and the lock.
        self._owner: int | None = None
        self._lock = threading.Lock()
        #: The reader connection of a file (None for `:memory:`: one connection, on the loop).
        self._reader: sqlite3.Connection | None = None
        #: Whether `GroupCommit` runs batches on a store thread: a file's are (its fsync
        #: never blocks the loop); `:memory:` has no fsync to wait for.
        self.off_loop = False
        self._router = _SqliteRouter(self)
        #: How many transactions committed; a caller that sees an exception compares it
        #: with its own count to tell "rolled back" from "committed, then failed".
        self.commits = 0
        target = self.path
        if self.path != ":memory:":
            target = self._take_lock()
        #: A `-wal` file before SQLite opens the database: the last close did not end it.
        self._wal_left = os.path.exists(target + "-wal")
        try:
            self.db = sqlite3.connect(target, isolation_level=None, check_same_thread=False)
            self.db.row_factory = sqlite3.Row
            self._check_integrity()  # before any write: a foreign file is left as it was
            if self.path != ":memory:":
                self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=FULL")
            self.db.execute("PRAGMA foreign_keys=ON")
            self._migrate()
            self._clear_clean_close()
            if self.path != ":memory:":
                self._reader = sqlite3.connect(
                    target, isolation_level=None, check_same_thread=False
                )
                self._reader.row_factory = sqlite3.Row
                self._reader.execute("PRAGMA query_only=ON")  # every write holds the lock
                self.off_loop = True
            self.facts = SqlFacts(self._router)  # type: ignore[arg-type]
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
        for db in (getattr(self, "db", None), self._reader):
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
        """A damaged file, or an SQLite database that is not a LineUp one, is refused.

        The whole-file `PRAGMA quick_check` (time proportional to the database) runs only
        when the last close was not clean: no `closed_clean` marker in `meta` (it is written
        by `close()` and cleared at open), or a `-wal` file left behind. After a clean close
        a bounded check stands in for it (`_bounded_check`); damage it does not see is still
        `store_corrupt`, when the damaged page is first read.
        """
        names = {r[0] for r in self.db.execute("SELECT name FROM sqlite_master")}
        if names and "meta" not in names:
            self._quick_check()  # a damaged LineUp file is damaged, not foreign
            raise LineupError(
                "store_corrupt", f"{self.path} is an SQLite database, but not a LineUp one"
            )
        if self._closed_cleanly(names):
            self._bounded_check()
        else:
            self._quick_check()

    def _closed_cleanly(self, names: set[str]) -> bool:
        if self.path == ":memory:" or "meta" not in names or os.environ.get(_FULL_CHECK_ENV):
            return False
        if self._wal_left:
            return False
        row = self.db.execute("SELECT value FROM meta WHERE key=?", (_CLEAN_CLOSE,)).fetchone()
        return row is not None

    def _quick_check(self) -> None:
        rows = self.db.execute("PRAGMA quick_check").fetchall()
        if [tuple(r) for r in rows] != [("ok",)]:
            first = str(rows[0][0]) if rows else "no answer"
            raise LineupError("store_corrupt", f"{self.path} is damaged: {first}")

    def _bounded_check(self) -> None:
        """What a cleanly closed file can be checked for in time independent of its size:
        the file holds every page its header counts, and the root page of every table and
        index is a b-tree page (one read per schema entry)."""
        page_size = int(self.db.execute("PRAGMA page_size").fetchone()[0])
        pages = int(self.db.execute("PRAGMA page_count").fetchone()[0])
        assert self._lock_fd is not None
        if os.fstat(self._lock_fd).st_size < pages * page_size:
            raise LineupError("store_corrupt", f"{self.path} is damaged: the file is truncated")
        roots = [
            int(r[0])
            for r in self.db.execute("SELECT rootpage FROM sqlite_master WHERE rootpage > 0")
        ]
        for page in sorted({1, *roots}):
            if not 1 <= page <= pages:
                raise LineupError(
                    "store_corrupt", f"{self.path} is damaged: root page {page} out of range"
                )
            at = (page - 1) * page_size + (100 if page == 1 else 0)
            kind = os.pread(self._lock_fd, 1, at)
            if kind not in _BTREE_PAGE_TYPES:
                raise LineupError(
                    "store_corrupt", f"{self.path} is damaged: page {page} is not a b-tree page"
                )

    def _clear_clean_close(self) -> None:
        """An open database is not cleanly closed until `close()` says so again.

        The mark goes in a commit that is not synced, so an open never waits for an fsync
        (under other processes' disk traffic one can take tens of milliseconds): a crash
        of this process still finds it gone (the write reached the OS), and after an OS
        crash either a later FULL commit synced the log up to it, or the file is as the
        clean close left it and the bounded check is the right one."""
        if self.path != ":memory:" and self.meta(_CLEAN_CLOSE) is not None:
            self.db.execute("PRAGMA synchronous=NORMAL")
            try:
                with self.transaction(fault_points=False):
                    self.db.execute("DELETE FROM meta WHERE key=?", (_CLEAN_CLOSE,))
            finally:
                self.db.execute("PRAGMA synchronous=FULL")

    # -- schema --------------------------------------------------------------------------
    def _migrate(self) -> None:
        """Create a new database at `SCHEMA_VERSION`, or move an older one forward through
        `MIGRATIONS`; a newer (or unknown) version is `store_schema_unsupported`."""
        has_meta = self.db.execute(
            "SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'"
        ).fetchone()
        if not has_meta:
            with self.transaction(fault_points=False):
                for stmt in SCHEMA.strip().split(";"):
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
                for stmt in MIGRATIONS[step]:
                    self.db.execute(stmt)
                self.db.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(step),))

    # -- transactions --------------------------------------------------------------------
    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        """Hold the write lock: this thread's statements go to the writer connection."""
        with self._lock:
            self._owner = threading.get_ident()
            try:
                yield
            finally:
                self._owner = None

    @contextlib.contextmanager
    def transaction(self, *, fault_points: bool = True) -> Iterator[sqlite3.Connection]:
        """`BEGIN IMMEDIATE` … COMMIT (after any batch in flight); any exception rolls
        everything back.

        Raises:
            LineupError: `store_unavailable` / `store_corrupt` when the database fails
                (after the rollback: nothing of this transaction was kept).
        """
        with self._writing(), self._transaction(fault_points) as db:
            yield db

    @contextlib.contextmanager
    def _transaction(self, fault_points: bool) -> Iterator[sqlite3.Connection]:
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

    def batch(self, steps: Sequence[Callable[[SqlFacts], T]]) -> list[T | BaseException]:
        """Group commit (see `_batch`), holding the write lock: on the store thread, or on
        the caller's when called directly."""
        with self._writing():
            return self._batch(steps)

    def _batch(self, steps: Sequence[Callable[[SqlFacts], T]]) -> list[T | BaseException]:
        """Group commit: run every step in one `BEGIN IMMEDIATE … COMMIT` (RUNTIME-NOTES,
        "Group commit").

        A step that raises (`LostRace` when one of its guards found no row, or a
        `LineupError` it decided on) writes nothing and gets its exception as its result;
        the others commit. As on PostgreSQL, a batch of several steps first runs without
        savepoints (two statements a step); only when a step raises is the transaction
        rolled back and the batch run again carefully, each step in its own savepoint. A
        step only reads facts and returns its decision, so running it again decides again
        on the same facts. A database failure (while a step writes, or at COMMIT) rolls the
        whole batch back and is raised.

        Raises:
            LineupError: `store_unavailable` / `store_corrupt` (nothing of the batch kept).
        """
        db = self.db
        try:
            faults.hit("commit.before")
            db.execute("BEGIN IMMEDIATE")
        except (sqlite3.Error, OSError) as exc:
            raise self._mapped(exc) from None
        try:
            out = self._steps(steps, careful=len(steps) == 1)
            if out is None:  # a step raised: the batch again, carefully
                db.execute("ROLLBACK")
                db.execute("BEGIN IMMEDIATE")
                out = self._steps(steps, careful=True)
                assert out is not None
            faults.hit("commit.after_write")
            db.execute("COMMIT")
            self.commits += 1
        except BaseException as exc:
            if db.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    db.execute("ROLLBACK")
            if isinstance(exc, sqlite3.Error | OSError):
                raise self._mapped(exc) from None
            raise
        faults.hit("commit.after")
        return out

    def _steps(
        self, steps: Sequence[Callable[[SqlFacts], T]], *, careful: bool
    ) -> list[T | BaseException] | None:
        """The steps in the open transaction, their results in order. Not `careful`: None
        as soon as one raises (what the batch wrote is then rolled back). `careful`: a step
        that raises is rolled back to its savepoint (a single step: the transaction begun
        again) and gets its exception. A database failure is raised either way."""
        db, facts = self.db, self.facts
        out: list[T | BaseException] = []
        single = len(steps) == 1
        for step in steps:
            if careful and not single:
                db.execute("SAVEPOINT step")
            try:
                out.append(step(facts))
            except (sqlite3.Error, OSError):
                raise  # the disk: the whole batch goes
            except Exception as exc:
                if not careful:
                    return None
                if single:
                    db.execute("ROLLBACK")
                    db.execute("BEGIN IMMEDIATE")
                else:
                    db.execute("ROLLBACK TO step")
                out.append(exc)
            if careful and not single:
                db.execute("RELEASE step")
        return out

    def _mapped(self, exc: BaseException) -> BaseException:
        mapped = store_error(exc, self.path)
        return mapped if mapped is not None else exc

    def one(self, sql: str, args: tuple[Any, ...] = ()) -> sqlite3.Row | None:
        """The first row of a read, or None."""
        try:
            row: sqlite3.Row | None = self._router.execute(sql, args).fetchone()
        except sqlite3.Error as exc:
            raise self._mapped(exc) from None
        return row

    def all(self, sql: str, args: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
        """Every row of a read."""
        try:
            return list(self._router.execute(sql, args).fetchall())
        except sqlite3.Error as exc:
            raise self._mapped(exc) from None

    def set_meta(self, key: str, value: str) -> None:
        """Write a value of the meta table (its own transaction)."""
        with self.transaction(fault_points=False):
            self.facts.set_meta(key, value)

    def meta(self, key: str) -> str | None:
        """A value from the meta table."""
        row = self.one("SELECT value FROM meta WHERE key=?", (key,))
        return str(row[0]) if row else None

    #: Installed apps are the unpacked folders beside the file (not kept in the database).
    keeps_bundles = False

    def save_bundle(self, digest: str, data: bytes) -> None:
        """Nothing: SQLite's installed apps are the folders beside its file."""

    def load_bundle(self, digest: str) -> bytes | None:
        """None: the folders beside the file are the installed apps."""
        return None

    def dump(self) -> dict[str, list[tuple[Any, ...]]]:
        """Every row of every table (tests compare dumps before and after a failed commit)."""
        tables = [
            r[0]
            for r in self.all(
                "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%' "
                "ORDER BY name"
            )
        ]
        return {t: [tuple(r) for r in self.all(f"SELECT * FROM {t}")] for t in tables}

    def close(self) -> None:
        """Mark the close clean (the next open skips the whole-file check), close the
        connection and release the lock."""
        try:
            if self.path != ":memory:" and not self.db.in_transaction:
                with contextlib.suppress(sqlite3.Error, LineupError):
                    self.set_meta(_CLEAN_CLOSE, "1")
            with self._lock:  # after any batch in flight
                if self._reader is not None:
                    self._reader.close()
                self.db.close()
        finally:
            self._release_lock()
