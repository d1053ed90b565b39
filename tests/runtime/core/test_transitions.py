"""Every pure transition, branch by branch: the exact changes, answer and effects each
decides (SPEC 5.2–5.7), and that they read no clock and draw no randomness."""

from __future__ import annotations

import dataclasses
import json
import os
import random
import secrets
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from lineup_runtime_lite.api.clock import format_ts
from lineup_runtime_lite.core import pomodoro
from lineup_runtime_lite.core.activations import (
    advance_activation,
    end_activation,
    host_event_action,
    intent_delivered,
    supersede_ended,
    worker_lost,
)
from lineup_runtime_lite.core.calls import (
    CallEvent,
    CallFacts,
    NewIds,
    accept_call,
    decide_call,
    needs_fresh_ids,
    reject_call,
    retried_call,
)
from lineup_runtime_lite.core.decisions import (
    ActivationUpdate,
    CallState,
    Decision,
    EndOperation,
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
from lineup_runtime_lite.core.deliveries import (
    answer_delivery,
    commit_pending,
    hold_replace,
    interrupt_delivery,
    next_delivery,
)
from lineup_runtime_lite.core.messages import (
    AgentMessage,
    ErrorBody,
    Unchecked,
    error_body,
    make_message,
)
from lineup_runtime_lite.core.rows import (
    Activation,
    Call,
    Intent,
    Operation,
    PendingData,
    Session,
)
from lineup_sdk.context import MAX_SESSION_DATA
from lineup_sdk.errors import LineupError
from tests.runtime.transition_kit import EPOCH, event, pomodoro_tools, tool

NOW = EPOCH + 5_000
IDS = NewIds("ses_new", "inst_new", "op_new")
SHOW = tool("notes.show", activation="foreground_required")
ADD = tool("notes.add")
COUNT = tool("notes.count", activation="activation_not_required")
START, INTERRUPT = pomodoro_tools()
SESSION = Session("ses1", "c1", "notes", "1.0.0", 4)


def act(
    state: str = "ready", *, fg_req: bool = False, worker: bool = True, fg: bool = False
) -> Activation:
    return Activation("inst1", "ses1", "t1", state, fg_req, worker, fg, EPOCH + 60_000)


def call(
    call_id: str = "t1", method: str = "notes.add", state: str = "queued", seq: int = 1
) -> Call:
    scope = method.split(".")[0]
    return Call(call_id, "fp", "c1", scope, method, '{"minutes":5}', "ses1", "inst1", seq, state)


def accept(
    ev: CallEvent, tool_: Any, session: Session | None, a: Activation | None, *, idle: bool = True
) -> Decision:
    return accept_call(
        ev, tool_, session, a, app_version="1.0.0", idle=idle, ids=IDS, now=NOW, timeout_ms=60_000
    )


def msg(call_id: str, stage: str, scope: str = "notes", **kw: Any) -> AgentMessage:
    return make_message(call_id, scope, stage, NOW, **kw)


def row(
    ev: CallEvent,
    tool_: Any,
    sid: str | None,
    act_id: str | None,
    seq: int | None,
    state: str = "queued",
) -> NewCall:
    return NewCall(
        ev.call_id,
        ev.fingerprint,
        ev.conversation_id,
        tool_.scope,
        tool_.method,
        ev.params,
        sid,
        act_id,
        seq,
        state,
        NOW,
    )


def show_intent(act_id: str) -> NewIntent:
    body = {"intent": "show_surface", "instance": act_id, "conversation": "c1", "scope": "notes"}
    return NewIntent(f"show_surface:{act_id}", body, act_id)


# -- accept_call ---------------------------------------------------------------------------
EV = event("k1", "c1", "notes.add", {"text": "x"})
EV_SHOW = event("k1", "c1", "notes.show")


def test_ready_and_idle_is_delivered_at_once_with_the_next_seq() -> None:
    d = accept(EV, ADD, SESSION, act())
    assert d == Decision((row(EV, ADD, "ses1", "inst1", 4, "delivered"),), deliver="k1")


def test_ready_and_busy_is_queued_and_kicks_the_pump() -> None:
    d = accept(EV, ADD, SESSION, act(), idle=False)
    assert d == Decision((row(EV, ADD, "ses1", "inst1", 4),), kick=("ses1",))


def test_a_call_joining_a_starting_activation_is_queued() -> None:
    d = accept(EV, ADD, SESSION, act("starting"))
    m = msg("k1", "accepted", activation="queued")
    assert d == Decision((row(EV, ADD, "ses1", "inst1", 4), NewReceipt(m)), answer=m)


def test_a_foreground_call_raises_a_starting_activations_bar() -> None:
    d = accept(EV_SHOW, SHOW, SESSION, act("starting", worker=True))
    m = msg("k1", "accepted", activation="queued")
    assert d == Decision(
        (
            ActivationUpdate("inst1", requires_foreground=True),
            row(EV_SHOW, SHOW, "ses1", "inst1", 4),
            NewReceipt(m),
            show_intent("inst1"),
        ),
        answer=m,
        drive=("inst1",),
        host=True,
    )
    # already raised: it only joins the queue
    d = accept(EV_SHOW, SHOW, SESSION, act("starting", fg_req=True))
    assert d.changes == (row(EV_SHOW, SHOW, "ses1", "inst1", 4), NewReceipt(m))
    assert (d.drive, d.host) == ((), False)


@pytest.mark.parametrize("fg", [False, True], ids=["app_ready", "foreground_required"])
def test_no_session_starts_one_and_an_activation(fg: bool) -> None:
    tool_, ev = (SHOW, EV_SHOW) if fg else (ADD, EV)
    d = accept(ev, tool_, None, None)
    m = msg("k1", "accepted", activation="starting")
    expected: list[Any] = [
        NewSession("ses_new", "c1", "notes", "1.0.0", NOW),
        NewActivation("inst_new", "ses_new", "k1", fg, NOW + 60_000, NOW),
        row(ev, tool_, "ses_new", "inst_new", 1),
        NewReceipt(m),
    ]
    if fg:
        expected.append(show_intent("inst_new"))
    assert d == Decision(tuple(expected), answer=m, drive=("inst_new",), host=fg)


@pytest.mark.parametrize("state", ["failed", "cancelled"])
def test_an_ended_activation_gets_a_new_one_in_the_same_session(state: str) -> None:
    d = accept(EV, ADD, SESSION, act(state))
    m = msg("k1", "accepted", activation="starting")
    assert d.changes == (
        NewActivation("inst_new", "ses1", "k1", False, NOW + 60_000, NOW),
        row(EV, ADD, "ses1", "inst_new", 4),
        NewReceipt(m),
    )


def test_a_foreground_call_on_a_session_ready_without_the_host_starts_anew() -> None:
    d = accept(EV_SHOW, SHOW, SESSION, act("ready", fg=False))
    assert [type(c) for c in d.changes] == [NewActivation, NewCall, NewReceipt, NewIntent]
    assert d.answer is not None and d.answer["activation"] == "starting"
    # with the Host's confirmation it is served by the ready session
    assert accept(EV_SHOW, SHOW, SESSION, act("ready", fg=True)).deliver == "k1"


@pytest.mark.parametrize(
    ("session", "a"),
    [(None, None), (SESSION, act("starting")), (SESSION, act("failed")), (SESSION, None)],
    ids=["none", "starting", "failed", "no-activation"],
)
def test_activation_not_required_without_a_ready_session_is_app_not_running(
    session: Any, a: Any
) -> None:
    ev = event("k1", "c1", "notes.count")
    d = accept(ev, COUNT, session, a)
    m = msg(
        "k1",
        "error",
        error=error_body("app_not_running", "notes is not running in this conversation"),
    )
    assert d == Decision((row(ev, COUNT, None, None, None), NewReceipt(m)), answer=m)


def test_activation_not_required_on_a_ready_session_is_delivered() -> None:
    ev = event("k1", "c1", "notes.count")
    assert accept(ev, COUNT, SESSION, act()).deliver == "k1"
    assert accept(ev, COUNT, SESSION, act(), idle=False).kick == ("ses1",)


def test_retried_and_rejected_calls_write_nothing() -> None:
    existing = Call(
        "k1", EV.fingerprint, "c1", "notes", "notes.add", EV.params, None, None, None, "done"
    )
    assert retried_call(existing, EV, "notes", NOW) == Decision(replay=True)
    other = event("k1", "c1", "notes.add", {"text": "y"})
    d = retried_call(existing, other, "notes", NOW)
    assert d.changes == () and not d.replay
    assert d.answer is not None and d.answer["error"]["code"] == "call_id_conflict"
    assert d.answer["id"] == "k1:error"
    body = error_body("unknown_method", "nope")
    assert reject_call("k1", "x", body, NOW) == Decision(answer=msg("k1", "error", "x", error=body))


# -- activations ---------------------------------------------------------------------------
def test_advance_app_ready_is_ready_once_the_worker_is_up() -> None:
    d = advance_activation(act("starting", worker=False), call(), now=NOW, worker_up=True)
    assert d == Decision(
        (
            ActivationUpdate("inst1", state="ready", ended_ms=NOW, worker_ready=True),
            NewReceipt(msg("t1", "activation_ready")),
        ),
        kick=("ses1",),
    )


def test_advance_foreground_waits_for_both_conditions() -> None:
    up = advance_activation(
        act("starting", fg_req=True, worker=False), call(), now=NOW, worker_up=True
    )
    assert up == Decision((ActivationUpdate("inst1", worker_ready=True),))
    early = advance_activation(
        act("starting", fg_req=True, worker=False), call(), now=NOW, confirmed=True
    )
    assert early == Decision((ActivationUpdate("inst1", foreground=True),))
    both = advance_activation(
        act("starting", fg_req=True, worker=True), call(), now=NOW, confirmed=True
    )
    assert both is not None
    assert both.changes == (
        ActivationUpdate("inst1", state="ready", ended_ms=NOW, foreground=True),
        NewReceipt(msg("t1", "activation_ready")),
    )


def test_advance_changes_nothing_twice_or_after_the_end() -> None:
    assert advance_activation(act("starting", fg_req=True), call(), now=NOW, worker_up=True) is None
    for state in ("ready", "failed", "cancelled"):
        assert advance_activation(act(state, worker=False), call(), now=NOW, worker_up=True) is None


def test_advance_gives_no_ready_receipt_to_a_trigger_that_was_answered() -> None:
    d = advance_activation(
        act("starting", worker=False), call(state="done"), now=NOW, worker_up=True
    )
    assert d is not None and [type(c) for c in d.changes] == [ActivationUpdate]
    d = advance_activation(act("starting", worker=False), None, now=NOW, worker_up=True)
    assert d is not None and d.kick == ("ses1",)


def test_advance_lets_the_runtime_handler_decide_on_ready() -> None:
    seen: list[Call] = []

    def on_ready(c: Call) -> tuple[Any, ...]:
        seen.append(c)
        return (CallState(c.call_id, "queued", "running"),)

    d = advance_activation(
        act("starting", worker=False), call(), now=NOW, worker_up=True, on_ready=on_ready
    )
    assert d is not None and d.changes[1:] == (CallState("t1", "queued", "running"),)
    assert seen == [call()]


def _ended_error(
    call_id: str, stage: str, state: str, reason: str, cause: str | None = None
) -> NewReceipt:
    details = {"reason": reason, **({"cause": cause} if cause else {})}
    text = f"the app's activation was {state} ({reason}); the call did not run"
    return NewReceipt(msg(call_id, "error", error=error_body(stage, text, details=details)))


@pytest.mark.parametrize(
    ("state", "stage"), [("failed", "activation_failed"), ("cancelled", "activation_cancelled")]
)
def test_end_activation_answers_the_trigger_twice_and_every_waiting_call_once(
    state: str, stage: str
) -> None:
    waiting = [call("t1"), call("w1", seq=2), call("w2", seq=3)]
    tools = {"notes.add": ADD}
    d = end_activation(act("starting"), waiting, tools, state, "host_failed", now=NOW)
    assert d == Decision(
        (
            ActivationUpdate("inst1", state=state, reason="host_failed", ended_ms=NOW),
            SupersedeIntents("inst1"),
            NewReceipt(msg("t1", stage, reason="host_failed")),
            _ended_error("t1", stage, state, "host_failed"),
            _ended_error("w1", stage, state, "host_failed"),
            _ended_error("w2", stage, state, "host_failed"),
        ),
        stop=("inst1",),
    )


def test_end_activation_long_running_runtime_tool_is_not_started_and_cause_is_kept() -> None:
    lr_sdk = tool("notes.add", long_running=True)  # long-running but SDK-delivered: an error
    start = call("t1", "pomodoro.start")
    tools = {"pomodoro.start": START, "notes.add": lr_sdk}
    d = end_activation(
        act("starting"),
        [start, call("w1", seq=2)],
        tools,
        "failed",
        "worker_failed",
        now=NOW,
        cause="install_tampered",
    )
    assert d is not None
    assert d.changes[2:] == (
        NewReceipt(msg("t1", "activation_failed", "pomodoro", reason="worker_failed")),
        NewReceipt(
            msg(
                "t1",
                "result",
                "pomodoro",
                result={"status": "not_started", "reason": "worker_failed"},
            )
        ),
        _ended_error("w1", "activation_failed", "failed", "worker_failed", "install_tampered"),
    )


def test_end_activation_of_a_trigger_already_answered_gives_only_the_waiting_their_finals() -> None:
    d = end_activation(
        act("starting"), [call("w1", seq=2)], {"notes.add": ADD}, "failed", "timeout", now=NOW
    )
    assert d is not None and d.changes[2:] == (
        _ended_error("w1", "activation_failed", "failed", "timeout"),
    )


@pytest.mark.parametrize("state", ["ready", "failed", "cancelled"])
def test_end_activation_after_it_left_starting_writes_nothing(state: str) -> None:
    assert (
        end_activation(act(state), [call()], {"notes.add": ADD}, "failed", "timeout", now=NOW)
        is None
    )


def test_worker_lost_reopens_then_fails_a_ready_activation() -> None:
    waiting = [call("w1", seq=2)]
    d = worker_lost(act("ready"), waiting, {"notes.add": ADD}, now=NOW)
    assert d == Decision(
        (
            ReopenActivation("inst1"),
            ActivationUpdate("inst1", state="failed", reason="worker_failed", ended_ms=NOW),
            SupersedeIntents("inst1"),
            _ended_error("w1", "activation_failed", "failed", "worker_failed"),
        ),
        stop=("inst1",),
    )
    for state in ("starting", "failed"):
        assert worker_lost(act(state), waiting, {}, now=NOW) is None


def test_worker_lost_tells_a_waiting_trigger_only_its_final() -> None:
    """The trigger was told `activation_ready` already: no `activation_failed` receipt
    after it, only the final error."""
    trigger = call("t1", seq=1)  # act()'s trigger, still queued
    d = worker_lost(act("ready"), [trigger], {"notes.add": ADD}, now=NOW)
    assert d is not None
    stages = [c.message["stage"] for c in d.changes if isinstance(c, NewReceipt)]
    assert stages == ["error"]


@pytest.mark.parametrize(
    ("a", "conv", "scope", "ev", "expected"),
    [
        (act("starting"), "c1", "notes", "foreground_confirmed", "confirm"),
        (act("starting"), "c1", "notes", "activation_failed", "fail"),
        (act("starting"), "c1", "notes", "user_left", "leave"),
        (act("starting"), "c1", "notes", "preload", None),
        (act("starting"), "c1", "notes", "surface_loaded", None),
        (act("ready"), "c1", "notes", "foreground_confirmed", None),
        (act("cancelled"), "c1", "notes", "user_left", None),
        (act("starting"), "c2", "notes", "foreground_confirmed", None),
        (act("starting"), "c1", "other", "foreground_confirmed", None),
        (None, "c1", "notes", "foreground_confirmed", None),
    ],
    ids=[
        "confirm",
        "fail",
        "leave",
        "preload",
        "loaded",
        "stale-ready",
        "stale-ended",
        "foreign-conversation",
        "foreign-scope",
        "unknown",
    ],
)
def test_host_event_action(a: Any, conv: str, scope: str, ev: str, expected: str | None) -> None:
    session = SESSION if a is not None else None
    assert host_event_action(a, session, ev, conv, scope) == expected


def test_an_unknown_host_event_is_scenario_invalid() -> None:
    with pytest.raises(LineupError) as err:
        host_event_action(act("starting"), SESSION, "exploded", "c1", "notes")
    assert err.value.code == "scenario_invalid"


# -- delivery ------------------------------------------------------------------------------
def test_next_delivery() -> None:
    head = call()
    assert next_delivery(None, ADD, NOW) is None
    assert next_delivery((head, "starting"), ADD, NOW) is None
    assert next_delivery((head, "ready"), ADD, NOW) == Decision(
        (CallState("t1", "queued", "delivered"),), deliver="t1"
    )
    for served in (None, START):
        d = next_delivery((head, "ready"), served, NOW)
        text = "notes.add is not served by this app version"
        assert d == Decision(
            (NewReceipt(msg("t1", "error", error=error_body("handler_failed", text))),)
        )


def _final_error(d: Decision) -> ErrorBody:
    (change,) = d.changes
    assert isinstance(change, NewReceipt) and change.message["stage"] == "error"
    assert change.message["id"] == "t1:error"
    return change.message["error"]


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("app.not_found", "app.not_found"),
        ("invalid_params", "invalid_params"),
        ("handler_result_invalid", "handler_result_invalid"),
        ("handler_failed", "handler_failed"),
        ("session_data_revision_conflict", "session_data_revision_conflict"),
        ("session_data_too_large", "session_data_too_large"),
        ("not_found", "handler_failed"),
        ("worker_protocol_error", "handler_failed"),
        ("delivery_interrupted", "handler_failed"),
        ("APP.x", "handler_failed"),
    ],
)
def test_answer_delivery_maps_handler_codes(code: str, expected: str) -> None:
    reply = {"ok": False, "error": {"code": code, "message": "m" * 3000, "details": {"k": 1}}}
    err = _final_error(answer_delivery(call(), ADD, now=NOW, reply=reply))
    assert err["code"] == expected
    assert err["message"] == "m" * 2000
    assert err["details"] == {"k": 1}


