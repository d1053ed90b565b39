"""The runtime-delivered Pomodoro handlers `pomodoro.start` and `pomodoro.interrupt`
(SPEC 5.4): foreground confirmation starts the focus; deadlines live in the database.

The transitions (`start`, `focus_started`, `interrupt`, `end_focus`) are pure; the handler
reads facts through the `Facts` port and plugs into the core by catalog key (`HANDLERS`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from lineup_runtime_lite.core.activations import end_activation
from lineup_runtime_lite.core.calls import (
    CallEvent,
    NewIds,
    accept_starting,
    answer_error,
    answer_now,
)
from lineup_runtime_lite.core.decisions import (
    CallState,
    Change,
    Decision,
    EndOperation,
    NewIMRecord,
    NewOperation,
    NewReceipt,
)
from lineup_runtime_lite.core.handlers import CatalogHandler, HandlerContext
from lineup_runtime_lite.core.messages import make_message
from lineup_runtime_lite.core.port import Facts
from lineup_runtime_lite.core.rows import Activation, Call, Operation, RegistryEntry, Session
from lineup_runtime_lite.core.timestamps import format_ts

__all__ = [
    "HANDLERS",
    "IMPLEMENTED_KEYS",
    "Pomodoro",
    "end_focus",
    "focus_started",
    "interrupt",
    "start",
]

#: The catalog keys this runtime implements (a test compares them with the catalog).
IMPLEMENTED_KEYS = frozenset({"pomodoro.start", "pomodoro.interrupt"})


# -- transitions (pure) ---------------------------------------------------------------------
def start(
    ev: CallEvent,
    tool: RegistryEntry,
    session: Session | None,
    app_version: str,
    *,
    already_active: bool,
    ids: NewIds,
    now: int,
    timeout_ms: int,
) -> Decision:
    """`pomodoro.start`: one starting or focusing Pomodoro per conversation; the Host must
    show it before the focus starts."""
    if already_active:
        why = "a Pomodoro is already starting or focusing in this conversation"
        return answer_error(ev, tool, "pomodoro_already_active", why, now)
    return accept_starting(
        ev, tool, session, app_version, foreground=True, ids=ids, now=now, timeout_ms=timeout_ms
    )


def focus_started(call: Call, now: int, operation_id: str) -> tuple[Change, ...]:
    """Foreground confirmed: the focusing operation exists and the call says `started`."""
    minutes = int(json.loads(call.params).get("minutes", 25))
    ends = now + minutes * 60_000
    assert call.app_session_id is not None
    msg = make_message(
        call.call_id,
        call.scope,
        "started",
        now,
        started_at=format_ts(now),
        ends_at=format_ts(ends),
    )
    return (
        NewOperation(
            operation_id,
            call.call_id,
            call.conversation_id,
            call.app_session_id,
            "pomodoro.focus",
            now,
            ends,
            call.params,
        ),
        CallState(call.call_id, "queued", "running"),
        NewReceipt(msg),
    )


def end_focus(op: Operation, state: str, ended_ms: int, scope: str) -> tuple[Change, ...]:
    """A focus ends (`completed` at its deadline or `interrupted`): its result and its
    immutable IM record. Guarded: the other terminal transition may have won."""
    params = json.loads(op.params)
    result = {
        "status": state,
        "operation_id": op.operation_id,
        "started_at": format_ts(op.started_ms),
        "ends_at": format_ts(op.ends_ms),
        "ended_at": format_ts(ended_ms),
    }
    im = {
        "kind": "pomodoro.focus",
        "status": state,
        "minutes": int(params.get("minutes", 25)),
        "label": params.get("label"),
        **{k: v for k, v in result.items() if k != "status"},
    }
    msg = make_message(op.call_id, scope, "result", ended_ms, result=result)
    return (
        EndOperation(op.operation_id, state, ended_ms),
        NewIMRecord(op.operation_id, op.conversation_id, im, ended_ms),
        NewReceipt(msg),
    )


def interrupt(
    ev: CallEvent,
    tool: RegistryEntry,
    *,
    starting: tuple[Activation, Sequence[Call], dict[str, RegistryEntry]] | None,
    focusing: Operation | None,
    now: int,
) -> Decision:
    """`pomodoro.interrupt`: cancel a starting Pomodoro or interrupt a focus in this
    conversation; never opens one. Answers `cancelled_starting`, `interrupted` or
    `nothing_running`."""
    changes: list[Change] = []
    stop: tuple[str, ...] = ()
    status = "nothing_running"
    if starting is not None:
        act, waiting, tools = starting
        ended = end_activation(act, waiting, tools, "cancelled", "interrupted", now=now)
        if ended is not None:
            changes.extend(ended.changes)
            stop = ended.stop
            status = "cancelled_starting"
    elif focusing is not None:
        changes.extend(end_focus(focusing, "interrupted", now, tool.scope))
        status = "interrupted"
    msg = make_message(ev.call_id, tool.scope, "result", now, result={"status": status})
    answered = answer_now(ev, tool, msg, now)
    return Decision((*changes, *answered.changes), answer=msg, stop=stop)


# -- the handler ----------------------------------------------------------------------------
class Pomodoro:
    """The Pomodoro as a runtime handler (`CatalogHandler`)."""

    def accept(
        self, facts: Facts, tool: RegistryEntry, ev: CallEvent, ctx: HandlerContext
    ) -> Decision:
        methods = ctx.methods_for(tool.scope, "pomodoro.start")
        if tool.handler_key == "pomodoro.start":
            session = facts.session(ev.conversation_id, tool.scope)
            version = session.version if session else facts.app_version(tool.scope)
            assert version is not None
            return start(
                ev,
                tool,
                session,
                version,
                already_active=facts.active_calls(ev.conversation_id, methods),
                ids=ctx.ids,
                now=ctx.now,
                timeout_ms=ctx.activation_timeout_ms,
            )
        if tool.handler_key == "pomodoro.interrupt":
            starting = None
            act_id = facts.starting_trigger(ev.conversation_id, methods)
            act = facts.activation(act_id) if act_id is not None else None
            if act is not None:
                session = facts.session_by_id(act.app_session_id)
                assert session is not None
                tools = dict(ctx.tools_of(session.scope, session.version))
                starting = (act, facts.waiting_calls(act.activation_id), tools)
            focusing = facts.focusing(ev.conversation_id) if starting is None else None
            return interrupt(ev, tool, starting=starting, focusing=focusing, now=ctx.now)
        raise AssertionError(f"unimplemented runtime handler {tool.handler_key}")

    def on_ready(
        self, tool: RegistryEntry, trigger: Call, now: int, ids: NewIds
    ) -> Sequence[Change]:
        return focus_started(trigger, now, ids.operation)

    def due(self, facts: Facts, now: int) -> list[Decision]:
        """Every focus whose deadline passed completes at its `ends_at`, once."""
        return [
            Decision(end_focus(op, "completed", op.ends_ms, scope))
            for op, scope in facts.due_operations(now)
        ]


_POMODORO = Pomodoro()

#: Catalog key -> handler: how the core finds the runtime handler of a tool.
HANDLERS: dict[str, CatalogHandler] = {key: _POMODORO for key in IMPLEMENTED_KEYS}
