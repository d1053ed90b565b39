"""Deliveries, as pure functions (SPEC 5.5–5.7, 17): `next_delivery` (a queued call or UI
Action handed to its worker, recorded before the send), `answer_delivery` and
`answer_action` (the one outcome of each, committing the session data its handler wrote),
`interrupt_delivery` and `interrupt_action` (delivered, never answered: at most once),
`action_done` (a UI Action's outcome); session data: `hold_replace` (a handler's write, held
by its delivery) and `commit_pending` (written with the delivery's answer); and
`move_dev_sessions` (`lineup dev` rebuilt). No IO, no clock reads, no randomness.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from lineup_runtime_lite.core.decisions import (
    ActionDone,
    ActionState,
    CallState,
    Change,
    Decision,
    MoveSession,
    NewReceipt,
    ReplaceSessionData,
)
from lineup_runtime_lite.core.messages import (
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
    Call,
    PendingData,
    RegistryEntry,
    Session,
)
from lineup_sdk.context import session_data_blob
from lineup_sdk.errors import LineupError

__all__ = [
    "action_done",
    "answer_action",
    "answer_delivery",
    "commit_pending",
    "hold_replace",
    "interrupt_action",
    "interrupt_delivery",
    "move_dev_sessions",
    "next_delivery",
]


#: Error codes a handler may answer with as they are; anything else is `handler_failed`.
_HANDLER_CODES = ("handler_failed", "invalid_params", "handler_result_invalid")


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
        return Decision((action_done(item, now, error=error),))
    if isinstance(problems, Unchecked):
        message = (
            f"params of {item.name} could not be validated within the "
            f"{problems.budget_s:g} s validation budget"
        )
        error = error_body("invalid_params", message, details=problems.details())
        return Decision((action_done(item, now, error=error),))
    if problems:
        message, details = schema_rejection(item.name, problems)
        error = error_body("invalid_params", message, details=details)
        return Decision((action_done(item, now, error=error),))
    change = ActionState(item.app_session_id, item.seq, "queued", "delivered")
    return Decision((change,), deliver=item.action_id)


def action_done(
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
        return Decision((action_done(action, now, error=payload),))
    if pending is None:
        return Decision((action_done(action, now, result=payload, revision=committed),))
    written = commit_pending(pending, committed)
    if written is None:
        error = error_body(
            "handler_failed",
            f"{entry.name}: the session data changed under the delivery (revision "
            f"{committed}, the delivery started at {pending.base}); nothing it wrote was "
            "applied",
        )
        return Decision((action_done(action, now, error=error),))
    done = action_done(action, now, result=payload, revision=pending.revision)
    return Decision((*written, done))


def interrupt_action(action: Action, now: int, *, why: str | None = None) -> Decision:
    """A UI Action left `delivered` with nobody sending it ends `delivery_interrupted`
    (at most once, nothing applied)."""
    message = why or f"{action.name} was delivered but the runtime stopped before it answered"
    return Decision((action_done(action, now, error=error_body("delivery_interrupted", message)),))


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