def test_answer_delivery_outcomes() -> None:
    ok = answer_delivery(call(), ADD, now=NOW, reply={"ok": True, "result": {"n": 1}})
    assert ok == Decision((NewReceipt(msg("t1", "result", result={"n": 1})),))
    problems = [{"path": "/n", "message": "bad"}]
    bad = _final_error(
        answer_delivery(
            call(), ADD, now=NOW, reply={"ok": True, "result": 1}, result_problems=problems
        )
    )
    assert (bad["code"], bad["details"]) == ("handler_result_invalid", problems)
    assert (
        _final_error(answer_delivery(call(), ADD, now=NOW, timed_out=True))["code"]
        == "handler_timeout"
    )
    assert "30 s" in _final_error(answer_delivery(call(), ADD, now=NOW, timed_out=True))["message"]
    proto = answer_delivery(call(), ADD, now=NOW, worker_error=("protocol", "garbled"))
    assert _final_error(proto)["code"] == "worker_protocol_error"
    assert _final_error(proto)["message"] == "notes.add: garbled"
    crashed = answer_delivery(call(), ADD, now=NOW, worker_error=("crashed", "gone"))
    assert _final_error(crashed)["code"] == "delivery_interrupted"
    assert "details" not in _final_error(crashed)
    # a known cause of the worker's end is the error's details.reason (SPEC 7)
    killed = answer_delivery(
        call(), ADD, now=NOW, worker_error=("crashed", "killed"), worker_reason="memory_limit"
    )
    assert _final_error(killed)["details"] == {"reason": "memory_limit"}
    for reply in ({"ok": False}, {"ok": False, "error": "text"}):
        assert (
            _final_error(answer_delivery(call(), ADD, now=NOW, reply=reply))["code"]
            == "handler_failed"
        )
    assert _final_error(interrupt_delivery(call(), NOW))["code"] == "delivery_interrupted"


