"""Several runtime nodes on one PostgreSQL database (SPEC 15, "Several nodes").

A node registers in `nodes` with a lease judged by the database's clock (`now()`) and an
epoch (the registering transaction's id, so it only grows); a heartbeat renews the lease.
Every transaction the node writes in first checks, in the same transaction, that its row
still stands with its epoch and a live lease (`LEASE_GUARD`, `FOR KEY SHARE`): another node
takes a lapsed node's sessions over by deleting its row (which waits for any transaction
of that node in flight), so a node that was stopped or partitioned and resumes can write
nothing more, and stops and registers again.

Who owns an App session (delivers its calls, drives its activations, relays its Host
intents, fires its deadlines) is the `owners` table: the node whose call created it, or
the node that took it over. Nodes wake each other through `LISTEN/NOTIFY` on one channel
per schema, polling as the fallback: `s:`/`a:`/`h:` work for an App session's owner (pump
it, drive an activation, relay Host intents), `c:<call_id>` a call's final was committed,
`d:<app_session_id>` its session data changed, `r:` the installed apps changed, `n:<id>` a
node registered.

`Nodes` is a node's `Coordination`: for the facts, the owner filters, the row locks and
the notifications of the transaction at hand; for the runtime, its two background threads
on connections of their own — the heartbeat (which also takes lapsed nodes' sessions over)
and the listener — and its registration again after a lost lease (`rejoin`).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import socket
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from lineup_runtime_lite.coordination import Statement
from lineup_sdk.errors import LineupError

__all__ = [
    "DEFAULT_LEASE_S",
    "LEASE_GUARD",
    "NODE_TABLES",
    "NODE_TABLE_NAMES",
    "Nodes",
    "adopt_unowned",
    "check_lease_s",
    "check_node_id",
    "default_node_id",
    "live_nodes",
]

log = logging.getLogger("lineup.runtime")

#: A node's lease unless configured (SPEC 15: tests use 1 s or less).
DEFAULT_LEASE_S = 10.0
#: The coordination tables (outside the facts: `store_dump()` leaves them out).
NODE_TABLES = (
    "CREATE TABLE IF NOT EXISTS nodes (node_id TEXT PRIMARY KEY, epoch BIGINT NOT NULL, "
    "lease_until TIMESTAMPTZ NOT NULL, registered TIMESTAMPTZ NOT NULL DEFAULT now())",
    "CREATE TABLE IF NOT EXISTS owners (app_session_id TEXT PRIMARY KEY, node_id TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS owners_node ON owners (node_id)",
)
#: The names of those tables.
NODE_TABLE_NAMES = ("nodes", "owners")
#: The first statement of every transaction a node writes in: a row means the lease holds.
LEASE_GUARD = (
    "SELECT 1 FROM nodes WHERE node_id=? AND epoch=? AND lease_until > now() FOR KEY SHARE"
)
_MAX_NODE_ID = 200


def default_node_id(apps_dir: object) -> str:
    """The hostname and the apps cache path: one node per cache on a machine."""
    return f"{socket.gethostname()}:{apps_dir}"[:_MAX_NODE_ID]


def check_node_id(node_id: object) -> str:
    if not (isinstance(node_id, str) and 0 < len(node_id) <= _MAX_NODE_ID):
        raise LineupError(
            "usage_invalid",
            f"node_id must be a string of 1 to {_MAX_NODE_ID} characters, not {node_id!r}",
        )
    if not node_id.isprintable():
        raise LineupError("usage_invalid", f"node_id {node_id!r} has unprintable characters")
    return node_id


def check_lease_s(lease_s: object) -> float:
    if isinstance(lease_s, bool) or not (
        isinstance(lease_s, int | float) and 0.2 <= lease_s <= 3600
    ):
        raise LineupError(
            "usage_invalid",
            f"node_lease_s must be a number of seconds in [0.2, 3600], not {lease_s!r}",
        )
    return float(lease_s)


def live_nodes(conn: Any) -> list[str]:
    """The ids of the nodes whose lease is live (an autocommit psycopg connection whose
    search path is the runtime's schema; none when the tables are not there)."""
    row = conn.execute("SELECT to_regclass('nodes') IS NOT NULL").fetchone()
    if not (row and row[0]):
        return []
    rows = conn.execute(
        "SELECT node_id FROM nodes WHERE lease_until > now() ORDER BY node_id"
    ).fetchall()
    return [str(r[0]) for r in rows]


def adopt_unowned(node_id: str) -> tuple[Statement, ...]:
    """What makes the App sessions of a database one runtime served before nodes (no
    `owners` table yet) the sessions of `node_id`, run once where that table is made, in
    the same transaction: the owner of each, and the node's row with a lapsed lease (should
    the node never register, another takes them over as from a lost node)."""
    return (
        (
            "INSERT INTO nodes (node_id, epoch, lease_until) VALUES (?, 0, now()) "
            "ON CONFLICT DO NOTHING",
            (node_id,),
        ),
        (
            "INSERT INTO owners (app_session_id, node_id) SELECT app_session_id, ? "
            "FROM app_sessions ON CONFLICT DO NOTHING",
            (node_id,),
        ),
    )


def _lock_key(schema: str | None, node_id: str) -> int:
    digest = hashlib.sha256(f"lineup-node\0{schema or ''}\0{node_id}".encode()).digest()[:8]
    return int.from_bytes(digest, "big", signed=True)


def channel_of(schema: str | None) -> str:
    """The notification channel of the runtime in `schema` (or the default one)."""
    if schema is None:
        return "lineup_wake"
    return "lineup_" + hashlib.sha256(schema.encode()).hexdigest()[:16]


class Nodes:
    """A registered node: its lease, heartbeat, takeovers and wake-ups, and what the facts
    add to a transaction on a database of several nodes.

    `connect()` gives a new autocommit psycopg connection on the runtime's schema;
    `writing()` says whether the facts' statements go to the writer in a transaction (a
    step's reads there lock the App session they read first); `mapped(exc)` is the stable
    error for a database failure. `on_taken(session_ids)`, `on_lost()` and
    `on_wake(payloads)` are called on the heartbeat / listener threads; the caller hands
    them to its loop (`on_wake([])` is the polling tick).
    """

    def __init__(
        self,
        connect: Callable[[], Any],
        *,
        node_id: str,
        lease_s: float,
        schema: str | None,
        shown: str,
        writing: Callable[[], bool] = lambda: False,
        mapped: Callable[[BaseException], BaseException] = lambda exc: exc,
    ) -> None:
        self._connect = connect
        self._writing = writing
        self._mapped = mapped
        #: The App sessions a step locked (`lock`), once per step and key.
        self._locked: set[tuple[str, tuple[Any, ...]]] = set()
        self.node_id = node_id
        self.lease_s = lease_s
        self.channel = channel_of(schema)
        self._key = _lock_key(schema, node_id)
        self._shown = shown
        self.epoch = 0
        self.lost = False
        #: Whether another node's lease was live at the last heartbeat: only then does a
        #: final need a notification (a waiter elsewhere); polling covers the moment between.
        self.alone = True
        self.on_taken: Callable[[list[str]], None] = lambda sids: None
        self.on_lost: Callable[[], None] = lambda: None
        self.on_wake: Callable[[list[str]], None] = lambda payloads: None
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._control: Any = None
        self._listener: Any = None
        #: Every connection the node holds, so that stopping closes them all, and the
        #: generation they belong to: a connection opened for a stopped generation (a
        #: thread that outlived `stop`, a registration racing `close`) is closed at once.
        self._conns: set[Any] = set()
        self._conns_lock = threading.Lock()
        self._gen = 0
        self._closed = False
        self._outgoing: list[str] = []
        self._out_lock = threading.Lock()
        self._out_ready = threading.Event()

    # -- in a transaction: what the facts run (`Coordination`) ------------------------
    def mine(self, column: str, *, or_none: bool = False) -> tuple[str, tuple[Any, ...]]:
        # one lookup of `owners` per row found (its key), never the node's whole list,
        # which grows with every App session the node ever served
        owned = f"EXISTS (SELECT 1 FROM owners w WHERE w.app_session_id = {column} AND w.node_id=?)"
        if or_none:  # a row of no App session: any node's (its end is guarded)
            return f" AND ({column} IS NULL OR {owned})", (self.node_id,)
        return f" AND {owned}", (self.node_id,)

    def lock(self, where: str, args: tuple[Any, ...]) -> Sequence[Statement]:
        # `SELECT … FOR UPDATE`: the reads after it see whatever the last holder committed
        if not self._writing():
            return ()
        key = (where, args)
        if key in self._locked:
            return ()
        self._locked.add(key)
        return ((f"SELECT 1 FROM app_sessions WHERE {where} FOR UPDATE", args),)

    def lock_all(self, pairs: Sequence[tuple[str, str]]) -> Sequence[Statement]:
        ordered = sorted(set(pairs))
        if not ordered:
            return ()
        marks = ", ".join("(?, ?)" for _ in ordered)
        return (
            (
                f"SELECT 1 FROM app_sessions WHERE (conversation_id, scope) IN (VALUES {marks}) "
                "ORDER BY app_session_id FOR UPDATE",
                tuple(v for pair in ordered for v in pair),
            ),
        )

    def new_step(self) -> None:
        self._locked.clear()

    def owner(self, app_session_id: str) -> Sequence[Statement]:
        return (
            (
                "INSERT INTO owners (app_session_id, node_id) VALUES (?, ?)",
                (app_session_id, self.node_id),
            ),
        )

    def wake(self, payloads: Sequence[str]) -> Sequence[Statement]:
        return tuple(("SELECT pg_notify(?, ?)", (self.channel, p)) for p in payloads)

    def tell(self, payload: str) -> Sequence[Statement]:
        # a final committed here may have a waiter on another node only while one is live
        if self.alone:
            return ()
        return (("SELECT pg_notify(?, ?)", (self.channel, payload)),)

    # -- the writer's transactions ------------------------------------------------------
    def guard(self) -> Statement:
        """The first statement of every transaction this node writes in: a row means its
        lease holds (`LEASE_GUARD` with this node's id and epoch)."""
        return LEASE_GUARD, (self.node_id, self.epoch)

    def lease_lost(self) -> None:
        """The guard found no row: another node took over, or the lease lapsed."""
        self.lost = True
        self.on_lost()

    # -- on the runtime's loop (`Coordination`) ---------------------------------------
    def join(
        self,
        *,
        on_wake: Callable[[list[str]], None],
        on_taken: Callable[[list[str]], None],
        on_lost: Callable[[], None],
    ) -> None:
        self.on_wake, self.on_taken, self.on_lost = on_wake, on_taken, on_lost
        self.start()

    def rejoin(self) -> None:
        """After the lease was lost: stop the threads and register again (a new epoch;
        the sessions another node took over stay its).

        Raises:
            LineupError: `store_unavailable` or `runtime_locked` (never psycopg's own).
        """
        self.stop()
        self.registered()

    def registered(self) -> int:
        """`register`, a database failure raised as its stable error."""
        import psycopg

        try:
            return self.register()
        except psycopg.Error as exc:
            raise self._mapped(exc) from None

    # -- connections ---------------------------------------------------------------------
    def _open(self, gen: int) -> Any:
        """A new connection of generation `gen`, kept until `stop` (refused after it)."""
        conn = self._connect()
        with self._conns_lock:
            if not self._closed and gen == self._gen:
                self._conns.add(conn)
                return conn
        with contextlib.suppress(Exception):
            conn.close()
        raise LineupError("store_unavailable", f"node {self.node_id!r} was stopped")

    def _drop(self, conn: Any) -> None:
        with self._conns_lock:
            self._conns.discard(conn)
        with contextlib.suppress(Exception):
            conn.close()

    def _usable(self, conn: Any) -> bool:
        return conn is not None and not conn.closed and not conn.broken

    # -- registration --------------------------------------------------------------------
    def register(self) -> int:
        """Register (again) and return the new epoch.

        Whoever registers replaces exactly the row it saw (none, or one of a given epoch:
        `_claim`), so of two processes registering one id at the same moment one writes
        its row and the other finds it there: never a raw unique-key error, never both
        (SPEC 16.1). The id's advisory lock says whether the row it saw can be replaced at
        once: a process that takes the lock is the only live one with this id, so a live
        row there was left by one that died. Without the lock (another live process holds
        it), this waits at most one lease length — a restart whose old process is stopped
        or shutting down — and then registers only where no live row stands; otherwise, or
        when another registration wrote first, it is refused (`runtime_locked`)."""
        import psycopg

        if not self._usable(self._control):
            self._control = self._open(self._gen)
        conn = self._control
        deadline = time.monotonic() + self.lease_s
        trust_lock = True  # until another registration is seen to have written first
        while True:
            try:
                got = conn.execute("SELECT pg_try_advisory_lock(%s)", (self._key,)).fetchone()[0]
                row = conn.execute(
                    "SELECT epoch, lease_until > now() FROM nodes WHERE node_id=%s",
                    (self.node_id,),
                ).fetchone()
                late = time.monotonic() >= deadline
                if (got and trust_lock) or (late and (row is None or not row[1])):
                    epoch = self._claim(conn, None if row is None else int(row[0]))
                    if epoch is not None:
                        break
                    trust_lock = False
            except (
                psycopg.IntegrityError,
                psycopg.errors.TransactionRollback,
                psycopg.errors.SerializationFailure,
                psycopg.errors.DeadlockDetected,
            ):
                trust_lock = False  # another registration at the same moment: look again
                if time.monotonic() >= deadline:
                    raise
                continue
            if late:
                raise LineupError(
                    "runtime_locked",
                    f"node {self.node_id!r} is already running on {self._shown}",
                    hint="stop it, or give this node another --node-id (LINEUP_NODE_ID)",
                )
            time.sleep(0.05)
        # the nodes there learn at once that finals need telling (`alone`)
        conn.execute("SELECT pg_notify(%s, %s)", (self.channel, f"n:{self.node_id}"))
        self.epoch = int(epoch)
        self.lost = False
        self._take_over(conn)  # lapsed nodes' sessions: recovered with this node's own
        return self.epoch

    def _claim(self, conn: Any, seen: int | None) -> int | None:
        """Write this node's row in place of the one seen (`seen`: its epoch, or None for
        no row) and return the new epoch; None when another registration changed the row
        meanwhile (its row stands)."""
        with conn.transaction():
            row = conn.execute(
                "INSERT INTO nodes (node_id, epoch, lease_until) VALUES "
                "(%s, txid_current(), now() + make_interval(secs => %s)) "
                "ON CONFLICT (node_id) DO UPDATE SET epoch=excluded.epoch, "
                "lease_until=excluded.lease_until, registered=now() "
                "WHERE nodes.epoch = %s RETURNING epoch",
                (self.node_id, self.lease_s, seen),
            ).fetchone()
            if row is None:
                return None
        # (the App sessions of a database one runtime served before nodes were adopted
        # once, when the `owners` table was made: `adopt_unowned`; never looked for here)
        return int(row[0])

    def several(self) -> bool:
        """App sessions have owners here (`Coordination`): the runtime looks each up when
        first asked (`OwnedSessions`, `Facts.session_mine`), never loading every one."""
        return True

    # -- threads -------------------------------------------------------------------------
    def start(self) -> None:
        self._stop.clear()
        gen = self._gen
        for name, target in (("heartbeat", self._heartbeat), ("listener", self._listen)):
            thread = threading.Thread(
                target=target, args=(gen,), name=f"lineup-node-{name}", daemon=True
            )
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        """Stop the threads and close every connection of the node (the lease lapses
        unless the caller gave it up: `leave`); `register` and `start` begin again."""
        self._stop.set()
        self._out_ready.set()
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(timeout=5)
        self._threads.clear()
        with self._conns_lock:
            self._gen += 1  # a thread still connecting (join timed out) keeps nothing
            conns, self._conns = self._conns, set()
        for conn in conns:
            with contextlib.suppress(Exception):
                conn.close()
        self._listener = self._control = None

    def close(self) -> None:
        """Stop for good: a registration still running elsewhere (a rejoin racing the
        runtime's close) keeps no connection."""
        with self._conns_lock:
            self._closed = True
        self.stop()

    def leave(self) -> None:
        """Give the lease up at a clean close: another node takes the sessions over at its
        next heartbeat, and a restart with this id registers at once."""
        with contextlib.suppress(Exception):
            if self._control is not None and not self.lost:
                self._control.execute(
                    "UPDATE nodes SET lease_until = now() WHERE node_id=%s AND epoch=%s",
                    (self.node_id, self.epoch),
                )

    def notify(self, payloads: list[str]) -> None:
        """Send wake-ups from the heartbeat thread (never the caller's)."""
        with self._out_lock:
            self._outgoing.extend(payloads)
        self._out_ready.set()

    def _heartbeat(self, gen: int) -> None:
        period = self.lease_s / 4
        next_beat = 0.0
        while not self._stop.is_set() and gen == self._gen:
            conn = self._control
            try:
                if not self._usable(conn):
                    conn = self._control = self._open(gen)
                self._send_outgoing(conn)
                if time.monotonic() >= next_beat:
                    next_beat = time.monotonic() + period
                    if not self._beat(conn):
                        self.lost = True
                        self.on_lost()
                        return
                    taken = self._take_over(conn)
                    if taken:
                        self.on_taken(taken)
            except Exception as exc:  # the database is away: the lease decides
                log.debug("node heartbeat: %s", exc)
                if conn is not None:
                    self._drop(conn)
                if self._control is conn:
                    self._control = None
                self._stop.wait(min(period, 0.25))
                continue
            self._out_ready.wait(max(0.0, next_beat - time.monotonic()))
            self._out_ready.clear()

    def _send_outgoing(self, conn: Any) -> None:
        with self._out_lock:
            out, self._outgoing = self._outgoing, []
        if out:
            conn.execute(
                "SELECT pg_notify(%s, p) FROM unnest(%s::text[]) AS p", (self.channel, out)
            )

    def _beat(self, conn: Any) -> bool:
        row = conn.execute(
            "UPDATE nodes SET lease_until = now() + make_interval(secs => %s) "
            "WHERE node_id=%s AND epoch=%s RETURNING "
            "(SELECT count(*) FROM nodes WHERE lease_until > now() AND node_id <> %s)",
            (self.lease_s, self.node_id, self.epoch, self.node_id),
        ).fetchone()
        if row is None:
            return False
        self.alone = int(row[0]) == 0
        return True

    def _take_over(self, conn: Any) -> list[str]:
        """Delete the rows of nodes whose lease lapsed (waiting for any transaction of
        theirs in flight) and take their sessions: the ids taken."""
        with conn.transaction():
            gone = conn.execute(
                "DELETE FROM nodes WHERE lease_until < now() AND node_id <> %s RETURNING node_id",
                (self.node_id,),
            ).fetchall()
            # only the lapsed nodes' sessions, through `owners_node` (a beat where no lease
            # lapsed reads the few rows of `nodes`, never the owners of every session);
            # a statement of its own, so it sees what their last transactions committed
            rows = (
                conn.execute(
                    "UPDATE owners SET node_id=%s WHERE node_id = ANY(%s) RETURNING app_session_id",
                    (self.node_id, [str(r[0]) for r in gone]),
                ).fetchall()
                if gone
                else []
            )
        taken = [str(r[0]) for r in rows]
        if taken:
            log.warning("node %s took over %d App sessions", self.node_id, len(taken))
        return taken

    def _listen(self, gen: int) -> None:
        poll_s = min(1.0, self.lease_s / 2)
        listener: Any = None
        while not self._stop.is_set() and gen == self._gen:
            try:
                if not self._usable(listener):
                    listener = self._listener = self._open(gen)
                    listener.execute(f'LISTEN "{self.channel}"')
                    self.on_wake([])  # what was sent while nobody listened: polled
                got = [n.payload for n in listener.notifies(timeout=poll_s, stop_after=1)]
                with contextlib.suppress(Exception):  # whatever else arrived with it
                    got += [n.payload for n in listener.notifies(timeout=0)]
                if any(p.startswith("n:") and p[2:] != self.node_id for p in got):
                    self.alone = False  # a node joined: tell it what it may wait for
                # nothing heard: the polling tick, while another node could have sent
                # something this node missed (alone, nothing can be missed)
                if not self._stop.is_set() and (got or not self.alone):
                    self.on_wake(got)
            except Exception as exc:
                log.debug("node listener: %s", exc)
                if listener is not None:
                    self._drop(listener)
                if self._listener is listener:
                    self._listener = None
                listener = None
                self._stop.wait(0.25)
