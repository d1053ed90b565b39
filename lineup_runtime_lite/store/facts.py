"""Every SQL statement the runtime runs on its facts, written once for both engines.

`Facts` is the port (in `lineup_runtime_lite.core.port`, so the pure core reads through it
without loading a database driver); `SqlFacts` implements it over a `SqlConnection`
(`store.connection`: what SQLite's and PostgreSQL's connections both provide). Reads are
here and return typed records (`store.records`); writes are the guarded changes of
`decisions` (`apply`, in `store.writes`), so nothing outside this package writes the facts.
What differs when several nodes share the database — whose App sessions a node's reads
find, the row locks a step takes, the notifications a commit sends — is asked of the
store's `Coordination` (`lineup_runtime_lite.coordination`), never decided here.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

from lineup_build.model import Manifest
from lineup_runtime_lite.coordination import Coordination, Statement
from lineup_runtime_lite.coordination.solo import Solo
from lineup_runtime_lite.core.decisions import Change
from lineup_runtime_lite.core.messages import AgentMessage
from lineup_runtime_lite.core.port import CallRead, Facts, LostRace
from lineup_runtime_lite.core.rows import Action, Activation, Call, Intent, Operation, Session
from lineup_runtime_lite.store.connection import SqlConnection
from lineup_runtime_lite.store.marks import CallMarks
from lineup_runtime_lite.store.records import (
    action_record,
    activation_record,
    call_record,
    item_record,
    operation_record,
    session_record,
    written_call,
)
from lineup_runtime_lite.store.writes import Writes
from lineup_sdk.context import Snapshot

__all__ = ["Facts", "LostRace", "SqlFacts", "written_call"]

_FINAL = ("result", "error")
#: The App session of activation `?` (`SqlFacts._lock`).
_OF_ACTIVATION = "app_session_id = (SELECT app_session_id FROM activations WHERE activation_id=?)"
#: A call and a UI Action in one row shape (the App session's one queue, SPEC 17): `kind`,
#: `key` (call_id / client_id), `client_seq` (actions), `conversation_id` and `scope`
#: (calls), `method` (a call's method / an action's name), then the columns both have.
_CALL_ITEM = (
    "SELECT 'call' AS kind, c.call_id AS key, CAST(NULL AS BIGINT) AS client_seq, c.conversation_id AS "
    "conversation_id, c.scope AS scope, c.method AS method, c.params AS params, c.fingerprint "
    "AS fingerprint, c.app_session_id AS app_session_id, c.activation_id AS activation_id, "
    "c.seq AS seq, c.state AS state"
)
_ACTION_ITEM = (
    "SELECT 'action', u.client_id, u.client_seq, NULL, NULL, u.name, u.params, u.fingerprint, "
    "u.app_session_id, u.activation_id, u.seq, u.state"
)
#: The App session of the UI Action `(?, ?)` by its session and seq (`_lock`).
_OF_SESSION = "app_session_id=?"


class SqlFacts(CallMarks):
    """`Facts` over one database connection: SQLite's, or PostgreSQL's through the store's
    router (`store.postgres`); the statements are written once, in SQL both engines run.
    `coordination` is what differs with several nodes (`Solo` unless the store says)."""

    def __init__(self, db: SqlConnection, coordination: Coordination | None = None) -> None:
        self.db = db
        #: One runtime, or a node among several: the owner filters, row locks and
        #: notifications a transaction adds (nothing for one runtime).
        self.coordination: Coordination = coordination if coordination is not None else Solo()
        self._writes = Writes(db, self.coordination)
        #: Parsed stored manifests by (scope, version, manifest_sha256): a stored manifest
        #: is read once per load; the hash keeps a version installed again apart.
        self._manifests: dict[tuple[str, str, str], Manifest] = {}
        #: Acceptance reads sent ahead of a batch (`read_ahead`), taken in order.
        self._ahead: dict[CallRead, list[tuple[Any, Any]]] = {}

    def _run(self, statements: Sequence[Statement]) -> None:
        """Run what the coordination adds to the transaction at hand."""
        for sql, args in statements:
            self.db.execute(sql, args)

    def _lock(self, where: str, *args: Any) -> None:
        """Before a step reads the facts of the App session(s) `where` names: whatever the
        coordination locks them with (several nodes: `SELECT … FOR UPDATE`, once per step
        and key; the reads after it see what the last holder committed)."""
        self._run(self.coordination.lock(where, args))

    def new_step(self) -> None:
        """A batch step begins (a rolled-back savepoint gave its locks back)."""
        self.coordination.new_step()

    def _mine(self, column: str) -> tuple[str, tuple[Any, ...]]:
        """The condition that `column` (an App session id, named with its table) is this
        node's (nothing with one runtime)."""
        return self.coordination.mine(column)

    def wake(self, payloads: Sequence[str]) -> None:
        """Wake the nodes `payloads` name when this transaction commits (nothing with one
        runtime: `coordination.nodes` lists them)."""
        self._run(self.coordination.wake(payloads))

    # -- calls and messages --------------------------------------------------------------
    def call(self, call_id: str) -> Call | None:
        self._lock("app_session_id = (SELECT app_session_id FROM calls WHERE call_id=?)", call_id)
        row = self.db.execute("SELECT * FROM calls WHERE call_id=?", (call_id,)).fetchone()
        return call_record(row) if row is not None else None

    def latest_message(self, call_id: str) -> AgentMessage | None:
        row = self.db.execute(
            "SELECT body FROM receipts WHERE call_id=? ORDER BY n DESC LIMIT 1", (call_id,)
        ).fetchone()
        if row is None:
            return None
        out: AgentMessage = json.loads(row[0])
        return out

    def messages(self, call_id: str) -> list[AgentMessage]:
        rows = self.db.execute(
            "SELECT body FROM receipts WHERE call_id=? ORDER BY n", (call_id,)
        ).fetchall()
        return [json.loads(r[0]) for r in rows]

    def finals(self, call_ids: list[str]) -> list[AgentMessage]:
        """The committed final messages among `call_ids`."""
        out = []
        for call_id in call_ids:
            msg = self.latest_message(call_id)
            if msg is not None and msg["stage"] in _FINAL:
                out.append(msg)
        return out

    # -- sessions and activations --------------------------------------------------------
    def session(self, conversation_id: str, scope: str) -> Session | None:
        self._lock("conversation_id=? AND scope=?", conversation_id, scope)
        row = self.db.execute(
            "SELECT * FROM app_sessions WHERE conversation_id=? AND scope=?",
            (conversation_id, scope),
        ).fetchone()
        return session_record(row) if row is not None else None

    def call_and_session(
        self, call_id: str, conversation_id: str, scope: str
    ) -> tuple[Call | None, Session | None, Activation | None]:
        """What accepting a call reads: the call (a repeat?) and the conversation's App
        session with its current activation. Both reads are sent before either is read, so
        a pipelining connection (PostgreSQL's in a batch) asks in one round trip."""
        sent = self._ahead.get(CallRead(call_id, conversation_id, scope))
        if sent:  # read ahead of the batch: witnessed where it stands now
            first, second = sent.pop(0)
            row, found = first.fetchone(), second.fetchone()
            again = self._call_and_session_reads(call_id, conversation_id, scope)
            self.db.witness(again[0], row)
            self.db.witness(again[1], found)
        else:
            first, second = self._call_and_session_reads(call_id, conversation_id, scope)
            row, found = first.fetchone(), second.fetchone()
        session, act = self._session_row(found)
        return (call_record(row) if row is not None else None), session, act

    def _call_and_session_reads(
        self, call_id: str, conversation_id: str, scope: str
    ) -> tuple[Any, Any]:
        self._lock("conversation_id=? AND scope=?", conversation_id, scope)
        first = self.db.execute("SELECT * FROM calls WHERE call_id=?", (call_id,))
        return first, self._session_read(conversation_id, scope)

    def read_ahead(self, reads: Sequence[CallRead]) -> None:
        """Send the acceptance reads of a batch's steps before any step runs, so a
        pipelining connection (PostgreSQL's) brings them all with its first round trip.

        A read taken ahead may be stale by the time its step runs (an earlier step of the
        batch wrote what it reads), so `call_and_session` sends it again where it stands
        and the connection compares both results before COMMIT (`witness`): any
        difference is a lost race, and the batch runs again without reading ahead. Only a
        connection that witnesses reads ahead.
        """
        self._ahead.clear()
        # every session of the batch locked at once, in one order (no deadlock)
        self._run(self.coordination.lock_all([(r.conversation_id, r.scope) for r in reads]))
        for read in reads:
            sent = self._call_and_session_reads(read.call_id, read.conversation_id, read.scope)
            self._ahead.setdefault(read, []).append(sent)

    def forget_ahead(self) -> None:
        """Drop what `read_ahead` sent and no step took."""
        self._ahead.clear()

    def session_and_activation(
        self, conversation_id: str, scope: str
    ) -> tuple[Session | None, Activation | None]:
        """A conversation's App session for a scope and its current activation (one read)."""
        self._lock("conversation_id=? AND scope=?", conversation_id, scope)
        return self._session_row(self._session_read(conversation_id, scope).fetchone())

    def _session_read(self, conversation_id: str, scope: str) -> Any:
        return self.db.execute(
            "SELECT s.*, a.activation_id, a.trigger_call_id, a.state, a.requires_foreground, "
            "a.worker_ready, a.foreground, a.deadline_ms, "
            # a UI Action queued or in flight keeps a later call off the fast path (SPEC 17)
            "EXISTS (SELECT 1 FROM ui_actions u WHERE u.app_session_id = s.app_session_id "
            "AND u.state IN ('queued', 'delivered')) AS actions_ahead FROM app_sessions s "
            "LEFT JOIN activations a ON a.activation_id = (SELECT activation_id FROM "
            "activations WHERE app_session_id = s.app_session_id "
            "ORDER BY created_ms DESC, rowid DESC LIMIT 1) "
            "WHERE s.conversation_id=? AND s.scope=?",
            (conversation_id, scope),
        )

    @staticmethod
    def _session_row(row: Any) -> tuple[Session | None, Activation | None]:
        if row is None:
            return None, None
        # the row carries both records' columns under their own names
        session = session_record(row)
        if row["actions_ahead"]:
            session = dataclasses.replace(session, actions_ahead=True)
        return session, activation_record(row) if row["activation_id"] is not None else None

    def session_by_id(self, app_session_id: str) -> Session | None:
        self._lock("app_session_id=?", app_session_id)
        row = self.db.execute(
            "SELECT * FROM app_sessions WHERE app_session_id=?", (app_session_id,)
        ).fetchone()
        return session_record(row) if row is not None else None

    def session_mine(self, app_session_id: str) -> bool:
        """Whether the App session is this node's (one keyed read; always, for an existing
        session, with one runtime)."""
        mine, args = self._mine("app_sessions.app_session_id")
        row = self.db.execute(
            f"SELECT 1 FROM app_sessions WHERE app_session_id=?{mine}", (app_session_id, *args)
        ).fetchone()
        return row is not None

    def app_version(self, scope: str) -> str | None:
        row = self.db.execute("SELECT version FROM apps WHERE scope=?", (scope,)).fetchone()
        return str(row[0]) if row is not None else None

    def activation(self, activation_id: str) -> Activation | None:
        self._lock(_OF_ACTIVATION, activation_id)
        row = self.db.execute(
            "SELECT * FROM activations WHERE activation_id=?", (activation_id,)
        ).fetchone()
        return activation_record(row) if row is not None else None

    def current_activation(self, app_session_id: str) -> Activation | None:
        self._lock("app_session_id=?", app_session_id)
        row = self.db.execute(
            "SELECT * FROM activations WHERE app_session_id=? "
            "ORDER BY created_ms DESC, rowid DESC LIMIT 1",
            (app_session_id,),
        ).fetchone()
        return activation_record(row) if row is not None else None

    def waiting_calls(self, activation_id: str) -> list[Call]:
        self._lock(_OF_ACTIVATION, activation_id)
        rows = self.db.execute(
            "SELECT * FROM calls WHERE activation_id=? AND state='queued' ORDER BY seq",
            (activation_id,),
        ).fetchall()
        return [call_record(r) for r in rows]

    def delivered_calls(self, app_session_id: str | None = None) -> list[Call]:
        """Calls left `delivered` (of one session, or all, oldest first)."""
        if app_session_id is None:
            mine, args = self._mine("calls.app_session_id")
            rows = self.db.execute(
                f"SELECT * FROM calls WHERE state='delivered'{mine} ORDER BY created_ms, rowid",
                args,
            ).fetchall()
        else:
            self._lock("app_session_id=?", app_session_id)
            rows = self.db.execute(
                "SELECT * FROM calls WHERE app_session_id=? AND state='delivered' ORDER BY seq",
                (app_session_id,),
            ).fetchall()
        return [call_record(r) for r in rows]

    def queue_head(self, app_session_id: str) -> tuple[Call | Action, str] | None:
        """The session's oldest queued item — a call or a UI Action, the lowest `seq` of
        both (SPEC 17: one queue) — and its activation's state."""
        self._lock("app_session_id=?", app_session_id)
        row = self.db.execute(
            f"SELECT * FROM ({_CALL_ITEM}, a.state AS act_state FROM calls c JOIN activations "
            "a ON a.activation_id = c.activation_id WHERE c.app_session_id=? AND "
            "c.state='queued' ORDER BY c.seq LIMIT 1) AS head_call UNION ALL "
            f"SELECT * FROM ({_ACTION_ITEM}, a.state FROM ui_actions u JOIN activations a "
            "ON a.activation_id = u.activation_id WHERE u.app_session_id=? AND "
            "u.state='queued' ORDER BY u.seq LIMIT 1) AS head_action ORDER BY seq LIMIT 1",
            (app_session_id, app_session_id),
        ).fetchone()
        return (item_record(row), str(row["act_state"])) if row is not None else None

    def delivered_in(self, app_session_id: str) -> list[Call | Action]:
        """The session's calls and UI Actions left `delivered`, in queue order (one read)."""
        self._lock("app_session_id=?", app_session_id)
        rows = self.db.execute(
            f"SELECT * FROM ({_CALL_ITEM} FROM calls c WHERE c.app_session_id=? AND "
            f"c.state='delivered') AS sent_calls UNION ALL SELECT * FROM ({_ACTION_ITEM} FROM "
            "ui_actions u WHERE u.app_session_id=? AND u.state='delivered') AS sent_actions "
            "ORDER BY seq",
            (app_session_id, app_session_id),
        ).fetchall()
        return [item_record(r) for r in rows]

    # -- UI Actions (SPEC 17) ------------------------------------------------------------
    def action(self, app_session_id: str, client_id: str, client_seq: int) -> Action | None:
        """A client's action `client_seq` in an App session."""
        self._lock("app_session_id=?", app_session_id)
        row = self.db.execute(
            "SELECT * FROM ui_actions WHERE app_session_id=? AND client_id=? AND client_seq=?",
            (app_session_id, client_id, client_seq),
        ).fetchone()
        return action_record(row) if row is not None else None

    def client_mark(self, app_session_id: str, client_id: str) -> int:
        """The last seq accepted from a client in an App session (0: none yet)."""
        self._lock("app_session_id=?", app_session_id)
        row = self.db.execute(
            "SELECT last_seq FROM ui_action_clients WHERE app_session_id=? AND client_id=?",
            (app_session_id, client_id),
        ).fetchone()
        return int(row[0]) if row is not None else 0

    def waiting_actions(self, activation_id: str) -> list[Action]:
        """The UI Actions queued on an activation, in queue order."""
        self._lock(_OF_ACTIVATION, activation_id)
        rows = self.db.execute(
            "SELECT * FROM ui_actions WHERE state='queued' AND activation_id=? ORDER BY seq",
            (activation_id,),
        ).fetchall()
        return [action_record(r) for r in rows]

    def delivered_actions(self, app_session_id: str | None = None) -> list[Action]:
        """UI Actions left `delivered` (of one session, or all of this node's)."""
        if app_session_id is None:
            mine, args = self._mine("ui_actions.app_session_id")
            rows = self.db.execute(
                f"SELECT * FROM ui_actions WHERE state='delivered'{mine} "
                "ORDER BY created_ms, rowid",
                args,
            ).fetchall()
        else:
            self._lock("app_session_id=?", app_session_id)
            rows = self.db.execute(
                "SELECT * FROM ui_actions WHERE state='delivered' AND app_session_id=? "
                "ORDER BY seq",
                (app_session_id,),
            ).fetchall()
        return [action_record(r) for r in rows]

    def call_activation(self, call_id: str) -> tuple[Call, Activation] | None:
        self._lock("app_session_id = (SELECT app_session_id FROM calls WHERE call_id=?)", call_id)
        row = self.db.execute("SELECT * FROM calls WHERE call_id=?", (call_id,)).fetchone()
        if row is None or row["activation_id"] is None:
            return None
        act = self.activation(row["activation_id"])
        return (call_record(row), act) if act is not None else None

    # -- runtime operations (Pomodoro) ---------------------------------------------------
    def active_calls(self, conversation_id: str, methods: list[str]) -> bool:
        """Whether a call of one of `methods` is queued or running in the conversation."""
        if not methods:
            return False
        self._lock("conversation_id=?", conversation_id)
        marks = ",".join("?" * len(methods))
        row = self.db.execute(
            f"SELECT 1 FROM calls WHERE conversation_id=? AND method IN ({marks}) "
            "AND state IN ('queued','running') LIMIT 1",
            (conversation_id, *methods),
        ).fetchone()
        return row is not None

    def starting_trigger(self, conversation_id: str, methods: list[str]) -> str | None:
        """The starting activation a queued call of `methods` triggered, if any."""
        if not methods:
            return None
        self._lock("conversation_id=?", conversation_id)
        marks = ",".join("?" * len(methods))
        row = self.db.execute(
            "SELECT a.activation_id FROM calls c JOIN activations a "
            f"ON a.trigger_call_id=c.call_id WHERE c.conversation_id=? AND c.method IN ({marks}) "
            "AND c.state='queued' AND a.state='starting' LIMIT 1",
            (conversation_id, *methods),
        ).fetchone()
        return str(row[0]) if row is not None else None

    def focusing(self, conversation_id: str) -> Operation | None:
        self._lock("conversation_id=?", conversation_id)
        row = self.db.execute(
            "SELECT * FROM operations WHERE conversation_id=? AND state='focusing' LIMIT 1",
            (conversation_id,),
        ).fetchone()
        return operation_record(row) if row is not None else None

    def operation(self, operation_id: str) -> Operation | None:
        self._lock(
            "conversation_id = (SELECT conversation_id FROM operations WHERE operation_id=?)",
            operation_id,
        )
        row = self.db.execute(
            "SELECT * FROM operations WHERE operation_id=?", (operation_id,)
        ).fetchone()
        return operation_record(row) if row is not None else None

    def operations_of(self, conversation_id: str, scope: str) -> list[dict[str, Any]]:
        rows = self.db.execute(
            "SELECT o.kind, o.state, o.started_ms, o.ends_ms, o.ended_ms FROM operations o "
            "JOIN app_sessions s ON s.app_session_id=o.app_session_id "
            "WHERE s.conversation_id=? AND s.scope=? ORDER BY o.started_ms",
            (conversation_id, scope),
        ).fetchall()
        return [dict(r) for r in rows]

    def im_records(self, conversation_id: str) -> list[dict[str, Any]]:
        rows = self.db.execute(
            "SELECT body FROM im_records WHERE conversation_id=? ORDER BY created_ms, operation_id",
            (conversation_id,),
        ).fetchall()
        return [json.loads(r[0]) for r in rows]

    # -- clock ---------------------------------------------------------------------------
    def due_activations(self, now_ms: int) -> list[str]:
        mine, args = self._mine("activations.app_session_id")
        rows = self.db.execute(
            f"SELECT activation_id FROM activations WHERE state='starting' AND deadline_ms<=?"
            f"{mine} ORDER BY deadline_ms, rowid",
            (now_ms, *args),
        ).fetchall()
        return [str(r[0]) for r in rows]

    def due_operations(self, now_ms: int) -> list[tuple[Operation, str]]:
        """Focusing operations whose deadline passed, with their session's scope."""
        # one of no App session: any node's (its end is guarded)
        mine, args = self.coordination.mine("o.app_session_id", or_none=True)
        rows = self.db.execute(
            "SELECT o.*, COALESCE(s.scope, 'pomodoro') AS scope FROM operations o "
            "LEFT JOIN app_sessions s ON s.app_session_id=o.app_session_id "
            f"WHERE o.state='focusing' AND o.ends_ms<=?{mine} ORDER BY o.ends_ms",
            (now_ms, *args),
        ).fetchall()
        return [(operation_record(r), str(r["scope"])) for r in rows]

    def next_deadline(self) -> int | None:
        mine, args = self._mine("activations.app_session_id")
        row = self.db.execute(
            "SELECT MIN(d) FROM (SELECT MIN(deadline_ms) AS d FROM activations "
            f"WHERE state='starting'{mine} UNION ALL SELECT MIN(ends_ms) FROM operations "
            "WHERE state='focusing') AS due",
            args,
        ).fetchone()
        return int(row[0]) if row is not None and row[0] is not None else None

    # -- Host intents --------------------------------------------------------------------
    def intent_heads(self) -> list[Intent]:
        """The lowest pending intent of each instance, oldest first (SPEC 5.7)."""
        mine, args = self._mine("a.app_session_id")  # only the owner relays (SPEC 15)
        rows = self.db.execute(
            "SELECT h.id, h.instance, h.body, a.state AS act_state FROM host_intents h "
            "LEFT JOIN activations a ON a.activation_id = h.instance "
            "WHERE h.id IN (SELECT MIN(id) FROM host_intents WHERE delivered=0 AND superseded=0 "
            f"GROUP BY instance){mine} ORDER BY h.id",
            args,
        ).fetchall()
        return [Intent(int(r[0]), str(r[1]), str(r[2]), r[3]) for r in rows]

    def intents_pending(self) -> bool:
        """Whether an instance has a pending intent this node relays (`intent_heads`)."""
        mine, args = self._mine("a.app_session_id")
        row = self.db.execute(
            "SELECT 1 FROM host_intents h LEFT JOIN activations a "
            "ON a.activation_id = h.instance "
            f"WHERE h.delivered=0 AND h.superseded=0{mine} LIMIT 1",
            args,
        ).fetchone()
        return row is not None

    # -- reconcile -----------------------------------------------------------------------
    def activations_to_drive(self) -> list[str]:
        """Starting activations that are not just waiting for the Host."""
        mine, args = self._mine("activations.app_session_id")
        rows = self.db.execute(
            "SELECT activation_id FROM activations WHERE state='starting' "
            f"AND (worker_ready=0 OR requires_foreground=0 OR foreground=1){mine} "
            "ORDER BY created_ms, rowid",
            args,
        ).fetchall()
        return [str(r[0]) for r in rows]

    def sessions_to_pump(self) -> list[str]:
        """Sessions with queued calls or UI Actions of a ready activation, or one left
        `delivered`."""
        # a UNION of two reads of partial indexes (`calls_queued`, `calls_delivered`): the
        # rows read are the pending calls, however many calls have finished
        mine, args = self._mine("c.app_session_id")
        umine, uargs = self._mine("u.app_session_id")
        rows = self.db.execute(
            "SELECT c.app_session_id FROM calls c JOIN activations a "
            "ON a.activation_id = c.activation_id "
            f"WHERE c.state='queued' AND a.state='ready'{mine} "
            f"UNION SELECT c.app_session_id FROM calls c WHERE c.state='delivered'{mine} "
            # the UI Actions of the same queues (SPEC 17), through their partial indexes
            "UNION SELECT u.app_session_id FROM ui_actions u JOIN activations a "
            "ON a.activation_id = u.activation_id "
            f"WHERE u.state='queued' AND a.state='ready'{umine} "
            f"UNION SELECT u.app_session_id FROM ui_actions u WHERE u.state='delivered'{umine}",
            (*args, *args, *uargs, *uargs),
        ).fetchall()
        return [str(r[0]) for r in rows]

    # -- session data --------------------------------------------------------------------
    def session_data(self, scope: str, app_session_id: str) -> Snapshot:
        self._lock("app_session_id=?", app_session_id)
        row = self.db.execute(
            "SELECT revision, data FROM session_data WHERE scope=? AND app_session_id=?",
            (scope, app_session_id),
        ).fetchone()
        if row is None:
            return Snapshot(None, 0)
        return Snapshot(json.loads(row[1]), int(row[0]))

    def session_revision(self, scope: str, app_session_id: str) -> int:
        """The committed revision alone (0 when nothing is stored): what a delivery's
        answer checks its held snapshot against, without reading the data."""
        self._lock("app_session_id=?", app_session_id)
        row = self.db.execute(
            "SELECT revision FROM session_data WHERE scope=? AND app_session_id=?",
            (scope, app_session_id),
        ).fetchone()
        return 0 if row is None else int(row[0])

    # -- the Agent channel ---------------------------------------------------------------
    def outbox_pending(self, limit: int) -> list[AgentMessage]:
        rows = self.db.execute(
            "SELECT body FROM outbox WHERE acked=0 ORDER BY id LIMIT ?", (limit,)
        ).fetchall()
        return [json.loads(r[0]) for r in rows]

    def outbox_all(self) -> list[AgentMessage]:
        rows = self.db.execute("SELECT body FROM outbox ORDER BY id").fetchall()
        return [json.loads(r[0]) for r in rows]

    def outbox_after(self, position: int, limit: int) -> list[tuple[int, AgentMessage]]:
        # through the key: the rows after `position`, never the history before it
        rows = self.db.execute(
            "SELECT id, body FROM outbox WHERE id > ? ORDER BY id LIMIT ?", (position, limit)
        ).fetchall()
        return [(int(r[0]), json.loads(r[1])) for r in rows]

    def ack(self, ids: list[str]) -> None:
        self.db.executemany("UPDATE outbox SET acked=1 WHERE msg_id=?", [(i,) for i in ids])

    def call_summary(self, call_id: str) -> tuple[str, str] | None:
        row = self.db.execute(
            "SELECT method, conversation_id FROM calls WHERE call_id=?", (call_id,)
        ).fetchone()
        return (str(row[0]), str(row[1])) if row is not None else None

    # -- installed apps ------------------------------------------------------------------
    def installed(self) -> list[tuple[str, str]]:
        """Every current `(scope, version)`."""
        rows = self.db.execute("SELECT scope, version FROM apps ORDER BY scope").fetchall()
        return [(str(r[0]), str(r[1])) for r in rows]

    def installed_stamp(self) -> list[tuple[str, str, str, str, str]]:
        """Every current version's `(scope, version, manifest_sha256, key_id, dir)`: what
        changes when an install, an uninstall or an edit of a record does (one read)."""
        rows = self.db.execute(
            "SELECT apps.scope, apps.version, manifest_sha256, key_id, dir FROM apps "
            "JOIN app_versions ON app_versions.scope=apps.scope "
            "AND app_versions.version=apps.version ORDER BY apps.scope"
        ).fetchall()
        return [(str(r[0]), str(r[1]), str(r[2]), str(r[3]), str(r[4])) for r in rows]

    def app_rows(self) -> list[dict[str, Any]]:
        rows = self.db.execute(
            "SELECT a.scope, a.version, v.key_id, v.manifest_sha256, v.manifest FROM apps a "
            "JOIN app_versions v ON v.scope=a.scope AND v.version=a.version ORDER BY a.scope"
        ).fetchall()
        return [dict(r) for r in rows]

    def version_row(self, scope: str, version: str) -> dict[str, Any] | None:
        """An installed version: `manifest` (bytes), `manifest_sha256`, `key_id`, `dir`."""
        row = self.db.execute(
            "SELECT manifest, manifest_sha256, key_id, dir FROM app_versions "
            "WHERE scope=? AND version=?",
            (scope, version),
        ).fetchone()
        return dict(row) if row is not None else None

    def manifest(self, scope: str, version: str) -> Manifest | None:
        """An installed version's manifest as the typed `Manifest`, parsed once (it was
        verified, schema and all, when it was installed), or None when not installed."""
        row = self.db.execute(
            "SELECT manifest_sha256 FROM app_versions WHERE scope=? AND version=?",
            (scope, version),
        ).fetchone()
        if row is None:
            return None
        key = (scope, version, str(row[0]))
        model = self._manifests.get(key)
        if model is None:
            (text,) = self.db.execute(
                "SELECT manifest FROM app_versions WHERE scope=? AND version=?",
                (scope, version),
            ).fetchone()
            model = self._manifests[key] = Manifest.from_json(json.loads(text))
        return model

    def add_version(
        self,
        scope: str,
        version: str,
        manifest: bytes,
        digest: str,
        key_id: str,
        folder: str,
        now_ms: int,
    ) -> None:
        self.db.execute(
            "INSERT INTO app_versions VALUES (?,?,?,?,?,?,?)",
            (scope, version, manifest, digest, key_id, folder, now_ms),
        )

    def make_current(self, scope: str, version: str) -> None:
        self.db.execute(
            "INSERT INTO apps (scope, version) VALUES (?, ?) "
            "ON CONFLICT(scope) DO UPDATE SET version=excluded.version",
            (scope, version),
        )
        self._installs_changed()

    def remove_app(self, scope: str) -> None:
        self.db.execute("DELETE FROM apps WHERE scope=?", (scope,))
        self._installs_changed()

    def _installs_changed(self) -> None:
        """Every node reloads its Registry when this commits (`r:`)."""
        self.wake(["r:"])

    def set_meta(self, key: str, value: str) -> None:
        self.db.execute(
            "INSERT INTO meta VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value=excluded.value",
            (key, value),
        )

    def add_meta(self, key: str, value: str) -> None:
        """Write a meta value unless the key holds one already (first writer wins)."""
        self.db.execute("INSERT INTO meta VALUES (?, ?) ON CONFLICT(key) DO NOTHING", (key, value))

    def sessions_of(self, scope: str | None = None) -> list[Session]:
        """Every App session (of one scope), oldest first."""
        if scope is None:
            rows = self.db.execute(
                "SELECT * FROM app_sessions ORDER BY created_ms, rowid"
            ).fetchall()
        else:
            rows = self.db.execute(
                "SELECT * FROM app_sessions WHERE scope=? ORDER BY created_ms, rowid", (scope,)
            ).fetchall()
        return [session_record(r) for r in rows]

    def meta_keys(self, prefix: str) -> list[str]:
        """The keys of the meta table that start with `prefix`, without it."""
        rows = self.db.execute(
            "SELECT key FROM meta WHERE substr(key, 1, ?)=?", (len(prefix), prefix)
        ).fetchall()
        return [str(r[0])[len(prefix) :] for r in rows]

    def meta_value(self, key: str) -> str | None:
        """A value of the meta table (None when the key is absent)."""
        row = self.db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return str(row[0]) if row is not None else None

    def dev_builds(self, scope: str) -> set[str]:
        """The versions of `scope` installed as local dev builds."""
        prefix = f"dev_build:{scope}:"
        rows = self.db.execute(
            "SELECT key FROM meta WHERE substr(key, 1, ?)=?", (len(prefix), prefix)
        ).fetchall()
        return {str(r[0])[len(prefix) :] for r in rows}

    # -- writes --------------------------------------------------------------------------
    def apply(self, change: Change) -> None:
        """Write one guarded change (`store.writes`).

        Raises:
            LostRace: its guard found no row in the expected state.
        """
        self._writes.apply(change)