# -- session data --------------------------------------------------------------------------
def test_hold_replace_holds_base_plus_one_in_place() -> None:
    first = hold_replace(None, 3, "notes", "ses1", {"b": [2, 1], "a": None}, 3)
    assert first == PendingData("notes", "ses1", 3, b'{"a":null,"b":[2,1]}')
    assert first.revision == 4
    # a later write of the same delivery checks against the held snapshot, and is still 4
    second = hold_replace(first, 0, "notes", "ses1", {"c": 1}, 4)
    assert second == PendingData("notes", "ses1", 3, b'{"c":1}') and second.revision == 4
    with pytest.raises(LineupError) as err:
        hold_replace(first, 3, "notes", "ses1", {"c": 1}, 3)  # the committed one is stale
    assert err.value.code == "session_data_revision_conflict"
    # the handler learns the revision it must read again: the held one, not the stored one
    assert err.value.message == "session data is at revision 4, not 3"
    assert hold_replace(None, 0, "notes", "ses1", {}, 0).revision == 1


def test_commit_pending_writes_base_plus_one_only_on_its_base() -> None:
    held = PendingData("notes", "ses1", 3, b'{"a":1}')
    assert commit_pending(held, 3) == (ReplaceSessionData("notes", "ses1", 3, '{"a":1}'),)
    assert commit_pending(held, 4) is None
    assert commit_pending(held, 2) is None


