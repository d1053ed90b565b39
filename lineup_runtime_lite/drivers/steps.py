"""The steps the engine and the drivers commit: each reads its facts inside its savepoint
and asks one pure transition. Plain functions over the `Facts` port, so the tests'
transition-level kit runs exactly what the engine and the drivers run."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from lineup_runtime_lite.core.activations import advance_activation, end_activation
from lineup_runtime_lite.core.activations import worker_lost as lost_worker_decision
from lineup_runtime_lite.core.calls import (
    CallEvent,
    CallFacts,
    NewIds,
    decide_call,
    needs_fresh_ids,
    screen_call,
)
from lineup_runtime_lite.core.decisions import Change, Decision
from lineup_runtime_lite.core.handlers import CatalogHandler, HandlerContext
from lineup_runtime_lite.core.messages import Checked
from lineup_runtime_lite.core.port import CallRead, Facts, ReadingStep
from lineup_runtime_lite.core.rows import Activation, Call, RegistryEntry, Session

__all__ = ["NO_IDS", "Step", "accept", "advance", "decided", "end", "worker_lost"]

Step = Callable[[Facts], Decision | None]
ToolsOf = Callable[[str, str], Mapping[str, RegistryEntry]]
#: Whether a call of `method` may be sent to `session` right after its commit (the
#: delivery driver's state; read inside the step's savepoint).
Idle = Callable[[Facts, Session, str], bool]

#: What a call routed to a ready session is given (it creates no session or activation).
NO_IDS = NewIds("", "", "")


def accept(
    ev: CallEvent,
    tool: RegistryEntry | None,
    problems: Checked | None,
    handlers: Mapping[str, CatalogHandler],
    *,
    now: int,
    timeout_ms: int,
    draw_ids: Callable[[], NewIds],
    idle: Idle,
    tools_of: ToolsOf,
    methods_for: Callable[[str, str], list[str]],
) -> Callable[[Facts], Decision]:
    """A call's acceptance: read its `CallFacts`, ask `calls.decide_call` (or, for
    a runtime-delivered tool that passes `calls.screen_call`, its handler).

    `tool` is the Registry's tool for the method and `problems` its input schema's
    findings (both computed before the step, off its savepoint); `draw_ids` is asked only
    when the decision may create a session, an activation or an operation.
    """

    def step(tx: Facts) -> Decision:
        if tool is None or tool.delivery == "runtime":
            existing, session, act = tx.call(ev.call_id), None, None
        else:  # the session read rides with the call's (one round trip on PostgreSQL)
            existing, session, act = tx.call_and_session(ev.call_id, ev.conversation_id, tool.scope)
        screened = screen_call(ev, CallFacts(existing, tool, problems), now)
        if screened is not None:
            return screened
        assert tool is not None
        if tool.delivery == "runtime":
            ctx = HandlerContext(now, draw_ids(), timeout_ms, tools_of, methods_for)
            return handlers[tool.handler_key or ""].accept(tx, tool, ev, ctx)
        ready = session is not None and act is not None and act.state == "ready"
        facts = CallFacts(
            None,
            tool,
            problems,
            session,
            act,
            app_version=tx.app_version(tool.scope) if session is None else None,
            # a UI Action queued or in flight keeps it off the fast path (SPEC 17), whichever
            # node accepted that action
            idle=ready
            and session is not None
            and not session.actions_ahead
            and idle(tx, session, tool.method),
        )
        ids = draw_ids() if needs_fresh_ids(tool, act) else NO_IDS
        return decide_call(ev, facts, ids=ids, now=now, timeout_ms=timeout_ms)

    if tool is None or tool.delivery == "runtime":
        return step
    return ReadingStep(step, CallRead(ev.call_id, ev.conversation_id, tool.scope))


def decided(decision: Decision) -> Step:
    """A step whose decision was made from facts read before it (its guards re-check)."""
    return lambda tx: decision


def _activation(
    tx: Facts, act_id: str, tools_of: ToolsOf
) -> tuple[Activation, Mapping[str, RegistryEntry]] | None:
    """The activation and the tools of its session's pinned version."""
    act = tx.activation(act_id)
    if act is None:
        return None
    session = tx.session_by_id(act.app_session_id)
    assert session is not None
    return act, tools_of(session.scope, session.version)


def advance(
    act_id: str,
    tools_of: ToolsOf,
    handlers: Mapping[str, CatalogHandler],
    *,
    now: int,
    operation_id: str,
    worker_up: bool = False,
    confirmed: bool = False,
) -> Step:
    """`activations.advance_activation`, with the trigger's runtime handler deciding what
    `ready` starts (a Pomodoro's focus) when its tool is runtime-delivered."""

    def step(tx: Facts) -> Decision | None:
        found = _activation(tx, act_id, tools_of)
        if found is None:
            return None
        act, tools = found
        trigger = tx.call(act.trigger_call_id)
        on_ready: Callable[[Call], Sequence[Change]] | None = None
        tool = tools.get(trigger.method) if trigger is not None else None
        handler = handlers.get(tool.handler_key or "") if tool is not None else None
        if tool is not None and tool.delivery == "runtime" and handler is not None:
            ids = NewIds("", "", operation_id)
            rt_tool, rt_handler = tool, handler

            def on_ready(call: Call) -> Sequence[Change]:
                return rt_handler.on_ready(rt_tool, call, now, ids)

        return advance_activation(
            act, trigger, now=now, worker_up=worker_up, confirmed=confirmed, on_ready=on_ready
        )

    return step


def end(
    act_id: str,
    tools_of: ToolsOf,
    state: str,
    reason: str,
    *,
    now: int,
    cause: str | None = None,
) -> Step:
    """`activations.end_activation` for a starting activation and the calls it holds."""

    def step(tx: Facts) -> Decision | None:
        found = _activation(tx, act_id, tools_of)
        if found is None:
            return None
        act, tools = found
        waiting = tx.waiting_calls(act_id)
        actions = tx.waiting_actions(act_id)
        return end_activation(
            act, waiting, tools, state, reason, now=now, cause=cause, actions=actions
        )

    return step


def worker_lost(act_id: str, tools_of: ToolsOf, *, now: int) -> Step:
    """`activations.worker_lost` for a ready activation whose app cannot run any more."""

    def step(tx: Facts) -> Decision | None:
        found = _activation(tx, act_id, tools_of)
        if found is None:
            return None
        act, tools = found
        return lost_worker_decision(
            act, tx.waiting_calls(act_id), tools, now=now, actions=tx.waiting_actions(act_id)
        )

    return step
