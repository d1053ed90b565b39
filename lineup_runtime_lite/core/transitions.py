"""Every state transition of the runtime core, as pure functions (SPEC 5.2–5.7).

`(facts, event, now) -> Decision`: each takes the typed records a driver read inside the
savepoint that will apply the decision, the event, the runtime-clock time and any fresh
ids (drawn by the driver), and returns what to write and what to do after COMMIT. No IO,
no clock reads, no randomness: `tests/runtime/core/test_transitions.py` checks them against a
model, and the conformance fixtures replay through them.

Index (by name): calls — `decide_call` (the one acceptance decision: `screen_call`, then
`accept_call`), `retried_call`, `reject_call`, `answer_now`,
`accept_starting`, `enqueue_ready`; activations — `advance_activation`, `end_activation`,
`worker_lost`, `host_event_action`; delivery — `next_delivery`, `answer_delivery`,
`interrupt_delivery`; session data — `hold_replace` (a handler's write, held by its
delivery) and `commit_pending` (written with the delivery's answer); Host relay —
`supersede_ended`, `intent_delivered`. The Pomodoro's own transitions are in `pomodoro.py`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lineup_runtime_lite.core.decisions import (
    ActionDone,
    ActionState,
    ActivationUpdate,
    CallState,
    Change,
    Decision,
    IntentDelivered,
    MoveSession,
    NewAction,
    NewActivation,
    NewCall,
    NewIntent,
    NewReceipt,
    NewSession,
    ReopenActivation,
    ReplaceSessionData,
    SupersedeIntents,
)
from lineup_runtime_lite.core.messages import (
    AgentMessage,
    Checked,
    ErrorBody,
    Unchecked,
    error_body,
    make_message,
    schema_rejection,
)
from lineup_runtime_lite.core.rows import (
    Action,
    ActionEntry,
    Activation,
    Call,
    Intent,
    PendingData,
    RegistryEntry,
    Session,
)
from lineup_sdk.context import session_data_blob
from lineup_sdk.errors import LineupError

__all__ = [
    "ActionEvent",
    "ActionFacts",
    "CallEvent",
    "CallFacts",
    "NewIds",
    "accept_call",
    "accept_starting",
    "advance_activation",
    "answer_action",
    "answer_delivery",
    "answer_error",
    "answer_now",
    "commit_pending",
    "decide_action",
    "decide_call",
    "end_activation",
    "enqueue_ready",
    "hold_replace",
    "host_event_action",
    "intent_delivered",
    "interrupt_action",
    "interrupt_delivery",
    "move_dev_sessions",
    "needs_fresh_ids",
    "next_delivery",
    "reject_call",
    "retried_call",
    "screen_call",
    "show_surface",
    "supersede_ended",
    "worker_lost",
]

#: Error codes a handler may answer with as they are; anything else is `handler_failed`.
_HANDLER_CODES = ("handler_failed", "invalid_params", "handler_result_invalid")


@dataclass(frozen=True, slots=True)
class CallEvent:
    """An Agent call that passed the envelope checks: `params` is canonical JSON text."""

    call_id: str
    conversation_id: str
    method: str
    params: str
    fingerprint: str


@dataclass(frozen=True, slots=True)
class NewIds:
    """Fresh ids a transition may use (drawn by the driver: transitions draw nothing)."""

    session: str
    activation: str
    operation: str


# -- calls ----------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class CallFacts:
    """What a call's acceptance reads, inside the savepoint that applies its decision.

    `tool` is the Registry's tool for the method (None: no installed app declares it) and
    `problems` the input schema's findings against it. The session, its current activation,
    the version a new session pins and `idle` (the session's pump is not sending and its
    worker is up with the method SDK-delivered: the call may be sent right after its
    commit, which is the drivers' state) are read for SDK-delivered tools only.
    """

    existing: Call | None
    tool: RegistryEntry | None
    problems: Checked | None = None
    session: Session | None = None
    act: Activation | None = None
    app_version: str | None = None
    idle: bool = False


def screen_call(ev: CallEvent, facts: CallFacts, now: int) -> Decision | None:
    """The answers a call gets before it is routed: its stored outcome when retried (or a
    `call_id_conflict`), `unknown_method`, `invalid_params`; None when it is routed on."""
    tool = facts.tool
    scope = tool.scope if tool else ev.method.split(".")[0]
    if facts.existing is not None:
        return retried_call(facts.existing, ev, scope, now)
    if tool is None:
        body = error_body("unknown_method", f"no installed app declares {ev.method!r}")
        return reject_call(ev.call_id, scope, body, now)
    problems = facts.problems
    if isinstance(problems, Unchecked):
        message = (
            f"params of {ev.method} could not be validated within the "
            f"{problems.budget_s:g} s validation budget"
        )
        body = error_body("invalid_params", message, details=problems.details())
        return reject_call(ev.call_id, tool.scope, body, now)
    if problems:
        message, details = schema_rejection(ev.method, problems)
        body = error_body("invalid_params", message, details=details)
        return reject_call(ev.call_id, tool.scope, body, now)
    return None


def needs_fresh_ids(tool: RegistryEntry, act: Activation | None) -> bool:
    """Whether routing a call may create a session or an activation (a call for a ready
    session needs no new id, unless it asks for the foreground)."""
    ready = act is not None and act.state == "ready"
    return not ready or tool.activation == "foreground_required"


def decide_call(
    ev: CallEvent, facts: CallFacts, *, ids: NewIds, now: int, timeout_ms: int
) -> Decision:
    """A call's acceptance (SPEC 5.2), the one decision the engine and every test kit ask:
    `screen_call`'s answer, else `accept_call`'s route for an SDK-delivered tool.

    A runtime-delivered tool that passes the screen is its handler's to decide (the
    drivers' acceptance step asks it: `drivers.steps.accept`); it is not given here.
    """
    screened = screen_call(ev, facts, now)
    if screened is not None:
        return screened
    tool = facts.tool
    assert tool is not None and tool.delivery != "runtime", "a runtime handler decides it"
    version = facts.session.version if facts.session else facts.app_version
    assert version is not None, "an installed tool's scope has a current version"
    return accept_call(
        ev,
        tool,
        facts.session,
        facts.act,
        app_version=version,
        idle=facts.idle,
        ids=ids,
        now=now,
        timeout_ms=timeout_ms,
    )


def reject_call(call_id: str, scope: str, error: ErrorBody, now: int) -> Decision:
    """An answer that persists nothing (unknown method, bad params, conflict)."""
    return Decision(answer=make_message(call_id, scope, "error", now, error=error))


def retried_call(existing: Call, ev: CallEvent, scope: str, now: int) -> Decision:
    """A call_id seen before: the stored answer if it is the same call, else a conflict."""
    if existing.fingerprint != ev.fingerprint:
        return reject_call(
            ev.call_id,
            scope,
            error_body(
                "call_id_conflict",
                f"call_id {ev.call_id!r} was already used with another conversation, "
                "method or params",
            ),
            now,
        )
    return Decision(replay=True)


def _new_call(
    ev: CallEvent,
    tool: RegistryEntry,
    now: int,
    *,
    session: str | None = None,
    activation: str | None = None,
    seq: int | None = None,
    state: str = "queued",
) -> NewCall:
    return NewCall(
        ev.call_id,
        ev.fingerprint,
        ev.conversation_id,
        tool.scope,
        tool.method,
        ev.params,
        session,
        activation,
        seq,
        state,
        now,
    )


def answer_now(ev: CallEvent, tool: RegistryEntry, msg: AgentMessage, now: int) -> Decision:
    """A call answered at once (it needs no session), persisted with its final message."""
    return Decision((_new_call(ev, tool, now), NewReceipt(msg)), answer=msg)


def answer_error(ev: CallEvent, tool: RegistryEntry, code: str, message: str, now: int) -> Decision:
    """`answer_now` with a final error (the call is stored, with its answer)."""
    msg = make_message(ev.call_id, tool.scope, "error", now, error=error_body(code, message))
    return answer_now(ev, tool, msg, now)


def show_surface(activation_id: str, conversation_id: str, scope: str) -> NewIntent:
    """The Host intent that asks to show an instance's Surface."""
    body = {
        "intent": "show_surface",
        "instance": activation_id,
        "conversation": conversation_id,
        "scope": scope,
    }
    return NewIntent(f"show_surface:{activation_id}", body, activation_id)


def accept_starting(
    ev: CallEvent,
    tool: RegistryEntry,
    session: Session | None,
    app_version: str,
    *,
    foreground: bool,
    ids: NewIds,
    now: int,
    timeout_ms: int,
) -> Decision:
    """Queue a call as the trigger of a new `starting` activation (a new App session when
    the conversation has none for the scope): `accepted/starting`."""
    assert ids.session and ids.activation, "a new activation needs fresh ids"
    changes: list[Change] = []
    if session is None:
        sid, seq = ids.session, 1
        changes.append(NewSession(sid, ev.conversation_id, tool.scope, app_version, now))
    else:
        sid, seq = session.app_session_id, session.next_seq
    act_id = ids.activation
    changes.append(NewActivation(act_id, sid, ev.call_id, foreground, now + timeout_ms, now))
    changes.append(_new_call(ev, tool, now, session=sid, activation=act_id, seq=seq))
    msg = make_message(ev.call_id, tool.scope, "accepted", now, activation="starting")
    changes.append(NewReceipt(msg))
    if foreground:
        changes.append(show_surface(act_id, ev.conversation_id, tool.scope))
    return Decision(tuple(changes), answer=msg, drive=(act_id,), host=foreground)


def enqueue_ready(
    ev: CallEvent,
    tool: RegistryEntry,
    session: Session,
    act: Activation,
    *,
    send_now: bool,
    now: int,
) -> Decision:
    """A call for a ready session: `delivered` at once when the session is idle (the commit
    that says so precedes the send: at most once), else queued behind the others. The
    caller waits for the final answer."""
    sid = session.app_session_id
    row = _new_call(
        ev,
        tool,
        now,
        session=sid,
        activation=act.activation_id,
        seq=session.next_seq,
        state="delivered" if send_now else "queued",
    )
    if send_now:
        return Decision((row,), deliver=ev.call_id)
    return Decision((row,), kick=(sid,))


def accept_call(
    ev: CallEvent,
    tool: RegistryEntry,
    session: Session | None,
    act: Activation | None,
    *,
    app_version: str,
    idle: bool,
    ids: NewIds,
    now: int,
    timeout_ms: int,
) -> Decision:
    """Route an SDK-delivered call (SPEC 5.2): deliver now, queue, start an activation, or
    answer `app_not_running`.

    `idle`: the session's pump is not sending and its worker is up, with this method
    pinned as SDK-delivered (a call may then be sent right after its commit).
    """
    if tool.activation == "activation_not_required":
        if session is None or act is None or act.state != "ready":
            why = f"{tool.scope} is not running in this conversation"
            return answer_error(ev, tool, "app_not_running", why, now)
        return enqueue_ready(ev, tool, session, act, send_now=idle, now=now)
    needs_fg = tool.activation == "foreground_required"
    if (
        session is not None
        and act is not None
        and act.state == "ready"
        and (not needs_fg or act.foreground)
    ):
        return enqueue_ready(ev, tool, session, act, send_now=idle, now=now)
    if session is not None and act is not None and act.state == "starting":  # join its queue
        act_id = act.activation_id
        # a foreground call raises the starting activation's bar: the Host must show it
        raise_bar = needs_fg and not act.requires_foreground
        changes: list[Change] = []
        if raise_bar:
            changes.append(ActivationUpdate(act_id, requires_foreground=True))
        changes.append(
            _new_call(
                ev,
                tool,
                now,
                session=session.app_session_id,
                activation=act_id,
                seq=session.next_seq,
            )
        )
        msg = make_message(ev.call_id, tool.scope, "accepted", now, activation="queued")
        changes.append(NewReceipt(msg))
        if raise_bar:
            changes.append(show_surface(act_id, ev.conversation_id, tool.scope))
        return Decision(
            tuple(changes), answer=msg, drive=(act_id,) if raise_bar else (), host=raise_bar
        )
    return accept_starting(
        ev,
        tool,
        session,
        app_version,
        foreground=needs_fg,
        ids=ids,
        now=now,
        timeout_ms=timeout_ms,
    )


# -- UI Actions (SPEC 17) -------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ActionEvent:
    """A UI Action that passed the envelope checks: `params` is canonical JSON text,
    `fingerprint` the SHA-256 of the canonical JSON of its name and params."""

    conversation_id: str
    scope: str
    name: str
    params: str
    fingerprint: str
    client_id: str
    client_seq: int

    @property
    def action_id(self) -> str:
        return f"{self.client_id}:{self.client_seq}"


@dataclass(frozen=True, slots=True)
class ActionFacts:
    """What a UI Action's acceptance reads, inside the savepoint that applies it: the
    conversation's App session for the scope and its current activation, the client's mark
    there (0: none), its stored action at `client_seq` when that is at or below the mark,
    the action as the session's version declares it (the current version's when there is
    no session; None: not declared) and its params' problems against that declaration."""

    session: Session | None
    act: Activation | None
    mark: int
    existing: Action | None
    entry: ActionEntry | None
    problems: Checked | None = None


def _reject_action(code: str, message: str, **kw: Any) -> Decision:
    """A rejection before acceptance: persists nothing, uses no seq."""
    return Decision(extra={"error": error_body(code, message, **kw)})


def decide_action(ev: ActionEvent, facts: ActionFacts, now: int) -> Decision:
    """A UI Action's acceptance (SPEC 17): `extra["error"]` for a rejection before
    acceptance (nothing persisted), `extra["replay"]` (the stored `Action`) for a seq the
    client used before with the same name and params, else the accepted action persisted
    in one transaction — its row with the session's next `seq`, the client's mark — and
    `extra["accepted"]` (its `(app_session_id, seq)`), its session kicked when ready."""
    session, act = facts.session, facts.act
    if session is None:
        if facts.entry is None:
            return _reject_action("unknown_action", f"no app declares the action {ev.name!r}")
        return _reject_action("app_not_running", f"{ev.scope} is not running in this conversation")
    if ev.client_seq <= facts.mark:
        existing = facts.existing
        assert existing is not None, "a mark covers every seq below it"
        if existing.fingerprint != ev.fingerprint:
            return _reject_action(
                "action_id_conflict",
                f"action {ev.action_id!r} was already used with another name or params",
            )
        return Decision(extra={"replay": existing})
    if ev.client_seq > facts.mark + 1:
        return _reject_action(
            "action_out_of_order",
            f"client {ev.client_id!r} sent seq {ev.client_seq}; the next is {facts.mark + 1}",
            details={"expected_seq": facts.mark + 1},
        )
    entry = facts.entry
    if entry is None:
        return _reject_action(
            "unknown_action", f"{ev.scope} {session.version} declares no action {ev.name!r}"
        )
    problems = facts.problems
    if isinstance(problems, Unchecked):
        message = (
            f"params of {ev.name} could not be validated within the "
            f"{problems.budget_s:g} s validation budget"
        )
        return _reject_action("invalid_params", message, details=problems.details())
    if problems:
        message, details = schema_rejection(ev.name, problems)
        return _reject_action("invalid_params", message, details=details)
    if act is None or act.state not in ("starting", "ready"):
        return _reject_action("app_not_running", f"{ev.scope} is not running in this conversation")
    sid = session.app_session_id
    row = NewAction(
        sid,
        session.next_seq,
        ev.client_id,
        ev.client_seq,
        entry.name,
        ev.params,
        ev.fingerprint,
        act.activation_id,
        now,
    )
    # queued behind whatever is ahead; a starting activation kicks its session when ready
    return Decision(
        (row,),
        kick=(sid,) if act.state == "ready" else (),
        extra={"accepted": (sid, session.next_seq)},
    )


# -- activations ----------------------------------------------------------------------------
def advance_activation(
    act: Activation,
    trigger: Call | None,
    *,
    now: int,
    worker_up: bool = False,
    confirmed: bool = False,
    on_ready: Callable[[Call], Sequence[Change]] | None = None,
) -> Decision | None:
    """A starting activation's worker came up and/or the Host confirmed the foreground:
    commit that, and `ready` once both conditions hold (the trigger gets
    `activation_ready`, or what its runtime handler's `on_ready` decides). None when
    nothing changes (the activation is no longer starting)."""
    if act.state != "starting":
        return None
    worker_ready = act.worker_ready or worker_up
    foreground = act.foreground or confirmed
    ready = worker_ready and (not act.requires_foreground or foreground)
    update = ActivationUpdate(
        act.activation_id,
        state="ready" if ready else None,
        ended_ms=now if ready else None,
        worker_ready=True if worker_up and not act.worker_ready else None,
        foreground=True if confirmed and not act.foreground else None,
    )
    if update == ActivationUpdate(act.activation_id):
        return None
    if not ready:
        return Decision((update,))
    changes: list[Change] = [update]
    if trigger is not None and trigger.state == "queued":
        if on_ready is not None:
            changes.extend(on_ready(trigger))
        else:
            changes.append(
                NewReceipt(make_message(trigger.call_id, trigger.scope, "activation_ready", now))
            )
    return Decision(tuple(changes), kick=(act.app_session_id,))


def end_activation(
    act: Activation,
    waiting: Sequence[Call],
    tools: Mapping[str, RegistryEntry],
    state: str,
    reason: str,
    *,
    now: int,
    cause: str | None = None,
    progress: bool = True,
    actions: Sequence[Action] = (),
) -> Decision | None:
    """Fail or cancel a starting activation: each waiting call (and UI Action, SPEC 17)
    gets its one answer, its Host intents are superseded. None (writing nothing) when it
    already left `starting`.

    `cause` is the stable code behind a failure (say `install_tampered`), given to the
    waiting calls in their error details. `progress`: the trigger also gets the
    `activation_failed`/`activation_cancelled` receipt (not when the activation had been
    ready: its trigger was told `activation_ready` already).
    """
    if act.state != "starting":
        return None
    act_id = act.activation_id
    stage = "activation_failed" if state == "failed" else "activation_cancelled"
    changes: list[Change] = [
        ActivationUpdate(act_id, state=state, reason=reason, ended_ms=now),
        SupersedeIntents(act_id),
    ]
    for call in waiting:
        tool = tools.get(call.method)
        if progress and call.call_id == act.trigger_call_id:
            changes.append(
                NewReceipt(make_message(call.call_id, call.scope, stage, now, reason=reason))
            )
        if tool is not None and tool.delivery == "runtime" and tool.long_running:
            final = make_message(
                call.call_id,
                call.scope,
                "result",
                now,
                result={"status": "not_started", "reason": reason},
            )
        else:
            final = make_message(
                call.call_id,
                call.scope,
                "error",
                now,
                error=error_body(
                    stage,
                    f"the app's activation was {state} ({reason}); the call did not run",
                    details={"reason": reason, **({"cause": cause} if cause else {})},
                ),
            )
        changes.append(NewReceipt(final))
    for action in actions:
        error = error_body(
            stage,
            f"the app's activation was {state} ({reason}); the action did not run",
            details={"reason": reason, **({"cause": cause} if cause else {})},
        )
        changes.append(_action_done(action, now, error=error))
    return Decision(tuple(changes), stop=(act_id,))


def worker_lost(
    act: Activation,
    waiting: Sequence[Call],
    tools: Mapping[str, RegistryEntry],
    *,
    now: int,
    actions: Sequence[Action] = (),
) -> Decision | None:
    """A ready session's app cannot run any more: re-open its gate and fail it
    (`worker_failed`); every queued call and UI Action gets its error."""
    if act.state != "ready":
        return None
    reopened = Activation(
        act.activation_id,
        act.app_session_id,
        act.trigger_call_id,
        "starting",
        act.requires_foreground,
        act.worker_ready,
        act.foreground,
        act.deadline_ms,
    )
    ended = end_activation(
        reopened,
        waiting,
        tools,
        "failed",
        "worker_failed",
        now=now,
        progress=False,
        actions=actions,
    )
    assert ended is not None
    return Decision((ReopenActivation(act.activation_id), *ended.changes), stop=ended.stop)


def host_event_action(
    act: Activation | None, session: Session | None, event: str, conversation_id: str, scope: str
) -> str | None:
    """What a Host lifecycle event does: `confirm`, `fail`, `leave`, or None (ignored: a
    stale or foreign instance, or loading, which is never confirmation).

    Raises:
        LineupError: `scenario_invalid` for an unknown event.
    """
    if act is None or session is None:
        return None
    if session.conversation_id != conversation_id or session.scope != scope:
        return None
    if event in ("preload", "surface_loaded") or act.state != "starting":
        return None
    actions = {"foreground_confirmed": "confirm", "activation_failed": "fail", "user_left": "leave"}
    if event not in actions:
        raise LineupError("scenario_invalid", f"unknown Host event {event!r}")
    return actions[event]


# -- delivery -------------------------------------------------------------------------------
def interrupt_delivery(call: Call, now: int) -> Decision:
    """A call left `delivered` with nobody sending it ends `delivery_interrupted` (at most
    once: it is never delivered again)."""
    return _final(
        call,
        now,
        error=error_body(
            "delivery_interrupted",
            f"{call.method} was delivered but the runtime stopped before it answered",
        ),
    )


def next_delivery(
    head: tuple[Call | Action, str] | None,
    tool: RegistryEntry | None,
    now: int,
    *,
    action: ActionEntry | None = None,
    problems: Checked | None = None,
) -> Decision | None:
    """The session's next step: mark its oldest queued call or UI Action `delivered` (then
    send it), answer a call `handler_failed` when its version does not serve it (an action
    `unknown_action` when its version no longer declares it, `invalid_params` when its
    params no longer validate: `action` and `problems`, SPEC 17), or None when the queue is
    empty or its head waits on an activation."""
    if head is None or head[1] != "ready":
        return None
    item = head[0]
    if isinstance(item, Action):
        return _next_action(item, action, problems, now)
    call = item
    if tool is None or tool.delivery != "miniapp_sdk":
        return _final(
            call,
            now,
            error=error_body("handler_failed", f"{call.method} is not served by this app version"),
        )
    return Decision((CallState(call.call_id, "queued", "delivered"),), deliver=call.call_id)


def _next_action(
    item: Action, entry: ActionEntry | None, problems: Checked | None, now: int
) -> Decision:
    if entry is None:
        error = error_body(
            "unknown_action", f"this app version does not declare the action {item.name!r}"
        )
        return Decision((_action_done(item, now, error=error),))
    if isinstance(problems, Unchecked):
        message = (
            f"params of {item.name} could not be validated within the "
            f"{problems.budget_s:g} s validation budget"
        )
        error = error_body("invalid_params", message, details=problems.details())
        return Decision((_action_done(item, now, error=error),))
    if problems:
        message, details = schema_rejection(item.name, problems)
        error = error_body("invalid_params", message, details=details)
        return Decision((_action_done(item, now, error=error),))
    change = ActionState(item.app_session_id, item.seq, "queued", "delivered")
    return Decision((change,), deliver=item.action_id)


def _action_done(
    action: Action,
    now: int,
    *,
    error: ErrorBody | None = None,
    result: Any = None,
    revision: int | None = None,
) -> ActionDone:
    """A UI Action's one outcome (an error carries no revision: nothing was applied)."""
    outcome = {"error": error} if error is not None else {"result": result}
    text = json.dumps(outcome, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return ActionDone(
        action.app_session_id,
        action.seq,
        action.action_id,
        text,
        revision if error is None else None,
        now,
    )


def answer_action(
    action: Action,
    entry: ActionEntry,
    *,
    now: int,
    committed: int,
    pending: PendingData | None = None,
    reply: Mapping[str, Any] | None = None,
    result_problems: Checked | None = None,
    timed_out: bool = False,
    worker_error: tuple[str, str] | None = None,
    worker_reason: str | None = None,
) -> Decision:
    """The one outcome of a delivered UI Action (SPEC 17), decided as a call's final is
    (`answer_delivery`): its result commits the session data its handler wrote (`pending`,
    held by the delivery) in the same decision, as one revision, and carries the revision
    after it (`committed`, the stored one, when it wrote nothing); an error (`app.<code>`
    for a `ToolError`, `handler_timeout`, …) drops what it wrote: nothing applied."""
    stage, payload = _delivery_outcome(
        entry.name,
        entry.timeout_s,
        reply=reply,
        result_problems=result_problems,
        timed_out=timed_out,
        worker_error=worker_error,
        worker_reason=worker_reason,
    )
    if stage != "result":
        return Decision((_action_done(action, now, error=payload),))
    if pending is None:
        return Decision((_action_done(action, now, result=payload, revision=committed),))
    written = commit_pending(pending, committed)
    if written is None:
        error = error_body(
            "handler_failed",
            f"{entry.name}: the session data changed under the delivery (revision "
            f"{committed}, the delivery started at {pending.base}); nothing it wrote was "
            "applied",
        )
        return Decision((_action_done(action, now, error=error),))
    done = _action_done(action, now, result=payload, revision=pending.revision)
    return Decision((*written, done))


def interrupt_action(action: Action, now: int, *, why: str | None = None) -> Decision:
    """A UI Action left `delivered` with nobody sending it ends `delivery_interrupted`
    (at most once, nothing applied)."""
    message = why or f"{action.name} was delivered but the runtime stopped before it answered"
    return Decision((_action_done(action, now, error=error_body("delivery_interrupted", message)),))


def answer_delivery(
    call: Call,
    tool: RegistryEntry,
    *,
    now: int,
    reply: Mapping[str, Any] | None = None,
    result_problems: Checked | None = None,
    timed_out: bool = False,
    worker_error: tuple[str, str] | None = None,
    worker_reason: str | None = None,
    pending: PendingData | None = None,
    committed: int | None = None,
) -> Decision:
    """The one final answer of a delivered call: its result, the handler's error, a
    timeout, or the worker's failure (`(kind, message)`, with the `details.reason` where
    one is known: `memory_limit`, `cpu_limit`, `worker_lost`).

    `pending` is the session data its handler wrote (held by the delivery, SPEC 17) and
    `committed` the revision stored now: a result writes the pending snapshot in the same
    decision as the final, as one revision; any other answer drops it (nothing applied)."""
    decision = _answer(
        call, tool, now, reply, result_problems, timed_out, worker_error, worker_reason
    )
    if pending is None or not any(m["stage"] == "result" for m in decision.finals):
        return decision
    assert committed is not None
    written = commit_pending(pending, committed)
    if written is None:
        return _final(
            call,
            now,
            error=error_body(
                "handler_failed",
                f"{tool.method}: the session data changed under the delivery "
                f"(revision {committed}, the delivery started at {pending.base}); "
                "nothing it wrote was applied",
            ),
        )
    return Decision((*written, *decision.changes))


def _answer(
    call: Call,
    tool: RegistryEntry,
    now: int,
    reply: Mapping[str, Any] | None,
    result_problems: Checked | None,
    timed_out: bool,
    worker_error: tuple[str, str] | None,
    worker_reason: str | None,
) -> Decision:
    stage, payload = _delivery_outcome(
        tool.method,
        tool.timeout_s,
        reply=reply,
        result_problems=result_problems,
        timed_out=timed_out,
        worker_error=worker_error,
        worker_reason=worker_reason,
    )
    if stage == "result":
        return _final(call, now, result=payload, stage="result")
    return _final(call, now, error=payload)


def _delivery_outcome(
    method: str,
    timeout_s: float,
    *,
    reply: Mapping[str, Any] | None,
    result_problems: Checked | None,
    timed_out: bool,
    worker_error: tuple[str, str] | None,
    worker_reason: str | None,
) -> tuple[str, Any]:
    """What a delivery's end answers: `("result", value)` or `("error", body)`."""
    if timed_out:
        return "error", error_body(
            "handler_timeout", f"{method} did not answer within {timeout_s:g} s"
        )
    if worker_error is not None:
        kind, text = worker_error
        code = "worker_protocol_error" if kind == "protocol" else "delivery_interrupted"
        details = {"reason": worker_reason} if worker_reason else None
        return "error", error_body(code, f"{method}: {text}", details=details)
    assert reply is not None
    if reply.get("ok"):
        if isinstance(result_problems, Unchecked):
            return "error", error_body(
                "handler_result_invalid",
                f"{method} returned a result that could not be validated within the "
                f"{result_problems.budget_s:g} s validation budget",
                details=result_problems.details(),
            )
        if result_problems:
            return "error", error_body(
                "handler_result_invalid",
                f"{method} returned a result that does not match its result schema",
                details=result_problems,
            )
        return "result", reply.get("result")
    err = reply.get("error") if isinstance(reply.get("error"), dict) else {}
    assert isinstance(err, dict)
    code = str(err.get("code", "handler_failed"))
    if not (code.startswith("app.") or code in _HANDLER_CODES or code.startswith("session_data_")):
        code = "handler_failed"
    return "error", error_body(code, str(err.get("message", ""))[:2000], details=err.get("details"))


def _final(
    call: Call,
    now: int,
    *,
    error: ErrorBody | None = None,
    result: Any = None,
    stage: str = "error",
) -> Decision:
    msg = make_message(call.call_id, call.scope, stage, now, result=result, error=error)
    return Decision((NewReceipt(msg),))


# -- dev builds -----------------------------------------------------------------------------
def move_dev_sessions(
    sessions: Sequence[Session],
    delivered: Mapping[str, Sequence[Call | Action]],
    dev_builds: set[str],
    to_version: str,
    now: int,
) -> Decision | None:
    """`lineup dev` rebuilt: every session pinned to an older dev build of the scope moves
    to `to_version` (the one exception to pinning, SPEC 14); a call delivered to the old
    build ends `delivery_interrupted` (at most once); session data stays as it is. None
    when no session needs to move."""
    changes: list[Change] = []
    kick: list[str] = []
    for session in sessions:
        if session.version == to_version or session.version not in dev_builds:
            continue
        changes.append(MoveSession(session.app_session_id, session.version, to_version))
        for call in delivered.get(session.app_session_id, ()):
            if isinstance(call, Action):
                why = (
                    f"{call.name} was delivered to a dev build that was replaced before it answered"
                )
                changes.extend(interrupt_action(call, now, why=why).changes)
                continue
            changes.extend(
                _final(
                    call,
                    now,
                    error=error_body(
                        "delivery_interrupted",
                        f"{call.method} was delivered to a dev build that was replaced "
                        "before it answered",
                    ),
                ).changes
            )
        kick.append(session.app_session_id)
    if not changes:
        return None
    return Decision(tuple(changes), kick=tuple(kick))


# -- session data ---------------------------------------------------------------------------
def hold_replace(
    held: PendingData | None,
    committed: int,
    scope: str,
    app_session_id: str,
    data: Any,
    expected_revision: Any,
) -> PendingData:
    """A handler's CAS replace inside its delivery (SPEC 5.5, 17): checked against the
    snapshot the delivery holds (`held`), or the `committed` revision before its first
    write; the new pending snapshot, revision base + 1 for the first write and every later
    one (replaced in place). Nothing is written: `commit_pending` does, with the answer.

    Raises:
        LineupError: `session_data_invalid`, `session_data_too_large`,
            `session_data_revision_conflict`.
    """
    blob = session_data_blob(data, expected_revision)
    current = held.revision if held is not None else committed
    if current != expected_revision:
        raise LineupError(
            "session_data_revision_conflict",
            f"session data is at revision {current}, not {expected_revision}",
        )
    base = held.base if held is not None else committed
    return PendingData(scope, app_session_id, base, blob)


def commit_pending(pending: PendingData, committed: int) -> tuple[Change, ...] | None:
    """The change that writes a delivery's pending snapshot with its answer, as revision
    base + 1; None when the stored revision is no longer the delivery's base (deliveries of
    one App session are serial, so this is a defence: the delivery then applies nothing)."""
    if committed != pending.base:
        return None
    text = pending.data.decode("utf-8")
    return (ReplaceSessionData(pending.scope, pending.app_session_id, pending.base, text),)


# -- the Host relay -------------------------------------------------------------------------
def supersede_ended(heads: Sequence[Intent]) -> Decision | None:
    """Head intents whose activation has ended are superseded, never delivered."""
    ended = [h.instance for h in heads if h.activation_state in ("failed", "cancelled")]
    if not ended:
        return None
    return Decision(tuple(SupersedeIntents(i) for i in ended))


def intent_delivered(intent: Intent) -> Decision:
    """The Host acted on an intent: it is not sent again."""
    return Decision((IntentDelivered(intent.id),))