def test_answer_delivery_carries_the_held_data_with_a_result_only() -> None:
    held = PendingData("notes", "ses1", 0, b'{"a":1}')
    ok = answer_delivery(
        call(), ADD, now=NOW, reply={"ok": True, "result": 1}, pending=held, committed=0
    )
    write, receipt = ok.changes
    assert write == ReplaceSessionData("notes", "ses1", 0, '{"a":1}')
    assert isinstance(receipt, NewReceipt) and receipt.message["stage"] == "result"
    # every failure drops it: nothing of the delivery is applied
    refused = {"ok": False, "error": {"code": "app.nope", "message": "no"}}
    for outcome in (
        {"reply": refused},
        {"reply": {"ok": True, "result": 1}, "result_problems": Unchecked(1.0)},
        {"timed_out": True},
        {"worker_error": ("crashed", "gone")},
        {"worker_error": ("protocol", "bad")},
    ):
        d = answer_delivery(call(), ADD, now=NOW, pending=held, committed=0, **outcome)
        _final_error(d)  # its one change is the error receipt: no session data
    # the stored revision moved off the delivery's base: it fails and applies nothing
    moved = answer_delivery(
        call(), ADD, now=NOW, reply={"ok": True, "result": 1}, pending=held, committed=1
    )
    assert _final_error(moved)["code"] == "handler_failed"
    assert _final_error(moved)["message"] == (
        "notes.add: the session data changed under the delivery (revision 1, the delivery "
        "started at 0); nothing it wrote was applied"
    )


