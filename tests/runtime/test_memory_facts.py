"""`MemoryFacts` against `SqliteFacts` (the real schema on `:memory:`): the same decisions
applied to both give the same outcome (written, lost race, constraint broken) and every
read gives the same typed records in the same order."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from typing import Any, TypeVar

import pytest

from lineup_runtime_lite.decisions import (
    ActivationUpdate,
    CallState,
    Change,
    Decision,
    EndOperation,
    IntentDelivered,
    NewActivation,
    NewCall,
    NewIMRecord,
    NewIntent,
    NewOperation,
    NewSession,
    Record,
    ReopenActivation,
    ReplaceSessionData,
    SupersedeIntents,
)
from lineup_runtime_lite.messages import make_message
from lineup_runtime_lite.store import LostRace, SqliteFacts, Store
from lineup_runtime_lite.store.memory import ConstraintViolation, MemoryFacts
from tests.runtime.transition_kit import EPOCH, Kit, event, pomodoro_tools, tool

TOOLS = [
    tool("notes.show", activation="foreground_required"),
    tool("notes.add"),
    tool("notes.count", activation="activation_not_required"),
    tool("notes.sync", delivery="runtime", long_running=True, handler_key="none"),
    *pomodoro_tools(),
]


@pytest.fixture
def store() -> Iterator[Store]:
    s = Store(":memory:")
    for scope in ("notes", "pomodoro"):
        s.facts.make_current(scope, "1.0.0")
    yield s
    s.close()


T = TypeVar("T")


def need(value: T | None) -> T:
    """`value`, which this script's step made exist."""
    assert value is not None
    return value


def _outcome(apply: Any, changes: tuple[Change, ...], rollback: Any) -> str:
    try:
        for change in changes:
            apply(change)
    except LostRace:
        rollback()
        return "lost"
    except (sqlite3.IntegrityError, ConstraintViolation):
        rollback()
        return "constraint"
    return "written"


def _apply_both(sql: SqliteFacts, mem: MemoryFacts, decision: Decision) -> tuple[str, str]:
    sql.db.execute("SAVEPOINT d")
    saved = mem.snapshot()

    def sql_back() -> None:
        sql.db.execute("ROLLBACK TO d")

    got_sql = _outcome(sql.apply, decision.changes, sql_back)
    sql.db.execute("RELEASE d")
    got_mem = _outcome(mem.apply, decision.changes, lambda: mem.restore(saved))
    return got_sql, got_mem


def reads(f: Any, mem: MemoryFacts) -> dict[str, Any]:
    """Every read of the port (and the extras the runtime uses) over every known key."""
    d = mem.dump()
    calls = sorted(d["calls"])
    sessions = sorted(d["sessions"].values(), key=lambda s: s.app_session_id)
    acts = sorted(d["activations"])
    ops = sorted(d["operations"])
    convs = sorted({"c1", "c2", "c3", *(s.conversation_id for s in sessions)})
    methods = [["pomodoro.start"], ["notes.add", "notes.show"], []]
    out: dict[str, Any] = {
        "finals": f.finals(calls),
        "delivered": f.delivered_calls(),
        "installed": f.installed(),
        "versions": [f.app_version(s) for s in ("notes", "pomodoro", "nope")],
        "next_deadline": f.next_deadline(),
        "heads": f.intent_heads(),
        "pending": f.intents_pending(),
        "to_drive": f.activations_to_drive(),
        "to_pump": sorted(f.sessions_to_pump()),  # DISTINCT: no order promised
        "outbox": [f.outbox_pending(2), f.outbox_pending(1000), f.outbox_all()],
    }
    for c in [*calls, "missing"]:
        out[f"call {c}"] = [
            f.call(c),
            f.latest_message(c),
            f.messages(c),
            f.call_activation(c),
            f.call_summary(c),
        ]
    for s in sessions:
        sid = s.app_session_id
        out[f"session {sid}"] = [
            f.session(s.conversation_id, s.scope),
            f.session_by_id(sid),
            f.current_activation(sid),
            f.delivered_calls(sid),
            f.queue_head(sid),
            f.session_data(s.scope, sid),
        ]
    for a in [*acts, "missing"]:
        out[f"act {a}"] = [f.activation(a), f.waiting_calls(a)]
    for o in [*ops, "missing"]:
        out[f"op {o}"] = f.operation(o)
    for conv in convs:
        out[f"conv {conv}"] = [
            f.session(conv, "notes"),
            f.session(conv, "pomodoro"),
            f.focusing(conv),
            f.im_records(conv),
            f.operations_of(conv, "pomodoro"),
            [f.active_calls(conv, m) for m in methods],
            [f.starting_trigger(conv, m) for m in methods],
        ]
    for dt in (0, 59_999, 60_000, 10**9):
        out[f"due {dt}"] = [f.due_activations(EPOCH + dt), f.due_operations(EPOCH + dt)]
    return out


