"""The PostgreSQL store (SPEC 15, one node): the SQLite store's tables, facts and batches on
a PostgreSQL database, through `psycopg` 3 (the `postgres` extra).

The facts (`SqlFacts`) run the very statements they run on SQLite; `_PgConnection` gives a
psycopg connection the face `SqlFacts` reads (`?` placeholders, rows by name and index,
`in_transaction`). The tables are the SQLite schema's (`schema.pg_schema()`), each with a
`rowid` identity column standing in for SQLite's (insertion order); `dump()` leaves it out.

Any number of runtime nodes may open one database (`store.nodes`): each registers with a
lease, every transaction it writes in checks that lease first, and a second node with the
same id and a live lease is refused (`runtime_locked`). Migrations run under a
transaction-level advisory lock. A password in the URL is accepted, shown redacted
everywhere (`redact_url`) and warned about once per open.
"""

from __future__ import annotations

import contextlib
import logging
import re
import secrets
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import quote, unquote

from lineup_runtime_lite.core.port import LostRace, reads_of
from lineup_runtime_lite.store import faults
from lineup_runtime_lite.store.facts import SqlFacts
from lineup_runtime_lite.store.nodes import (
    DEFAULT_LEASE_S,
    LEASE_GUARD,
    NODE_TABLES,
    NodeLease,
    default_node_id,
    live_nodes,
)
from lineup_runtime_lite.store.schema import (
    PG_FIRST_VERSION,
    PG_MIGRATIONS,
    SCHEMA_VERSION,
    pg_schema,
)
from lineup_runtime_lite.store.sqlite import StoreRace, store_error
from lineup_sdk import __version__
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
_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_SCHEMES = ("postgresql://", "postgres://")
INSTALL_HINT = (
    'install the PostgreSQL store: pip install ".[postgres]" in a LineUp checkout, or '
    f'pip install "lineup_sdk-{__version__}-py3-none-any.whl[postgres]" beside the wheel'
)


def private_schema(command: str) -> str:
    """A new schema name for one `lineup run`/`test`/`dev` (`lineup_run_3f2a…`)."""
    return f"lineup_{command}_{secrets.token_hex(6)}"


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
    _installed()
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


def _installed() -> None:
    try:
        import psycopg  # noqa: F401
    except ImportError:
        raise LineupError(
            "usage_invalid",
            "a postgresql:// database needs psycopg, which is not installed",
            hint=INSTALL_HINT,
        ) from None


def is_postgres_url(target: object) -> bool:
    """Whether `target` names a PostgreSQL database (`postgresql://…` or `postgres://…`)."""
    return isinstance(target, str) and target.startswith(_SCHEMES)


def _userinfo(url: str) -> tuple[str, str | None, str]:
    """The user, the password (None when there is none) and what follows them, as the URL
    spells them: up to the last `@` before the query, so a password holding a raw `@`, `/`
    or `:` is taken whole (libpq would cut it short; `check_url` refuses that)."""
    rest = url.partition("://")[2]
    query = rest.find("?")
    at = (rest if query < 0 else rest[:query]).rfind("@")
    if at < 0:
        return "", None, rest
    user, colon, password = rest[:at].partition(":")
    return user, (password if colon else None), rest[at + 1 :]


def _query_passwords(url: str) -> list[str]:
    """The `password=` values of the URL's query, as written."""
    _, _, query = url.partition("?")
    return [
        value
        for key, _, value in (pair.partition("=") for pair in query.split("&"))
        if key == "password" and value
    ]


def _password(url: str) -> str | None:
    """The password as libpq reads it (percent-escapes decoded), or None."""
    _, password, _ = _userinfo(url)
    if password:
        return unquote(password)
    for value in _query_passwords(url):
        return unquote(value)
    return None


def has_password(url: str) -> bool:
    """Whether the URL carries a password (in its authority or as `?password=`)."""
    return bool(_password(url))