@pytest.mark.parametrize(
    ("current", "data", "expected", "code"),
    [
        (3, {"a": 1}, 2, "session_data_revision_conflict"),
        (3, {"a": 1}, 4, "session_data_revision_conflict"),
        (0, [1], 0, "session_data_invalid"),
        (0, {"a": 1}, "0", "session_data_invalid"),
        (0, {"a": 1}, True, "session_data_invalid"),
        (0, {"a": float("nan")}, 0, "session_data_invalid"),
        (0, {"a": "x" * MAX_SESSION_DATA}, 0, "session_data_too_large"),
    ],
    ids=["behind", "ahead", "not-object", "str-revision", "bool-revision", "nan", "too-large"],
)
def test_hold_replace_refusals(current: int, data: Any, expected: Any, code: str) -> None:
    with pytest.raises(LineupError) as err:
        hold_replace(None, current, "notes", "ses1", data, expected)
    assert err.value.code == code


# -- the Host relay ------------------------------------------------------------------------
def test_supersede_ended_and_intent_delivered() -> None:
    heads = [
        Intent(i, f"i{i}", "{}", state)
        for i, state in enumerate(["starting", "failed", "ready", None, "cancelled"])
    ]
    assert supersede_ended(heads) == Decision((SupersedeIntents("i1"), SupersedeIntents("i4")))
    assert supersede_ended([h for h in heads if h.instance in ("i0", "i2", "i3")]) is None
    assert intent_delivered(heads[2]).changes[0].id == 2  # type: ignore[union-attr]