def _script(kit: Kit) -> None:
    """A run touching every change type, lost races included."""
    kit.call(event("show", "c1", "notes.show"))
    kit.call(event("a1", "c1", "notes.add", {"text": "one"}))
    kit.call(event("n1", "c1", "notes.count"))  # app_not_running
    kit.call(event("a2", "c2", "notes.add", {"text": "x"}))
    (act1,) = [
        a
        for a in kit.facts.activations_to_drive()
        if need(kit.facts.activation(a)).trigger_call_id == "show"
    ]
    kit.advance(act1, worker_up=True)
    kit.relay(lambda body: None)
    kit.advance(act1, confirmed=True)
    sid = need(kit.facts.session("c1", "notes")).app_session_id
    show = kit.deliver_next(sid)
    kit.answer(need(show), reply={"ok": True, "result": []})
    added = kit.deliver_next(sid)
    kit.replace_session_data("notes", sid, {"notes": ["one"]}, 0)
    kit.replace_session_data("notes", sid, {"notes": ["two"]}, 1)
    kit.answer(need(added), reply={"ok": True, "result": 1})
    kit.answer(need(added), reply={"ok": True, "result": 1})  # a second answer loses
    kit.call(event("a3", "c1", "notes.add", {"text": "q"}), idle=False)
    kit.call(event("a4", "c1", "notes.add", {"text": "r"}), idle=True)
    kit.worker_lost(act1)
    kit.now += 30_000
    kit.call(event("s1", "c1", "pomodoro.start", {"minutes": 1}))
    kit.call(event("s3", "c1", "pomodoro.start"))  # already active
    for act in kit.facts.activations_to_drive():
        kit.advance(act, worker_up=True)
    kit.relay(lambda body: None)
    kit.call(event("s2", "c2", "pomodoro.start", {"minutes": 2}))  # its intent stays queued
    p1 = need(kit.facts.session("c1", "pomodoro")).app_session_id
    kit.advance(need(kit.facts.current_activation(p1)).activation_id, confirmed=True)
    kit.call(event("i1", "c2", "pomodoro.interrupt"))  # cancels c2's start
    kit.now += 60_000
    kit.tick()  # c1's focus completes; c2 (notes) activation times out
    kit.facts.ack(["show:accepted"])


def test_every_read_agrees_after_every_decision(store: Store) -> None:
    kit = Kit(TOOLS)
    _script(kit)
    mem = MemoryFacts()
    for scope in ("notes", "pomodoro"):
        mem.make_current(scope, "1.0.0")
    outcomes = []
    for decision in kit.log:
        got = _apply_both(store.facts, mem, decision)
        assert got[0] == got[1], decision
        outcomes.append(got[0])
        assert reads(store.facts, mem) == reads(mem, mem)
    assert "lost" in outcomes and "written" in outcomes
    store.facts.ack(["show:accepted", "a1:accepted"])
    mem.ack(["show:accepted", "a1:accepted"])
    assert reads(store.facts, mem) == reads(mem, mem)
    # the script reached the states the reads are about
    assert (
        mem.im_records("c1")
        and mem.session_data("notes", need(mem.session("c1", "notes")).app_session_id).revision == 2
    )
    assert any(i["superseded"] for i in mem.intents())


S, A, MSG = "ses", "inst", make_message("k1", "notes", "accepted", EPOCH, activation="starting")


def _call(call_id: str, seq: int | None, state: str = "queued") -> NewCall:
    return NewCall(
        call_id,
        "fp",
        "c1",
        "notes",
        "notes.add",
        "{}",
        S if seq else None,
        A if seq else None,
        seq,
        state,
        EPOCH,
    )


BASE = (
    NewSession(S, "c1", "notes", "1.0.0", EPOCH),
    NewActivation(A, S, "k1", False, EPOCH + 60_000, EPOCH),
    _call("k1", 1),
)

