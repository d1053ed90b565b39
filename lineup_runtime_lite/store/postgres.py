"""The PostgreSQL store (SPEC 15): the SQLite store's tables, facts and batches on a
PostgreSQL database, through `psycopg` 3 (the `postgres` extra).

The facts (`SqlFacts`) run the very statements they run on SQLite, on `PgConnection`s
(`store.pg_connection`: the face `SqlFacts` reads, pipelining in a batch); `_Router`
sends a statement to the writer connection or the reader. The tables are the SQLite
schema's (`schema.pg_schema()`), each with a `rowid` identity column standing in for
SQLite's (insertion order); `dump()` leaves it out.

Any number of runtime nodes may open one database (`coordination.nodes`): each registers
with a lease, every transaction it writes in checks that lease first, and a second node
with the same id and a live lease is refused (`runtime_locked`). Migrations run under a
transaction-level advisory lock. A password in the URL is accepted, shown redacted
everywhere (`redact_url`, `store.pg_urls`) and warned about once per open.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from lineup_runtime_lite.coordination.nodes import (
    DEFAULT_LEASE_S,
    NODE_TABLE_NAMES,
    NODE_TABLES,
    Nodes,
    adopt_unowned,
    default_node_id,
    live_nodes,
)
from lineup_runtime_lite.store import faults
from lineup_runtime_lite.store.facts import SqlFacts
from lineup_runtime_lite.store.pg_batch import is_database_error, run_pipelined
from lineup_runtime_lite.store.pg_connection import PgConnection, pg_rows
from lineup_runtime_lite.store.pg_urls import (
    check_schema_name,
    check_url,
    has_password,
    is_postgres_url,
    private_schema,
    redact_url,
    require_psycopg,
    scrub,
    url_password,
)
from lineup_runtime_lite.store.schema import (
    PG_FIRST_VERSION,
    PG_MIGRATIONS,
    SCHEMA_VERSION,
    pg_schema,
)
from lineup_runtime_lite.store.sqlite import StoreRace, store_error
from lineup_sdk.errors import LineupError

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "PostgresStore",
    "check_no_live_runtime",
    "check_schema_name",
    "check_url",
    "drop_schema",
    "has_password",
    "is_postgres_url",
    "private_schema",
    "redact_url",
    "scrub",
]

log = logging.getLogger("lineup.runtime")
T = TypeVar("T")

#: `pg_advisory_xact_lock` key migrations run under ("LINEUPMG").
_MIGRATE_LOCK = 0x4C494E455550_4D47
#: How long a write waits for a row or table lock another session holds before its batch
#: fails (`store_unavailable`, nothing changed) instead of holding the runtime up for good;
#: a URL may set its own (`?options=-c%20lock_timeout%3D…`).
LOCK_TIMEOUT_S = 10.0


@contextlib.contextmanager
def _admin(url: str, shown: str) -> Iterator[psycopg.Connection[Any]]:
    """An autocommit connection for one administrative step; a database error in it is
    `store_unavailable` (the password scrubbed), never psycopg's own."""
    import psycopg

    check_url(url)
    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
            yield conn
    except psycopg.Error as exc:
        text = scrub(str(exc).strip().partition("\n")[0] or type(exc).__name__, url)
        raise LineupError("store_unavailable", f"{shown}: {text}; nothing was changed") from None


def check_no_live_runtime(url: str) -> None:
    """`lineup run`/`test`/`dev` on a database live nodes are serving are refused unless
    `--shared` (SPEC 15): `runtime_locked`."""
    require_psycopg()
    shown = redact_url(url)
    with _admin(url, shown) as conn:
        live = live_nodes(conn)
    if live:
        raise LineupError(
            "runtime_locked",
            f"{len(live)} runtime node(s) are serving {shown} ({', '.join(live[:3])})",
            hint="pass --shared to run beside them (in a private schema of its own)",
        )


def drop_schema(url: str, schema: str) -> None:
    """Drop a private schema and everything in it (the end of a `lineup run`)."""
    check_schema_name(schema)
    with _admin(url, redact_url(url)) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