# -- Pomodoro ------------------------------------------------------------------------------
PEV = event("s1", "c1", "pomodoro.start", {"minutes": 5})


def test_pomodoro_start() -> None:
    d = pomodoro.start(
        PEV, START, None, "1.0.0", already_active=False, ids=IDS, now=NOW, timeout_ms=60_000
    )
    assert [type(c) for c in d.changes] == [
        NewSession,
        NewActivation,
        NewCall,
        NewReceipt,
        NewIntent,
    ]
    assert d.changes[1] == NewActivation("inst_new", "ses_new", "s1", True, NOW + 60_000, NOW)
    assert (d.drive, d.host) == (("inst_new",), True)
    busy = pomodoro.start(
        PEV, START, None, "1.0.0", already_active=True, ids=IDS, now=NOW, timeout_ms=60_000
    )
    m = busy.answer
    assert m is not None and m["error"]["code"] == "pomodoro_already_active"
    assert busy.changes == (row(PEV, START, None, None, None), NewReceipt(m))
    assert (busy.drive, busy.host) == ((), False)


@pytest.mark.parametrize(("params", "minutes"), [('{"minutes":5}', 5), ("{}", 25)])
def test_pomodoro_focus_started(params: str, minutes: int) -> None:
    c = Call("s1", "fp", "c1", "pomodoro", "pomodoro.start", params, "ses1", "inst1", 1, "queued")
    ends = NOW + minutes * 60_000
    started = msg("s1", "started", "pomodoro", started_at=format_ts(NOW), ends_at=format_ts(ends))
    assert pomodoro.focus_started(c, NOW, "op9") == (
        NewOperation("op9", "s1", "c1", "ses1", "pomodoro.focus", NOW, ends, params),
        CallState("s1", "queued", "running"),
        NewReceipt(started),
    )


