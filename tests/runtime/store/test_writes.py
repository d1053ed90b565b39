"""`store.writes.Writes` on its own, on an SQLite store: each change of a decision writes
the row it names, column by column; each guarded one changes nothing and loses its race
(`LostRace`) when its row is not in the state it expects; what a commit must tell other
nodes or record about them is asked of the coordination (here one that records it in
`meta`, so the test sees the statement ran with its arguments). No runtime, no workers."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from lineup_runtime_lite.coordination import Statement
from lineup_runtime_lite.coordination.solo import Solo
from lineup_runtime_lite.core.decisions import (
    ActionDone,
    ActionState,
    ActivationUpdate,
    CallState,
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
from lineup_runtime_lite.store.sqlite import Store
from lineup_runtime_lite.store.writes import Writes

#: One more time `?` was asked for (a `meta` row counting).
_COUNT = (
    "INSERT INTO meta (key, value) VALUES (?, '1') "
    "ON CONFLICT (key) DO UPDATE SET value = CAST(value AS INTEGER) + 1"
)


class Recording(Solo):
    """One runtime that writes down what it was asked to record and tell (as `meta` rows)."""

    def owner(self, app_session_id: str) -> Sequence[Statement]:
        return ((_COUNT, (f"owner:{app_session_id}",)),)

    def tell(self, payload: str) -> Sequence[Statement]:
        return ((_COUNT, (f"told:{payload}",)),)


class Store_:
    def __init__(self) -> None:
        self.store = Store(":memory:")
        self.writes = Writes(self.store.facts.db, Recording())

    def apply(self, *changes: Any) -> None:
        for change in changes:
            self.writes.apply(change)

    def rows(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in self.store.db.execute(sql, args).fetchall()]

    def meta(self, prefix: str) -> dict[str, int]:
        """How many times each thing of `prefix` was recorded or told."""
        rows = self.rows("SELECT key, value FROM meta WHERE key LIKE ?", prefix + "%")
        return {str(r[0]): int(r[1]) for r in rows}

    def loses(self, change: Any) -> None:
        """`change` loses its race (in a savepoint rolled back, as a group commit's step)."""
        self.store.db.execute("SAVEPOINT step")
        try:
            with pytest.raises(LostRace):
                self.writes.apply(change)
        finally:
            self.store.db.execute("ROLLBACK TO step")
            self.store.db.execute("RELEASE step")


@pytest.fixture()
def db() -> Iterator[Store_]:
    s = Store_()
    try:
        yield s
    finally:
        s.store.close()


SESSION = NewSession("s1", "conv", "app", "1.0.0", 5)


def call(call_id: str, seq: int | None, sid: str | None = "s1", state: str = "queued") -> NewCall:
    return NewCall(
        call_id, "fp", "conv", "app", "app.m", "{}", sid, "a1" if sid else None, seq, state, 7
    )


def message(call_id: str, stage: str, **extra: Any) -> AgentMessage:
    msg: dict[str, Any] = {"id": f"{call_id}:{stage}", "call_id": call_id, "app_scope": "app"}
    msg.update(kind="result" if stage == "result" else "receipt", stage=stage, at="t", **extra)
    return msg  # type: ignore[return-value]


def test_a_new_session_is_written_and_recorded_as_this_nodes(db: Store_) -> None:
    db.apply(SESSION)
    assert db.rows(
        "SELECT app_session_id, conversation_id, scope, version, created_ms, next_seq "
        "FROM app_sessions"
    ) == [("s1", "conv", "app", "1.0.0", 5, 1)]
    assert db.meta("owner:") == {"owner:s1": 1}


def test_a_call_of_a_session_takes_its_next_seq_or_loses(db: Store_) -> None:
    db.apply(SESSION, call("c1", 1))
    assert db.rows("SELECT next_seq FROM app_sessions") == [(2,)]
    assert db.rows(
        "SELECT call_id, fingerprint, conversation_id, scope, method, params, app_session_id, "
        "activation_id, seq, state, created_ms FROM calls"
    ) == [("c1", "fp", "conv", "app", "app.m", "{}", "s1", "a1", 1, "queued", 7)]
    db.loses(call("c2", 1))  # seq 1 is taken: another decision won
    db.loses(call("c2", 3))
    db.apply(call("c2", 2))
    assert db.rows("SELECT next_seq FROM app_sessions") == [(3,)]


def test_a_call_of_no_session_takes_no_seq(db: Store_) -> None:
    db.apply(SESSION, call("c0", None, sid=None, state="done"))
    assert db.rows("SELECT app_session_id, seq, state FROM calls") == [(None, None, "done")]
    assert db.rows("SELECT next_seq FROM app_sessions") == [(1,)]


def test_a_call_moves_only_from_the_state_it_expects(db: Store_) -> None:
    db.apply(SESSION, call("c1", 1))
    db.loses(CallState("c1", "delivered", "done"))
    db.apply(CallState("c1", "queued", "delivered"))
    assert db.rows("SELECT state FROM calls") == [("delivered",)]
    db.loses(CallState("c1", "queued", "delivered"))
    db.loses(CallState("nope", "queued", "delivered"))


def test_an_activation_is_written_and_updated_only_while_starting(db: Store_) -> None:
    db.apply(SESSION, NewActivation("a1", "s1", "c1", True, 900, 8))
    columns = (
        "activation_id, app_session_id, trigger_call_id, state, requires_foreground, "
        "worker_ready, foreground, reason, deadline_ms, created_ms, ended_ms"
    )
    assert db.rows(f"SELECT {columns} FROM activations") == [
        ("a1", "s1", "c1", "starting", 1, 0, 0, None, 900, 8, None)
    ]
    db.apply(ActivationUpdate("a1", worker_ready=True))  # only what it names
    assert db.rows(f"SELECT {columns} FROM activations") == [
        ("a1", "s1", "c1", "starting", 1, 1, 0, None, 900, 8, None)
    ]
    db.apply(ActivationUpdate("a1", foreground=True, requires_foreground=False))
    assert db.rows("SELECT state, requires_foreground, foreground FROM activations") == [
        ("starting", 0, 1)
    ]
    db.apply(ActivationUpdate("a1", state="failed", reason="timeout", ended_ms=950))
    assert db.rows("SELECT state, reason, ended_ms FROM activations") == [
        ("failed", "timeout", 950)
    ]
    db.loses(ActivationUpdate("a1", state="ready"))  # it ended: the other transition won
    db.loses(ReopenActivation("a1"))  # failed, not ready


def test_only_a_ready_activation_is_reopened(db: Store_) -> None:
    db.apply(SESSION, NewActivation("a1", "s1", "c1", False, 900, 8))
    db.loses(ReopenActivation("a1"))  # starting already
    db.apply(ActivationUpdate("a1", state="ready"))
    db.apply(ReopenActivation("a1"))
    assert db.rows("SELECT state, requires_foreground FROM activations") == [("starting", 0)]


def test_host_intents_are_kept_once_per_key_and_marked_per_row_or_instance(db: Store_) -> None:
    db.apply(
        NewIntent("k1", {"b": 1, "a": "é"}, "i1"),
        NewIntent("k1", {"other": True}, "i1"),  # the same key again: the first stays
        NewIntent("k2", {"n": 2}, "i1"),
        NewIntent("k3", {"n": 3}, "i2"),
    )
    rows = db.rows("SELECT id, dedup_key, body, instance FROM host_intents ORDER BY id")
    assert [(r[1], json.loads(r[2]), r[3]) for r in rows] == [
        ("k1", {"a": "é", "b": 1}, "i1"),
        ("k2", {"n": 2}, "i1"),
        ("k3", {"n": 3}, "i2"),
    ]
    db.apply(IntentDelivered(rows[0][0]))
    db.apply(SupersedeIntents("i1"))  # what of i1 is not delivered yet
    assert db.rows("SELECT dedup_key, delivered, superseded FROM host_intents ORDER BY id") == [
        ("k1", 1, 0),
        ("k2", 0, 1),
        ("k3", 0, 0),
    ]


def test_an_operation_ends_once_and_its_im_record_is_kept(db: Store_) -> None:
    db.apply(NewOperation("o1", "c1", "conv", "s1", "focus", 10, 20, '{"m":1}'))
    columns = (
        "operation_id, call_id, conversation_id, app_session_id, kind, state, started_ms, "
        "ends_ms, ended_ms, params"
    )
    assert db.rows(f"SELECT {columns} FROM operations") == [
        ("o1", "c1", "conv", "s1", "focus", "focusing", 10, 20, None, '{"m":1}')
    ]
    db.apply(EndOperation("o1", "completed", 20))
    assert db.rows("SELECT state, ended_ms FROM operations") == [("completed", 20)]
    db.loses(EndOperation("o1", "interrupted", 21))
    db.apply(NewIMRecord("o1", "conv", {"text": "done", "n": 1}, 22))
    (row,) = db.rows("SELECT operation_id, conversation_id, body, created_ms FROM im_records")
    assert row[:2] == ("o1", "conv") and json.loads(row[2]) == {"n": 1, "text": "done"}
    assert row[3] == 22


def test_a_session_moves_only_from_the_version_it_is_on(db: Store_) -> None:
    db.apply(SESSION)
    db.loses(MoveSession("s1", "0.9.0", "2.0.0"))
    db.apply(MoveSession("s1", "1.0.0", "2.0.0"))
    assert db.rows("SELECT version FROM app_sessions") == [("2.0.0",)]


def test_session_data_is_replaced_at_the_revision_expected_and_told(db: Store_) -> None:
    db.apply(ReplaceSessionData("app", "s1", 0, '{"n":1}'))
    assert db.rows("SELECT scope, app_session_id, revision, data FROM session_data") == [
        ("app", "s1", 1, '{"n":1}')
    ]
    assert db.meta("told:") == {"told:d:s1": 1}  # Surface subscribers on other nodes
    db.loses(ReplaceSessionData("app", "s1", 0, '{"n":9}'))  # it exists already
    db.loses(ReplaceSessionData("app", "s1", 2, '{"n":9}'))
    db.loses(ReplaceSessionData("other", "s1", 1, '{"n":9}'))
    db.apply(ReplaceSessionData("app", "s1", 1, '{"n":2}'))
    assert db.rows("SELECT revision, data FROM session_data") == [(2, '{"n":2}')]
    assert db.meta("told:") == {"told:d:s1": 2}


def action(seq: int, client_seq: int, client: str = "c") -> NewAction:
    return NewAction("s1", seq, client, client_seq, "app.act", "{}", "fp", "a1", 30)


def test_an_action_takes_the_sessions_next_seq_and_the_clients_next_number(db: Store_) -> None:
    db.apply(SESSION, action(1, 1))
    columns = (
        "app_session_id, seq, client_id, client_seq, name, params, fingerprint, "
        "activation_id, state, outcome, revision, created_ms, ended_ms"
    )
    assert db.rows(f"SELECT {columns} FROM ui_actions") == [
        ("s1", 1, "c", 1, "app.act", "{}", "fp", "a1", "queued", None, None, 30, None)
    ]
    assert db.rows("SELECT app_session_id, client_id, last_seq FROM ui_action_clients") == [
        ("s1", "c", 1)
    ]
    db.loses(action(1, 2))  # seq 1 is taken
    db.loses(action(2, 3))  # the client's 2 is not in yet
    db.apply(action(2, 2), call("c1", 3), action(4, 1, client="d"))
    assert db.rows("SELECT client_id, last_seq FROM ui_action_clients ORDER BY client_id") == [
        ("c", 2),
        ("d", 1),
    ]
    assert db.rows("SELECT next_seq FROM app_sessions") == [(5,)]


def test_an_action_moves_from_the_state_it_expects_and_ends_once_told(db: Store_) -> None:
    db.apply(SESSION, action(1, 1))
    db.loses(ActionState("s1", 1, "delivered", "queued"))
    db.loses(ActionState("s1", 2, "queued", "delivered"))
    db.apply(ActionState("s1", 1, "queued", "delivered"))
    db.apply(ActionDone("s1", 1, "c:1", '{"result":1}', 4, 40))
    assert db.rows("SELECT state, outcome, revision, ended_ms FROM ui_actions") == [
        ("done", '{"result":1}', 4, 40)
    ]
    assert db.meta("told:") == {"told:u:s1:c:1": 1}  # its waiter may be on another node
    db.loses(ActionDone("s1", 1, "c:1", '{"result":2}', 5, 41))  # one outcome
    db.loses(ActionDone("s1", 2, "c:2", '{"result":2}', 5, 41))


def test_receipts_are_numbered_and_sent_and_a_final_ends_the_call_once(db: Store_) -> None:
    db.apply(SESSION, call("c1", 1))
    db.apply(NewReceipt(message("c1", "accepted", activation="starting")))
    db.apply(NewReceipt(message("c1", "started")))
    assert db.meta("told:") == {}  # receipts have no waiter elsewhere
    assert db.rows("SELECT state FROM calls") == [("queued",)]
    db.apply(NewReceipt(message("c1", "result", result={"ok": "é"})))
    assert db.rows("SELECT state FROM calls") == [("done",)]
    assert db.meta("told:") == {"told:c:c1": 1}  # a waiter for the final on another node
    stored = db.rows("SELECT call_id, stage, n, body FROM receipts ORDER BY n")
    assert [r[:3] for r in stored] == [
        ("c1", "accepted", 1),
        ("c1", "started", 2),
        ("c1", "result", 3),
    ]
    assert json.loads(stored[2][3]) == message("c1", "result", result={"ok": "é"})
    sent = db.rows("SELECT msg_id, call_id, body, acked FROM outbox ORDER BY id")
    assert [(r[0], r[1], r[3]) for r in sent] == [
        ("c1:accepted", "c1", 0),
        ("c1:started", "c1", 0),
        ("c1:result", "c1", 0),
    ]
    assert [r[2] for r in sent] == [r[3] for r in stored]  # the outbox carries the receipt
    db.loses(NewReceipt(message("c1", "error", error={"code": "x"})))  # one final per call
    db.loses(NewReceipt(message("c1", "started")))  # one receipt per stage


def test_an_error_final_ends_the_call_too(db: Store_) -> None:
    db.apply(SESSION, call("c1", 1))
    db.apply(NewReceipt(message("c1", "error", error={"code": "x"})))
    assert db.rows("SELECT state FROM calls") == [("done",)]
    assert db.meta("told:") == {"told:c:c1": 1}
    db.loses(NewReceipt(message("c1", "result", result=1)))


class Deferring:
    """A connection that checks guarded writes later (PostgreSQL's, pipelined)."""

    def __init__(self, db: Any) -> None:
        self._db = db
        self.deferred: list[Any] = []

    def execute(self, sql: str, args: Sequence[Any] = ()) -> Any:
        return self._db.execute(sql, args)

    def defer_guard(self, cur: Any) -> bool:
        self.deferred.append(cur)
        return True


def test_a_connection_that_defers_its_guards_is_handed_them(db: Store_) -> None:
    conn = Deferring(db.store.facts.db)
    writes = Writes(conn, Recording())  # type: ignore[arg-type]
    writes.apply(CallState("nope", "queued", "delivered"))  # no row: checked later
    assert [cur.rowcount for cur in conn.deferred] == [0]