CASES = [
    ("record twice", (Record(MSG), Record(MSG)), "lost"),
    (
        "record final ends the call",
        (Record(make_message("k1", "notes", "error", EPOCH)),),
        "written",
    ),
    ("seq taken", (_call("k2", 1),), "lost"),
    ("seq ahead", (_call("k2", 3),), "lost"),
    ("next seq", (_call("k2", 2),), "written"),
    (
        "unknown session",
        (NewCall("k2", "fp", "c1", "notes", "m", "{}", "nope", A, 1, "queued", EPOCH),),
        "lost",
    ),
    ("call id taken", (_call("k1", None),), "constraint"),
    ("session id taken", (NewSession(S, "c9", "notes", "1.0.0", EPOCH),), "constraint"),
    (
        "conversation has a session",
        (NewSession("s2", "c1", "notes", "1.0.0", EPOCH),),
        "constraint",
    ),
    ("call state guard", (CallState("k1", "delivered", "done"),), "lost"),
    ("call state", (CallState("k1", "queued", "delivered"),), "written"),
    ("bad call state", (CallState("k1", "queued", "flying"),), "constraint"),
    (
        "update ended activation",
        (ActivationUpdate(A, state="failed"), ActivationUpdate(A, foreground=True)),
        "lost",
    ),
    ("update starting", (ActivationUpdate(A, worker_ready=True, reason="x"),), "written"),
    ("reopen starting", (ReopenActivation(A),), "lost"),
    ("reopen ready", (ActivationUpdate(A, state="ready"), ReopenActivation(A)), "written"),
    ("end unknown operation", (EndOperation("op", "completed", EPOCH),), "lost"),
    (
        "end operation twice",
        (
            NewOperation("op", "k1", "c1", S, "pomodoro.focus", EPOCH, EPOCH + 1, "{}"),
            EndOperation("op", "completed", EPOCH),
            EndOperation("op", "interrupted", EPOCH),
        ),
        "lost",
    ),
    (
        "operation per call",
        (
            NewOperation("op", "k1", "c1", S, "pomodoro.focus", EPOCH, EPOCH + 1, "{}"),
            NewOperation("op2", "k1", "c1", S, "pomodoro.focus", EPOCH, EPOCH + 1, "{}"),
        ),
        "constraint",
    ),
    (
        "im record twice",
        (NewIMRecord("op", "c1", {}, EPOCH), NewIMRecord("op", "c1", {}, EPOCH)),
        "constraint",
    ),
    ("data at 0", (ReplaceSessionData("notes", S, 0, "{}"),), "written"),
    (
        "data at 0 twice",
        (ReplaceSessionData("notes", S, 0, "{}"), ReplaceSessionData("notes", S, 0, "{}")),
        "lost",
    ),
    ("data ahead", (ReplaceSessionData("notes", S, 1, "{}"),), "lost"),
    (
        "data in order",
        (ReplaceSessionData("notes", S, 0, "{}"), ReplaceSessionData("notes", S, 1, '{"a":1}')),
        "written",
    ),
    (
        "intents",
        (
            NewIntent("k", {"b": 1}, A),
            NewIntent("k", {"b": 2}, A),  # ignored: one per dedup key
            NewIntent("k2", {"b": 3}, A),
            NewIntent("k3", {"b": 4}, "other"),
            IntentDelivered(1),
            SupersedeIntents(A),
        ),
        "written",
    ),
]


@pytest.mark.parametrize(("changes", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_guards_and_constraints_agree(
    store: Store, changes: tuple[Change, ...], expected: str
) -> None:
    mem = MemoryFacts()
    for scope in ("notes", "pomodoro"):
        mem.make_current(scope, "1.0.0")
    for change in BASE:
        store.facts.apply(change)
        mem.apply(change)
    got = _apply_both(store.facts, mem, Decision(changes))
    assert got == (expected, expected)
    assert reads(store.facts, mem) == reads(mem, mem)


def test_a_rolled_back_step_leaves_nothing() -> None:
    mem = MemoryFacts()
    for change in BASE:
        mem.apply(change)
    before = mem.dump()
    with pytest.raises(LostRace), mem.savepoint() as tx:
        tx.apply(ReplaceSessionData("notes", S, 0, "{}"))
        tx.apply(Record(MSG))
        tx.apply(Record(MSG))
    assert mem.dump() == before
    with mem.savepoint() as tx:
        tx.apply(ReplaceSessionData("notes", S, 0, "{}"))
    assert mem.session_data("notes", S).revision == 1
