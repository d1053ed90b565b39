"""An Agent call's acceptance, as pure functions (SPEC 5.2–5.3): `(facts, event, now, ids)
-> Decision`, reading the typed records a driver read inside the savepoint that applies the
decision. No IO, no clock reads, no randomness (`tests/runtime/test_runtime_shape.py`).

`decide_call` is the one acceptance decision (`screen_call`, then `accept_call`):
`retried_call`, `reject_call`, `answer_now`, `answer_error`, `accept_starting` (an
activation to start, `show_surface`), `enqueue_ready` (a ready one). The events and ids
they take: `CallEvent`, `CallFacts`, `NewIds` (`needs_fresh_ids` says when to draw them).
The other transitions: `actions` (UI Actions), `activations` (activations, Host events,
the Host relay), `deliveries` (deliveries, their outcomes, session data, dev builds); the
Pomodoro's own are in `pomodoro`.
"""

from __future__ import annotations

from dataclasses import dataclass

from lineup_runtime_lite.core.decisions import (
    ActivationUpdate,
    Change,
    Decision,
    NewActivation,
    NewCall,
    NewIntent,
    NewReceipt,
    NewSession,
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
    Activation,
    Call,
    RegistryEntry,
    Session,
)

__all__ = [
    "CallEvent",
    "CallFacts",
    "NewIds",
    "accept_call",
    "accept_starting",
    "answer_error",
    "answer_now",
    "decide_call",
    "enqueue_ready",
    "needs_fresh_ids",
    "reject_call",
    "retried_call",
    "screen_call",
    "show_surface",
]


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
