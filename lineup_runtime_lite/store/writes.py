"""The guarded writes of the facts: each `Change` of a decision as the SQL both engines run
(`SqlFacts.apply` hands them here). A guarded write that changes no row lost its race
(`LostRace`); what a commit must tell other nodes (a final, session data, a UI Action's
outcome) or record about them (a new App session's owner) is asked of the store's
`Coordination`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from lineup_runtime_lite.coordination import Coordination, Statement
from lineup_runtime_lite.core.decisions import (
    ActionDone,
    ActionState,
    ActivationUpdate,
    CallState,
    Change,
    EndOperation,
    IntentDelivered,
    MoveSession,
    NewAction,
    NewActivation,
    NewCall,
    NewIMRecord,
    NewIntent,
    NewOperation,
    NewReceipt,
    NewSession,
    ReopenActivation,
    ReplaceSessionData,
    SupersedeIntents,
)
from lineup_runtime_lite.core.messages import AgentMessage
from lineup_runtime_lite.core.port import LostRace
from lineup_runtime_lite.store.connection import SqlConnection, SqlCursor

__all__ = ["Writes"]

_FINAL = ("result", "error")


class Writes:
    """The guarded writes on one connection, for one coordination."""

    def __init__(self, db: SqlConnection, coordination: Coordination) -> None:
        self._db = db
        self._coordination = coordination

    def _run(self, statements: Sequence[Statement]) -> None:
        for sql, args in statements:
            self._db.execute(sql, args)

    def _guard(self, cur: SqlCursor) -> None:
        """A guarded write that changed no row lost its race (`LostRace`). A connection
        that pipelines its writes (PostgreSQL's, in a batch) checks it when the result
        arrives, at the latest before COMMIT (`SqlConnection.defer_guard`)."""
        if self._db.defer_guard(cur):
            return
        if cur.rowcount == 0:
            raise LostRace()

    def apply(self, change: Change) -> None:
        """Write one guarded change.

        Raises:
            LostRace: its guard found no row in the expected state.
        """
        db = self._db
        if isinstance(change, NewReceipt):
            self._add_receipt(change.message)
        elif isinstance(change, NewCall):
            if change.app_session_id is not None:
                cur = db.execute(
                    "UPDATE app_sessions SET next_seq=next_seq+1 "
                    "WHERE app_session_id=? AND next_seq=?",
                    (change.app_session_id, change.seq),
                )
                self._guard(cur)
            db.execute(
                "INSERT INTO calls (call_id, fingerprint, conversation_id, scope, method, "
                "params, app_session_id, activation_id, seq, state, created_ms) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (
                    change.call_id,
                    change.fingerprint,
                    change.conversation_id,
                    change.scope,
                    change.method,
                    change.params,
                    change.app_session_id,
                    change.activation_id,
                    change.seq,
                    change.state,
                    change.created_ms,
                ),
            )
        elif isinstance(change, CallState):
            cur = db.execute(
                "UPDATE calls SET state=? WHERE call_id=? AND state=?",
                (change.to, change.call_id, change.expect),
            )
            self._guard(cur)
        elif isinstance(change, ActivationUpdate):
            sets, args = [], []
            for column in (
                "state",
                "reason",
                "ended_ms",
                "worker_ready",
                "foreground",
                "requires_foreground",
            ):
                value = getattr(change, column)
                if value is not None:
                    sets.append(f"{column}=?")
                    args.append(int(value) if isinstance(value, bool) else value)
            cur = db.execute(
                f"UPDATE activations SET {', '.join(sets)} "
                "WHERE activation_id=? AND state='starting'",
                (*args, change.activation_id),
            )
            self._guard(cur)
        elif isinstance(change, ReopenActivation):
            cur = db.execute(
                "UPDATE activations SET state='starting' WHERE activation_id=? AND state='ready'",
                (change.activation_id,),
            )
            self._guard(cur)
        elif isinstance(change, NewSession):
            db.execute(
                "INSERT INTO app_sessions (app_session_id, conversation_id, scope, version, "
                "created_ms) VALUES (?,?,?,?,?)",
                (
                    change.app_session_id,
                    change.conversation_id,
                    change.scope,
                    change.version,
                    change.created_ms,
                ),
            )
            # the node whose call created it owns it (several nodes)
            self._run(self._coordination.owner(change.app_session_id))
        elif isinstance(change, NewActivation):
            db.execute(
                "INSERT INTO activations (activation_id, app_session_id, trigger_call_id, state, "
                "requires_foreground, deadline_ms, created_ms) VALUES (?,?,?,'starting',?,?,?)",
                (
                    change.activation_id,
                    change.app_session_id,
                    change.trigger_call_id,
                    int(change.requires_foreground),
                    change.deadline_ms,
                    change.created_ms,
                ),
            )
        elif isinstance(change, NewIntent):
            db.execute(
                "INSERT INTO host_intents (dedup_key, body, instance) VALUES (?, ?, ?) "
                "ON CONFLICT DO NOTHING",
                (change.dedup_key, json.dumps(change.body, sort_keys=True), change.instance),
            )
        elif isinstance(change, IntentDelivered):
            db.execute("UPDATE host_intents SET delivered=1 WHERE id=?", (change.id,))
        elif isinstance(change, SupersedeIntents):
            db.execute(
                "UPDATE host_intents SET superseded=1 WHERE instance=? AND delivered=0",
                (change.instance,),
            )
        elif isinstance(change, NewOperation):
            db.execute(
                "INSERT INTO operations (operation_id, call_id, conversation_id, app_session_id, "
                "kind, state, started_ms, ends_ms, params) VALUES (?,?,?,?,?,'focusing',?,?,?)",
                (
                    change.operation_id,
                    change.call_id,
                    change.conversation_id,
                    change.app_session_id,
                    change.kind,
                    change.started_ms,
                    change.ends_ms,
                    change.params,
                ),
            )
        elif isinstance(change, EndOperation):
            cur = db.execute(
                "UPDATE operations SET state=?, ended_ms=? "
                "WHERE operation_id=? AND state='focusing'",
                (change.state, change.ended_ms, change.operation_id),
            )
            self._guard(cur)
        elif isinstance(change, NewIMRecord):
            db.execute(
                "INSERT INTO im_records (operation_id, conversation_id, body, created_ms) "
                "VALUES (?,?,?,?)",
                (
                    change.operation_id,
                    change.conversation_id,
                    json.dumps(change.body, sort_keys=True),
                    change.created_ms,
                ),
            )
        elif isinstance(change, MoveSession):
            cur = db.execute(
                "UPDATE app_sessions SET version=? WHERE app_session_id=? AND version=?",
                (change.to_version, change.app_session_id, change.from_version),
            )
            self._guard(cur)
        elif isinstance(change, ReplaceSessionData):
            if change.expected_revision == 0:
                cur = db.execute(
                    "INSERT INTO session_data (scope, app_session_id, revision, data) "
                    "VALUES (?,?,1,?) ON CONFLICT DO NOTHING",
                    (change.scope, change.app_session_id, change.data),
                )
            else:
                cur = db.execute(
                    "UPDATE session_data SET revision=revision+1, data=? "
                    "WHERE scope=? AND app_session_id=? AND revision=?",
                    (change.data, change.scope, change.app_session_id, change.expected_revision),
                )
            self._guard(cur)
            self._run(
                self._coordination.tell(f"d:{change.app_session_id}")
            )  # Surface subscribers on other nodes
        elif isinstance(change, NewAction):
            self._guard(
                db.execute(
                    "UPDATE app_sessions SET next_seq=next_seq+1 "
                    "WHERE app_session_id=? AND next_seq=?",
                    (change.app_session_id, change.seq),
                )
            )
            if change.client_seq == 1:  # a client the session has not seen (its mark was 0)
                db.execute(
                    "INSERT INTO ui_action_clients (app_session_id, client_id, last_seq) "
                    "VALUES (?, ?, 1)",
                    (change.app_session_id, change.client_id),
                )
            else:
                self._guard(
                    db.execute(
                        "UPDATE ui_action_clients SET last_seq=? "
                        "WHERE app_session_id=? AND client_id=? AND last_seq=?",
                        (
                            change.client_seq,
                            change.app_session_id,
                            change.client_id,
                            change.client_seq - 1,
                        ),
                    )
                )
            db.execute(
                "INSERT INTO ui_actions (app_session_id, seq, client_id, client_seq, name, "
                "params, fingerprint, activation_id, state, created_ms) "
                "VALUES (?,?,?,?,?,?,?,?,'queued',?)",
                (
                    change.app_session_id,
                    change.seq,
                    change.client_id,
                    change.client_seq,
                    change.name,
                    change.params,
                    change.fingerprint,
                    change.activation_id,
                    change.created_ms,
                ),
            )
        elif isinstance(change, ActionState):
            self._guard(
                db.execute(
                    "UPDATE ui_actions SET state=? WHERE app_session_id=? AND seq=? AND state=?",
                    (change.to, change.app_session_id, change.seq, change.expect),
                )
            )
        elif isinstance(change, ActionDone):
            self._guard(
                db.execute(
                    "UPDATE ui_actions SET state='done', outcome=?, revision=?, ended_ms=? "
                    "WHERE app_session_id=? AND seq=? AND state!='done'",
                    (
                        change.outcome,
                        change.revision,
                        change.ended_ms,
                        change.app_session_id,
                        change.seq,
                    ),
                )
            )
            # a waiter for it on another node (the node that accepted it)
            self._run(self._coordination.tell(f"u:{change.app_session_id}:{change.action_id}"))
        else:  # pragma: no cover - the union is closed
            raise TypeError(f"unknown change {change!r}")

    def _add_receipt(self, msg: AgentMessage) -> None:
        call_id, stage = msg["call_id"], msg["stage"]
        body = json.dumps(msg, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        if stage in _FINAL:  # one final per call, whichever stage it is
            self._guard(
                self._db.execute(
                    "UPDATE calls SET state='done' WHERE call_id=? AND state!='done'", (call_id,)
                )
            )
        cur = self._db.execute(
            "INSERT INTO receipts (call_id, stage, n, body) "
            "SELECT ?, ?, COALESCE(MAX(n), 0) + 1, ? FROM receipts WHERE call_id=? "
            "ON CONFLICT DO NOTHING",
            (call_id, stage, body, call_id),
        )
        self._guard(cur)
        self._db.execute(
            "INSERT INTO outbox (msg_id, call_id, body) VALUES (?,?,?)", (msg["id"], call_id, body)
        )
        if stage in _FINAL:
            self._run(self._coordination.tell(f"c:{call_id}"))  # a waiter for it on another node
