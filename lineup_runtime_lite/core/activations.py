"""An activation's life, as pure functions (SPEC 5.2, 5.7): `advance_activation` (a Host
event moves a starting activation on), `end_activation` (failed or cancelled, and the
calls and UI Actions it held), `worker_lost` (a ready activation whose app cannot run any
more), `host_event_action` (what a Host event does); and the Host relay: `supersede_ended`,
`intent_delivered`. No IO, no clock reads, no randomness.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from lineup_runtime_lite.core.decisions import (
    ActivationUpdate,
    Change,
    Decision,
    IntentDelivered,
    NewReceipt,
    ReopenActivation,
    SupersedeIntents,
)
from lineup_runtime_lite.core.deliveries import action_done
from lineup_runtime_lite.core.messages import (
    error_body,
    make_message,
)
from lineup_runtime_lite.core.rows import (
    Action,
    Activation,
    Call,
    Intent,
    RegistryEntry,
    Session,
)
from lineup_sdk.errors import LineupError

__all__ = [
    "advance_activation",
    "end_activation",
    "host_event_action",
    "intent_delivered",
    "supersede_ended",
    "worker_lost",
]


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
        changes.append(action_done(action, now, error=error))
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