OP = Operation(
    "op9",
    "s1",
    "c1",
    "ses1",
    "pomodoro.focus",
    "focusing",
    EPOCH,
    EPOCH + 300_000,
    '{"minutes":5,"label":"x"}',
)


@pytest.mark.parametrize("state", ["completed", "interrupted"])
def test_pomodoro_end_focus(state: str) -> None:
    times = {
        "started_at": format_ts(EPOCH),
        "ends_at": format_ts(EPOCH + 300_000),
        "ended_at": format_ts(NOW),
    }
    result = {"status": state, "operation_id": "op9", **times}
    im = {
        "kind": "pomodoro.focus",
        "status": state,
        "minutes": 5,
        "label": "x",
        "operation_id": "op9",
        **times,
    }
    assert pomodoro.end_focus(OP, state, NOW, "pomodoro") == (
        EndOperation("op9", state, NOW),
        NewIMRecord("op9", "c1", im, NOW),
        NewReceipt(msg("s1", "result", "pomodoro", result=result)),
    )


IEV = event("i1", "c1", "pomodoro.interrupt")


def _interrupt_answer(status: str) -> AgentMessage:
    return msg("i1", "result", "pomodoro", result={"status": status})


def test_pomodoro_interrupt_cancels_a_starting_one() -> None:
    start_call = Call(
        "t1", "fp", "c1", "pomodoro", "pomodoro.start", "{}", "ses1", "inst1", 1, "queued"
    )
    tools = {"pomodoro.start": START}
    d = pomodoro.interrupt(
        IEV, INTERRUPT, starting=(act("starting"), [start_call], tools), focusing=OP, now=NOW
    )
    m = _interrupt_answer("cancelled_starting")
    ended = end_activation(
        act("starting"), [start_call], tools, "cancelled", "interrupted", now=NOW
    )
    assert ended is not None
    assert d == Decision(
        (*ended.changes, row(IEV, INTERRUPT, None, None, None), NewReceipt(m)),
        answer=m,
        stop=("inst1",),
    )
    assert (
        NewReceipt(
            msg(
                "t1",
                "result",
                "pomodoro",
                result={"status": "not_started", "reason": "interrupted"},
            )
        )
        in d.changes
    )


def test_pomodoro_interrupt_a_focus_or_nothing() -> None:
    d = pomodoro.interrupt(IEV, INTERRUPT, starting=None, focusing=OP, now=NOW)
    m = _interrupt_answer("interrupted")
    assert d == Decision(
        (
            *pomodoro.end_focus(OP, "interrupted", NOW, "pomodoro"),
            row(IEV, INTERRUPT, None, None, None),
            NewReceipt(m),
        ),
        answer=m,
    )
    d = pomodoro.interrupt(IEV, INTERRUPT, starting=None, focusing=None, now=NOW)
    m = _interrupt_answer("nothing_running")
    assert d == Decision((row(IEV, INTERRUPT, None, None, None), NewReceipt(m)), answer=m)


# -- decide_call: the one acceptance decision ----------------------------------------------
def decide(facts: CallFacts, ev: CallEvent = EV) -> Decision:
    return decide_call(ev, facts, ids=IDS, now=NOW, timeout_ms=60_000)


def test_decide_call_replays_a_retried_call_and_refuses_a_conflicting_one() -> None:
    stored = call("k1", "notes.add")
    same = dataclasses.replace(stored, fingerprint=EV.fingerprint)
    assert decide(CallFacts(same, ADD)) == Decision(replay=True)
    conflict = decide(CallFacts(stored, ADD))
    assert conflict.answer is not None and conflict.changes == ()
    assert conflict.answer["error"]["code"] == "call_id_conflict"