def _secrets(url: str) -> list[str]:
    """Every spelling of the URL's password a message could carry (as written, decoded,
    encoded again, and as libpq parsed it), longest first."""
    raw = [p for p in (_userinfo(url)[1], *_query_passwords(url)) if p]
    found: set[str] = set()
    for text in raw:
        found |= {text, unquote(text), quote(unquote(text), safe="")}
    with contextlib.suppress(Exception):
        from psycopg.conninfo import conninfo_to_dict

        parsed = conninfo_to_dict(url).get("password")
        if parsed:
            found.add(str(parsed))
    return sorted((s for s in found if s), key=len, reverse=True)


def scrub(text: str, url: str) -> str:
    """`text` with every spelling of `url`'s password replaced by `***`."""
    for secret in _secrets(url):
        text = text.replace(secret, "***")
    return text


def redact_url(url: str) -> str:
    """`url` with any password (in the authority or as `?password=`) shown as `***`,
    whatever its characters."""
    scheme, sep, _ = url.partition("://")
    user, password, after = _userinfo(url)
    shown = f"{scheme}{sep}{user}:***@{after}" if password is not None else url
    if "?" not in shown:
        return shown
    head, _, query = shown.partition("?")
    pairs = [
        "password=***" if pair.partition("=")[0] == "password" else pair
        for pair in query.split("&")
    ]
    return f"{head}?{'&'.join(pairs)}"


def check_url(url: str) -> None:
    """A URL libpq can read, whose password libpq reads as written (SPEC 16.2).

    Raises:
        LineupError: `usage_invalid` (the URL shown redacted, the password nowhere) for a
            bad percent-escape, an unknown option, or a password holding a raw `@` or `/`.
    """
    from psycopg.conninfo import conninfo_to_dict

    shown = redact_url(url)
    encode = "percent-encode it: % as %25, @ as %40, / as %2F, : as %3A"
    try:
        parsed = conninfo_to_dict(url)
    except Exception as exc:  # libpq's parse error quotes what it could not read
        text = str(exc).strip()
        if "percent-encoded" in text:
            why = "it holds a % that is not followed by two hex digits"
            hint = f"a literal % in the URL (in a password, say) must be written %25; {encode}"
        elif "query parameter" in text:
            name = text.partition('"')[2].rpartition('"')[0]
            why = f"libpq knows no option {scrub(name, url)!r}"
            hint = "see libpq's connection parameters for the options a URL may carry"
        else:
            why = f"libpq cannot read it ({scrub(text, url)})"
            hint = encode
        raise LineupError(
            "usage_invalid", f"the PostgreSQL URL {shown} is not usable: {why}", hint=hint
        ) from None
    _, password, _ = _userinfo(url)
    if password is not None and parsed.get("password") != unquote(password):
        raise LineupError(
            "usage_invalid",
            f"the PostgreSQL URL {shown} is not usable: its password holds a character a "
            "URL must percent-encode",
            hint=f"{encode}; or leave the password out and use PGPASSWORD or ~/.pgpass",
        )


def check_schema_name(schema: str) -> str:
    """A schema name the runtime may create and drop (SPEC 16.3, "Names"): lower-case
    letters, digits and `_`, at most 63, not starting with a digit, matched in full, and
    not PostgreSQL's own (`pg_*`).

    Raises:
        LineupError: `usage_invalid`.
    """
    if (
        not isinstance(schema, str)
        or _SCHEMA_NAME.fullmatch(schema) is None
        or schema.startswith("pg_")
    ):
        raise LineupError(
            "usage_invalid",
            f"{schema!r} is not a usable schema name",
            hint="lower-case letters, digits and _ (at most 63, not starting with a digit, "
            "not pg_...)",
        )
    return schema


class _Row(tuple[Any, ...]):
    """A row read by index (`row[0]`) or by column name (`row["state"]`), as `sqlite3.Row`."""

    _index: dict[str, int]

    def __new__(cls, values: Sequence[Any], index: dict[str, int]) -> _Row:
        row = super().__new__(cls, values)
        row._index = index
        return row

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            return tuple.__getitem__(self, self._index[key])
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        return list(self._index)