class _Router:
    """The connection `SqlFacts` and the store's reads see: the writer connection for the
    thread that holds the store's write lock (a batch on the store thread, a transaction on
    the loop), a reader connection (autocommit: committed facts only) for every other read,
    so a read on the event loop never waits for, or lands inside, a batch in flight."""

    def __init__(self, store: PostgresStore) -> None:
        self._store = store

    def _target(self) -> PgConnection:
        store = self._store
        if store._owner == threading.get_ident():
            return store._main
        return store._reading()

    def execute(self, sql: str, args: Sequence[Any] = ()) -> Any:
        target = self._target()
        if target is self._store._main:  # a transaction's: it rolls back and maps
            return target.execute(sql, args)
        try:
            return target.execute(sql, args)
        except Exception as exc:  # a read of its own: the stable error, never psycopg's
            raise self._store._read_failed(exc) from None

    def executemany(self, sql: str, seq: Sequence[Sequence[Any]]) -> None:
        target = self._target()
        if target is self._store._main:
            target.executemany(sql, seq)
            return
        try:
            target.executemany(sql, seq)
        except Exception as exc:
            raise self._store._read_failed(exc) from None

    @property
    def in_transaction(self) -> bool:
        return self._target().in_transaction

    def defer_guard(self, cur: Any) -> bool:
        return self._target().defer_guard(cur)

    def witness(self, cur: Any, taken: Any) -> None:
        self._target().witness(cur, taken)

    @property
    def conn(self) -> psycopg.Connection[Any]:
        """The writer's psycopg connection."""
        return self._store._main.conn

    @property
    def round_trips(self) -> int:
        store = self._store
        reader = store._reader
        main = store._main.round_trips + store._retired_trips
        return main + (reader.round_trips if reader else 0)