def test_decide_call_answers_unknown_method_and_invalid_params_persisting_nothing() -> None:
    unknown = decide(CallFacts(None, None), event("k1", "c1", "nope.run"))
    assert unknown.changes == () and unknown.answer is not None
    assert unknown.answer["app_scope"] == "nope"
    assert unknown.answer["error"]["code"] == "unknown_method"
    problem = {"path": "/text", "message": "required", "expected": "", "value": None}
    invalid = decide(CallFacts(None, ADD, [problem]))
    assert invalid.changes == () and invalid.answer is not None
    assert invalid.answer["error"]["code"] == "invalid_params"
    assert invalid.answer["error"]["details"] == [problem]
    late = decide(CallFacts(None, ADD, Unchecked(0.5)))
    assert late.answer is not None and late.answer["error"]["code"] == "invalid_params"
    assert late.answer["error"]["details"] == {"reason": "validation_budget", "budget_s": 0.5}


def test_decide_call_routes_a_screened_call_through_accept_call() -> None:
    facts = CallFacts(None, ADD, [], SESSION, act(), idle=True)
    assert decide(facts) == accept(EV, ADD, SESSION, act(), idle=True)
    fresh = CallFacts(None, ADD, None, None, None, app_version="1.0.0")
    assert decide(fresh) == accept(EV, ADD, None, None)
    count = CallFacts(None, COUNT, None, None, None, app_version="1.0.0")
    ev = event("k1", "c1", "notes.count")
    assert decide(count, ev).answer["error"]["code"] == "app_not_running"  # type: ignore[index]


def test_only_a_call_that_may_create_a_session_or_activation_needs_fresh_ids() -> None:
    assert needs_fresh_ids(ADD, None) and needs_fresh_ids(ADD, act("starting"))
    assert not needs_fresh_ids(ADD, act()) and not needs_fresh_ids(COUNT, act())
    assert needs_fresh_ids(SHOW, act())


# -- purity --------------------------------------------------------------------------------
CASES: list[tuple[str, Callable[[], Any]]] = [
    ("accept_call", lambda: accept(EV_SHOW, SHOW, None, None)),
    ("accept_join", lambda: accept(EV_SHOW, SHOW, SESSION, act("starting"))),
    ("decide_call", lambda: decide(CallFacts(None, SHOW, [], None, None, app_version="1"))),
    (
        "advance",
        lambda: advance_activation(act("starting", worker=False), call(), now=NOW, worker_up=True),
    ),
    (
        "end",
        lambda: end_activation(
            act("starting"), [call()], {"notes.add": ADD}, "failed", "timeout", now=NOW
        ),
    ),
    ("worker_lost", lambda: worker_lost(act(), [call()], {"notes.add": ADD}, now=NOW)),
    ("next_delivery", lambda: next_delivery((call(), "ready"), ADD, NOW)),
    (
        "answer",
        lambda: answer_delivery(call(), ADD, now=NOW, reply={"ok": False, "error": {"code": "x"}}),
    ),
    ("replace", lambda: hold_replace(None, 0, "notes", "ses1", {"a": 1}, 0)),
    (
        "start",
        lambda: pomodoro.start(
            PEV, START, None, "1", already_active=False, ids=IDS, now=NOW, timeout_ms=1
        ),
    ),
    ("focus", lambda: pomodoro.focus_started(call("s1", "pomodoro.start"), NOW, "op")),
    ("end_focus", lambda: pomodoro.end_focus(OP, "completed", NOW, "pomodoro")),
    ("interrupt", lambda: pomodoro.interrupt(IEV, INTERRUPT, starting=None, focusing=OP, now=NOW)),
]


@pytest.mark.parametrize("make", [c[1] for c in CASES], ids=[c[0] for c in CASES])
def test_transitions_are_pure(make: Callable[[], Any], monkeypatch: pytest.MonkeyPatch) -> None:
    first = make()

    def forbidden(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a transition read the clock or drew randomness")

    for module, name in [
        (time, "time"),
        (time, "time_ns"),
        (time, "monotonic"),
        (time, "perf_counter"),
        (secrets, "token_hex"),
        (secrets, "token_bytes"),
        (secrets, "token_urlsafe"),
        (os, "urandom"),
        (random, "random"),
        (random, "getrandbits"),
        (uuid, "uuid4"),
    ]:
        monkeypatch.setattr(module, name, forbidden)
    second = make()
    assert first == second
    assert json.dumps(repr(first)) == json.dumps(repr(second))