def _rows(cursor: Any) -> Callable[[Sequence[Any]], _Row]:
    description = cursor.description or ()
    index: dict[str, int] = {}
    for i, column in enumerate(description):
        index.setdefault(column.name, i)  # `s.*, a.state`: the first of a name, as SQLite

    def make(values: Sequence[Any]) -> _Row:
        return _Row(values, index)

    return make


class _PgConnection:
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
        return _PipelinedCursor(self, cur)

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
        self._deferred.append(cur.raw if isinstance(cur, _PipelinedCursor) else cur)
        return True

    def witness(self, cur: Any, taken: Any) -> None:
        """`cur` is a read sent again where a step took `taken`, its result sent ahead of
        the batch (`SqlFacts.read_ahead`): before COMMIT both must agree."""
        self._witnesses.append((cur.raw if isinstance(cur, _PipelinedCursor) else cur, taken))

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


class _PipelinedCursor:
    """A cursor in pipeline mode: reading its rows (or its row count) waits for its result,
    which carries the results before it; a guarded write among those that changed nothing
    is a lost race, raised here."""

    __slots__ = ("_db", "raw")

    def __init__(self, db: _PgConnection, raw: Any) -> None:
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


class _Router:
    """The connection `SqlFacts` and the store's reads see: the writer connection for the
    thread that holds the store's write lock (a batch on the store thread, a transaction on
    the loop), a reader connection (autocommit: committed facts only) for every other read,
    so a read on the event loop never waits for, or lands inside, a batch in flight."""

    def __init__(self, store: PostgresStore) -> None:
        self._store = store

    def _target(self) -> _PgConnection:
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
    def locks_rows(self) -> bool:
        """Whether statements go to the writer in a transaction (a step's reads there lock
        the App session they read first: `SqlFacts._lock`)."""
        return self._store._owner == threading.get_ident()

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
        _installed()
        check_url(url)
        if schema is not None:
            check_schema_name(schema)
        self._url = url
        self._secret = _password(url)
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
        self._reader: _PgConnection | None = None
        #: Set by `close`: no connection is opened after it (a read racing the close
        #: would keep one nobody closes); `_conn_lock` orders the reader's replacement.
        self._closed = False
        self._conn_lock = threading.Lock()
        self._retired_trips = 0
        self._main = self._connect()
        self.db = _Router(self)
        self.facts = SqlFacts(self.db)  # type: ignore[arg-type]
        #: This process as a node of the database (`store.nodes`): registered now.
        self.node = NodeLease(
            self._plain_connection,
            node_id=node_id or default_node_id("store"),
            lease_s=lease_s,
            schema=schema,
            shown=self.path,
        )
        try:
            self._registered()
        except BaseException:
            self.close()
            raise

    def _registered(self) -> None:
        """Register (again): the lease guard and the facts' node follow the new epoch."""
        import psycopg

        try:
            epoch = self.node.register()
        except psycopg.Error as exc:
            raise self._mapped(exc) from None
        self._guard_args = (self.node.node_id, epoch)
        self.facts.node_id = self.node.node_id
        self.facts.channel = self.node.channel
        self.facts.others_live = lambda: not self.node.alone

    def rejoin(self) -> None:
        """After the lease was lost: stop the node's threads and register again (a new
        epoch; the sessions another node took over stay its)."""
        self.node.stop()
        self._registered()

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
    def _connect(self) -> _PgConnection:
        """A new writer connection: the tables created or checked, a lock timeout set."""
        import psycopg

        try:
            conn = psycopg.connect(
                self._url, autocommit=True, row_factory=_rows, connect_timeout=10
            )
        except psycopg.Error as exc:
            raise self._mapped(exc) from None
        try:
            db = _PgConnection(conn)
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
        """After a lost (or rolled-back: `_PgConnection.tainted`) connection, connect again
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

    def _reading(self) -> _PgConnection:
        """The reader connection (opened on first use, again after it was lost)."""
        reader = self._reader
        if reader is not None and not reader.conn.closed and not reader.conn.broken:
            return reader
        import psycopg

        self._refuse_if_closed()
        try:
            conn = psycopg.connect(
                self._url, autocommit=True, row_factory=_rows, connect_timeout=10
            )
        except psycopg.Error as exc:
            raise self._mapped(exc) from None
        fresh = _PgConnection(self._on_schema(conn))
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

        node_id, epoch = self._guard_args
        guard = sql.SQL(LEASE_GUARD.replace("?", "{}")).format(
            sql.Literal(node_id), sql.Literal(epoch)
        )
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
        self.node.lost = True
        self.node.on_lost()
        raise LineupError(
            "store_unavailable",
            f"node {self.node.node_id!r} lost its lease on {self.path}; nothing was changed "
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

    def _migrate(self, db: _PgConnection) -> None:
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
            for stmt in NODE_TABLES:  # a database one runtime served before nodes
                db.execute(stmt)
            text = str(row[0]) if row else ""
            version = int(text) if text.isdigit() else 0
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

    def _is_database_error(self, exc: BaseException) -> bool:
        import sqlite3

        import psycopg

        return isinstance(exc, psycopg.Error | sqlite3.Error | OSError)

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
        carefully: a savepoint per step, each guard checked where it is written (`_steps`).
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
                out, xid = self._run_steps(steps)
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

    #: How often a batch that met a serialization failure or a deadlock (another node's
    #: transaction) runs again from its start.
    RETRIES = 8

    def _run_steps(
        self, steps: Sequence[Callable[[SqlFacts], T]]
    ) -> tuple[list[T | BaseException], int]:
        """The batch's steps in a transaction left open for COMMIT, and its id: first
        pipelined, again carefully when a step raised or lost a race, and from the start
        when the server found a serialization failure or a deadlock."""
        import psycopg

        main = self._main
        for attempt in range(self.RETRIES):
            try:
                guard, xid = self._begin_pipelined()
                out = self._steps(steps, careful=False)
                if out is None:  # a step raised or lost a race: again, carefully
                    main.execute("ROLLBACK")
                    guard, xid = self._begin_pipelined()
                    out = self._steps(steps, careful=True)
                    assert out is not None
                if guard.fetchone() is None:  # arrived with the last step's results
                    self._lost_lease()
                return out, int(xid.fetchone()[0])
            except (psycopg.errors.SerializationFailure, psycopg.errors.DeadlockDetected):
                if attempt == self.RETRIES - 1:
                    raise
                main.recover()
                main.execute("ROLLBACK")
        raise AssertionError("unreachable")

    def _begin_pipelined(self) -> tuple[Any, Any]:
        """BEGIN, the lease guard and the transaction's id, sent with what follows (both
        read before COMMIT, from results that have arrived by then)."""
        self._main.execute("BEGIN")
        guard = self._main.execute(LEASE_GUARD, self._guard_args)
        return guard, self._main.execute("SELECT txid_current()")

    def _steps(
        self, steps: Sequence[Callable[[SqlFacts], T]], *, careful: bool
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

        db, facts = self._main, self.facts
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
                    if not careful and not lost and not self._is_disk_error(exc):
                        db.recover()  # what was sent after the failure is dropped
                        return None
                    if isinstance(exc, psycopg.errors.UniqueViolation):
                        db.recover()
                        exc = LostRace()  # another node wrote the same row first
                    elif self._is_database_error(exc):
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

    @staticmethod
    def _is_disk_error(exc: BaseException) -> bool:
        """The fault points' emulated disk failures (`sqlite3` errors) and OS errors."""
        import sqlite3

        return isinstance(exc, sqlite3.Error | OSError)

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
            if table in ("nodes", "owners"):  # who runs what: not facts
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
        node = getattr(self, "node", None)
        if node is not None:
            node.leave()
            node.close()
        with self._lock:
            for conn in (self._main, self._reader):
                if conn is not None:
                    with contextlib.suppress(Exception):
                        conn.conn.close()