class PostgresStore:
    """One psycopg connection to a PostgreSQL database, used from the runtime's loop thread
    (as `Store` is): the same `transaction()`, `batch()`, `dump()` and `facts`.

    Args:
        url: `postgresql://user@host:port/db` (libpq's environment and `.pgpass` fill in
            what it leaves out).
        schema: Keep the tables in this schema (created when missing) instead of the
            connection's default search path: `lineup run`/`test`/`dev`'s private schema
            (`drop_schema` removes it at the end). One runtime per schema.

    Raises:
        LineupError: `usage_invalid` without psycopg (the `postgres` extra) or with a bad
            schema name; `store_unavailable` when the server cannot be reached;
            `runtime_locked` when another runtime has the database open;
            `store_schema_unsupported` for a schema this runtime does not read.
    """

    engine = "postgresql"
    #: Batches run on a store thread of their own (`drivers.commit.GroupCommit`): a commit's
    #: round trips and its fsync never hold up the event loop.
    off_loop = True

    def __init__(
        self,
        url: str,
        *,
        schema: str | None = None,
        node_id: str | None = None,
        lease_s: float = DEFAULT_LEASE_S,
    ) -> None:
        require_psycopg()
        check_url(url)
        if schema is not None:
            check_schema_name(schema)
        self._url = url
        self._secret = url_password(url)
        #: What every message and listing shows: the URL with its password redacted.
        self.path = redact_url(url)
        self.schema = schema
        self.commits = 0
        if self._secret:
            log.warning(
                "%s: the database password is in the URL; prefer PGPASSWORD or ~/.pgpass",
                self.path,
            )
        #: The thread holding the write lock (a batch, a transaction) and the lock.
        self._owner: int | None = None
        self._lock = threading.Lock()
        self._reader: PgConnection | None = None
        #: Set by `close`: no connection is opened after it (a read racing the close
        #: would keep one nobody closes); `_conn_lock` orders the reader's replacement.
        self._closed = False
        self._conn_lock = threading.Lock()
        self._retired_trips = 0
        #: This process as a node of the database (`coordination.nodes`): registered once
        #: the tables stand; the facts' owner filters, row locks and notifications.
        self.coordination = Nodes(
            self._plain_connection,
            node_id=node_id or default_node_id("store"),
            lease_s=lease_s,
            schema=schema,
            shown=self.path,
            writing=lambda: self._owner == threading.get_ident(),
            mapped=self._mapped,
        )
        self._main = self._connect()
        self.db = _Router(self)
        self.facts = SqlFacts(self.db, self.coordination)
        try:
            self.coordination.registered()
        except BaseException:
            self.close()
            raise

    def _plain_connection(self) -> Any:
        """A new autocommit connection on the runtime's schema (the node's threads')."""
        import psycopg

        return self._on_schema(psycopg.connect(self._url, autocommit=True, connect_timeout=10))

    def _on_schema(self, conn: Any) -> Any:
        """`conn` with the runtime's schema as its search path (closed if that fails)."""
        try:
            if self.schema is not None:
                conn.execute(f'SET search_path TO "{self.schema}"')
        except BaseException:
            conn.close()
            raise
        return conn

    # -- connection ----------------------------------------------------------------------
    def _connect(self) -> PgConnection:
        """A new writer connection: the tables created or checked, a lock timeout set."""
        import psycopg

        try:
            conn = psycopg.connect(
                self._url, autocommit=True, row_factory=pg_rows, connect_timeout=10
            )
        except psycopg.Error as exc:
            raise self._mapped(exc) from None
        try:
            db = PgConnection(conn)
            if self.schema is not None:
                db.execute(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"')
                db.execute(f'SET search_path TO "{self.schema}"')
            self._migrate(db)
            timeout = db.execute("SHOW lock_timeout").fetchone()
            if timeout is not None and str(timeout[0]) == "0":  # unless the URL's options say
                db.execute(f"SET lock_timeout = '{int(LOCK_TIMEOUT_S * 1000)}ms'")
        except psycopg.Error as exc:
            conn.close()
            raise self._mapped(exc) from None
        except BaseException:
            conn.close()
            raise
        return db

    def _reconnect_if_lost(self) -> None:
        """After a lost (or rolled-back: `PgConnection.tainted`) connection, connect again
        before the next transaction (the lease guard of each transaction keeps a node that
        lost its lease meanwhile out)."""
        main = self._main
        if not main.conn.closed and not main.conn.broken and not main.tainted:
            return
        with contextlib.suppress(Exception):
            main.conn.close()
        self._refuse_if_closed()
        self._main = self._connect()
        self._retired_trips += main.round_trips  # the count goes on across connections

    def _reading(self) -> PgConnection:
        """The reader connection (opened on first use, again after it was lost)."""
        reader = self._reader
        if reader is not None and not reader.conn.closed and not reader.conn.broken:
            return reader
        import psycopg

        self._refuse_if_closed()
        try:
            conn = psycopg.connect(
                self._url, autocommit=True, row_factory=pg_rows, connect_timeout=10
            )
        except psycopg.Error as exc:
            raise self._mapped(exc) from None
        fresh = PgConnection(self._on_schema(conn))
        with self._conn_lock:
            kept = not self._closed
            if kept:
                self._reader = fresh
        if kept:
            return fresh
        conn.close()  # the store closed while it connected
        raise self._closed_error()

    def _refuse_if_closed(self) -> None:
        if self._closed:
            raise self._closed_error()

    def _closed_error(self) -> LineupError:
        return LineupError(
            "store_unavailable", f"the store on {self.path} is closed", hint="open it again"
        )

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        """Hold the write lock: this thread's statements go to the writer connection."""
        with self._lock:
            self._owner = threading.get_ident()
            try:
                yield
            finally:
                self._owner = None

    def _begin(self) -> int:
        """BEGIN, the lease guard and the transaction's id (one round trip: the id tells,
        after a connection lost during COMMIT, whether the transaction committed).

        Raises:
            LineupError: `store_unavailable` when this node lost its lease."""
        from psycopg import sql

        statement, args = self.coordination.guard()
        guard = sql.SQL(statement.replace("?", "{}")).format(*map(sql.Literal, args))
        text = sql.SQL("BEGIN; {}; SELECT txid_current()").format(guard)
        cur = self._main.conn.execute(text.as_string(self._main.conn))
        self._main.round_trips += 1
        cur.nextset()  # past BEGIN
        held = cur.fetchone() is not None
        cur.nextset()
        row = cur.fetchone()
        assert row is not None
        if not held:
            self._lost_lease()
        return int(row[0])

    def _lost_lease(self) -> None:
        """This node's lease is gone (another node took over, or it lapsed): roll back,
        tell the node, and refuse the write."""
        self._rollback()
        self.coordination.lease_lost()
        raise LineupError(
            "store_unavailable",
            f"node {self.coordination.node_id!r} lost its lease on {self.path}; nothing was changed "
            "(it stops and registers again)",
            hint="retry the same call_id: it replays on whichever node answers",
        )

    def _commit(self, xid: int) -> None:
        """COMMIT; when the connection is lost on the way, connect again and ask the server
        how transaction `xid` ended (`txid_status`): committed is success; aborted, or an
        answer that cannot be had, is `store_unavailable` and none of the batch's effects
        happen (the facts re-drive it: a retry with the same call_id replays either way).
        """
        import psycopg

        try:
            self._main.execute("COMMIT")
            self._main.sync()  # in a pipeline: COMMIT goes now, and its answer is awaited
            return
        except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
            lost = str(exc).strip() or type(exc).__name__
        outcome: str | None = None
        with contextlib.suppress(Exception):
            self._main.conn.close()  # its state is unknown: ask on a new one
        with contextlib.suppress(Exception):
            self._reconnect_if_lost()
            row = self._main.execute("SELECT txid_status(?)", (xid,)).fetchone()
            outcome = str(row[0]) if row and row[0] is not None else None
        if outcome == "committed":
            log.warning(
                "%s: the connection was lost during COMMIT; the commit had landed", self.path
            )
            return
        said = (
            "nothing was changed"
            if outcome == "aborted"
            else "whether it committed is not known: nothing it decided was done, and the "
            "runtime re-drives it from the facts"
        )
        lost = scrub(lost, self._url)
        raise LineupError(
            "store_unavailable",
            f"{self.path}: the connection was lost during COMMIT ({lost}); {said}",
            hint="retry the same call_id: it replays whichever way the commit went",
        )

    def _migrate(self, db: PgConnection) -> None:
        """Create the tables at `SCHEMA_VERSION` (under the migration lock, so two
        runtimes opening a new database at once create them once), or move those there
        forward through the PostgreSQL twins of the steps (`PG_MIGRATIONS`, one
        transaction); a newer or unknown version is `store_schema_unsupported`."""
        db.execute("BEGIN")
        try:
            db.execute("SELECT pg_advisory_xact_lock(?)", (_MIGRATE_LOCK,))
            exists = db.execute("SELECT to_regclass('meta') IS NOT NULL").fetchone()
            if not (exists and exists[0]):
                for stmt in (*pg_schema(), *NODE_TABLES):
                    db.execute(stmt)
                db.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
                db.execute("COMMIT")
                return
            row = db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
            had_owners = db.execute("SELECT to_regclass('owners') IS NOT NULL").fetchone()
            for stmt in NODE_TABLES:  # a database one runtime served before nodes
                db.execute(stmt)
            text = str(row[0]) if row else ""
            version = int(text) if text.isdigit() else 0
            if not (had_owners and had_owners[0]) and version >= PG_FIRST_VERSION:
                for stmt, args in adopt_unowned(self.coordination.node_id):
                    db.execute(stmt, args)
            if PG_FIRST_VERSION <= version < SCHEMA_VERSION:  # each step's twin, in order
                for step in range(version + 1, SCHEMA_VERSION + 1):
                    for stmt in PG_MIGRATIONS[step]:
                        db.execute(stmt)
                db.execute(
                    "UPDATE meta SET value=? WHERE key='schema_version'", (str(SCHEMA_VERSION),)
                )
                version = SCHEMA_VERSION
            db.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(Exception):
                db.execute("ROLLBACK")
            raise
        if version != SCHEMA_VERSION:
            written = (
                "a newer LineUp wrote it" if version > SCHEMA_VERSION else "no LineUp wrote it"
            )
            raise LineupError(
                "store_schema_unsupported",
                f"{self.path} has store schema {text or 'none'} ({written}); this runtime "
                f"reads schemas {PG_FIRST_VERSION} to {SCHEMA_VERSION} on PostgreSQL",
            )

    # -- errors --------------------------------------------------------------------------
    def _mapped(self, exc: BaseException) -> BaseException:
        """The stable error for a database failure (the password scrubbed from it), or the
        exception itself for a programming error."""
        import psycopg

        if isinstance(
            exc,
            psycopg.IntegrityError
            | psycopg.errors.TransactionRollback
            | psycopg.errors.SerializationFailure
            | psycopg.errors.DeadlockDetected,
        ):  # another node's write first (a key, a serialization failure, a deadlock)
            text = scrub(str(exc).strip().partition("\n")[0] or type(exc).__name__, self._url)
            return StoreRace(self.path, text)
        if isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
            text = scrub(str(exc).strip() or type(exc).__name__, self._url)
            return LineupError("store_unavailable", f"{self.path}: {text}; nothing was changed")
        if isinstance(exc, psycopg.Error):
            return exc
        mapped = store_error(exc, self.path)  # the fault points' emulated disk errors
        return mapped if mapped is not None else exc

    def _read_failed(self, exc: Exception) -> BaseException:
        """What a failed statement outside a transaction raises: its stable error."""
        if self._is_database_error(exc):
            return self._mapped(exc)
        return exc

    @staticmethod
    def _is_database_error(exc: BaseException) -> bool:
        return is_database_error(exc)

    # -- transactions --------------------------------------------------------------------
    @contextlib.contextmanager
    def transaction(self, *, fault_points: bool = True) -> Iterator[_Router]:
        """`BEGIN` … COMMIT on the writer connection (after any batch in flight); any
        exception rolls everything back.

        Raises:
            LineupError: `store_unavailable` when the database fails (nothing kept).
        """
        with self._writing(), self._transaction(fault_points) as db:
            yield db

    @contextlib.contextmanager
    def _transaction(self, fault_points: bool) -> Iterator[_Router]:
        try:
            if fault_points:
                faults.hit("commit.before")
            self._reconnect_if_lost()
            xid = self._begin()
        except Exception as exc:
            if self._is_database_error(exc):
                raise self._mapped(exc) from None
            raise
        try:
            yield self.db
            if fault_points:
                faults.hit("commit.after_write")
            self._commit(xid)
            self.commits += 1
        except BaseException as exc:
            self._rollback()
            if self._is_database_error(exc):
                raise self._mapped(exc) from None
            raise
        if fault_points:
            faults.hit("commit.after")

    def _rollback(self) -> None:
        with contextlib.suppress(Exception):
            if not self._main.conn.closed and self._main.in_transaction:
                self._main.execute("ROLLBACK")

    def batch(self, steps: Sequence[Callable[[SqlFacts], T]]) -> list[T | BaseException]:
        """Group commit (see `_batch`), holding the write lock: on the store thread, or on
        the caller's when called directly."""
        with self._writing():
            return self._batch(steps)

    def _batch(self, steps: Sequence[Callable[[SqlFacts], T]]) -> list[T | BaseException]:
        """Group commit, as `Store.batch`: every step in one `BEGIN … COMMIT`; a step that
        raises writes nothing and gets its exception; a database failure rolls the whole
        batch back and is raised.

        The batch is pipelined and first runs without savepoints (they cost two round trips
        a step), its guards checked as results arrive, and the acceptance reads its steps
        name (`ReadingStep`) sent ahead of the first one, so they all ride its first round
        trip (each is sent again where its step stands and compared before COMMIT:
        `SqlFacts.read_ahead`); only when a step raises, loses its
        race or has a write refused is the transaction rolled back and the batch run again
        carefully: a savepoint per step, each guard checked where it is written
        (`store.pg_batch`).
        A step only reads facts and returns its decision, so running it again decides again
        on the same facts.

        Raises:
            LineupError: `store_unavailable` (nothing of the batch kept — or, when the
                connection was lost during COMMIT and the server cannot say how it ended,
                in doubt: the caller performs none of the batch's effects and the facts
                re-drive it).
        """
        try:
            faults.hit("commit.before")
            self._reconnect_if_lost()
        except Exception as exc:
            if self._is_database_error(exc):
                raise self._mapped(exc) from None
            raise
        main = self._main
        try:
            with main.pipelined():
                out, xid = run_pipelined(
                    main, self.facts, self.coordination.guard(), self._lost_lease, steps
                )
                faults.hit("commit.after_write")
                self._commit(xid)
            self.commits += 1
        except BaseException as exc:
            self._rollback()
            if self._is_database_error(exc):
                raise self._mapped(exc) from None
            raise
        faults.hit("commit.after")
        return out

    # -- reads ---------------------------------------------------------------------------
    def one(self, sql: str, args: tuple[Any, ...] = ()) -> Any:
        """The first row of a read, or None."""
        try:
            self._reconnect_if_lost()
            return self.db.execute(sql, args).fetchone()
        except Exception as exc:
            if self._is_database_error(exc):
                raise self._mapped(exc) from None
            raise

    def all(self, sql: str, args: tuple[Any, ...] = ()) -> list[Any]:
        """Every row of a read."""
        try:
            self._reconnect_if_lost()
            return list(self.db.execute(sql, args).fetchall())
        except Exception as exc:
            if self._is_database_error(exc):
                raise self._mapped(exc) from None
            raise

    def set_meta(self, key: str, value: str) -> None:
        """Write a value of the meta table (its own transaction)."""
        with self.transaction(fault_points=False):
            self.facts.set_meta(key, value)

    def meta(self, key: str) -> str | None:
        """A value from the meta table."""
        row = self.one("SELECT value FROM meta WHERE key=?", (key,))
        return str(row[0]) if row else None

    #: Installed bundles are kept in the database (a node with an empty cache unpacks them).
    keeps_bundles = True

    def save_bundle(self, digest: str, data: bytes) -> None:
        """Record an installed version's verified bundle (inside the install's transaction;
        the same bytes again change nothing)."""
        self.db.execute(
            "INSERT INTO bundles (manifest_sha256, bytes) VALUES (?, ?) ON CONFLICT DO NOTHING",
            (digest, data),
        )

    def load_bundle(self, digest: str) -> bytes | None:
        """The recorded bundle of the version whose manifest has `digest`, or None."""
        row = self.one("SELECT bytes FROM bundles WHERE manifest_sha256=?", (digest,))
        return bytes(row[0]) if row is not None else None

    @property
    def round_trips(self) -> int:
        """Statements sent to the server since open (the benchmark's count)."""
        return self.db.round_trips

    def dump(self) -> dict[str, list[tuple[Any, ...]]]:
        """Every row of every table, columns and order as the SQLite store dumps them (the
        `rowid` column left out, rows in its order)."""
        tables = [
            str(r[0])
            for r in self.all(
                "SELECT table_name FROM information_schema.tables "
                "WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' "
                "ORDER BY table_name"
            )
        ]
        out: dict[str, list[tuple[Any, ...]]] = {}
        for table in tables:
            if table in NODE_TABLE_NAMES:  # who runs what: not facts
                continue
            columns = [
                str(r[0])
                for r in self.all(
                    "SELECT column_name FROM information_schema.columns "
                    "WHERE table_schema = current_schema() AND table_name = ? "
                    "AND column_name <> 'rowid' ORDER BY ordinal_position",
                    (table,),
                )
            ]
            if table == "bundles":  # the bytes are the bundle files': the digests only
                columns = ["manifest_sha256"]
            rows = self.all(f'SELECT {", ".join(columns)} FROM "{table}" ORDER BY rowid')
            out[table] = [tuple(r) for r in rows]
        return out

    def close(self) -> None:
        """Close the connections (after any batch in flight), which releases the runtime's
        lock."""
        with self._conn_lock:
            self._closed = True
        self.coordination.leave()
        self.coordination.close()
        with self._lock:
            for conn in (self._main, self._reader):
                if conn is not None:
                    with contextlib.suppress(Exception):
                        conn.conn.close()
