"""A UI Action's acceptance and the wait for its outcome (SPEC 17), on the engine's loop:
the action's facts read and `transitions.decide_action` asked inside one savepoint of a group
commit, then the caller waits — bounded — for the outcome the session's queue commits."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from lineup_runtime_lite.api.engine import Engine
from lineup_runtime_lite.api.input_checks import not_an_object
from lineup_runtime_lite.core.actions import ActionEvent, ActionFacts, decide_action
from lineup_runtime_lite.core.decisions import Decision
from lineup_runtime_lite.core.messages import ActionOutcome, ErrorBody
from lineup_runtime_lite.core.rows import Action
from lineup_runtime_lite.store.facts import Facts, LostRace
from lineup_runtime_lite.validation.checks import Checked, acheck_value
from lineup_sdk.errors import LineupError

__all__ = ["act"]


async def act(
    engine: Engine,
    ev: ActionEvent,
    params: Any,
    *,
    timeout: float | None,
    accepted: Callable[[], None] | None = None,
) -> ActionOutcome:
    """Accept one UI Action (or answer its replay) and wait for its outcome:
    `{action_id, result, revision}`, or the outcome's error raised.

    `params` is the strict-JSON value `ev.params` is the canonical text of;
    `accepted()` runs once the action is persisted (or found: a replay), before the
    wait for its outcome — never after a rejection before acceptance.

    Raises:
        LineupError: a rejection before acceptance (`unknown_action`, `invalid_params`,
            `app_not_running`, `action_out_of_order`, `action_id_conflict`: nothing
            persisted), the outcome's code, or `action_pending` when `timeout` ran out
            (the action stays queued).
    """
    conv, scope = ev.conversation_id, ev.scope
    now = engine.now()
    decision: Decision | None = None
    for _ in range(3):  # a session that moved meanwhile (a dev rebuild) decides again
        session, _act = engine.facts.session_and_activation(conv, scope)
        version = session.version if session is not None else engine.facts.app_version(scope)
        entry = engine.actions_of(scope, version).get(ev.name) if version else None
        problems: Checked | None = None
        if entry is not None:  # validated here, off the store's step (SPEC 16.4)
            if isinstance(params, dict):
                problems = await acheck_value(entry.input_schema, params, engine.validators, scope)
            else:
                problems = not_an_object(params)

        def step(
            tx: Facts,
            version: str | None = version,
            entry: Any = entry,
            problems: Checked | None = problems,
        ) -> Decision:
            found, act = tx.session_and_activation(conv, scope)
            now_version = found.version if found is not None else tx.app_version(scope)
            if now_version != version:
                raise LostRace()  # checked against another version: look again
            mark, existing = 0, None
            if found is not None:
                mark = tx.client_mark(found.app_session_id, ev.client_id)
                if ev.client_seq <= mark:
                    existing = tx.action(found.app_session_id, ev.client_id, ev.client_seq)
            facts = ActionFacts(found, act, mark, existing, entry, problems)
            return decide_action(ev, facts, now)

        decision = await engine.decide(step)
        if decision is not None:
            break
    if decision is None:
        raise LineupError(
            "store_unavailable",
            f"action {ev.action_id!r} kept losing races in the store; nothing was accepted",
            hint="send the same action again",
        )
    error = decision.extra.get("error")
    if error is not None:
        raise _raised(error)
    if accepted is not None:
        accepted()
    replay: Action | None = decision.extra.get("replay")
    if replay is not None:
        sid = replay.app_session_id
    else:
        sid, _seq = decision.extra["accepted"]
    if timeout is None:
        declared = engine.actions_of(scope, version).get(ev.name) if version else None
        timeout = engine.activation_timeout_ms / 1000 + (
            declared.timeout_s if declared is not None else 30.0
        )
    key = (sid, ev.action_id)
    out = engine.outcome_waiter(key)
    try:
        done = await asyncio.wait_for(asyncio.shield(out), timeout)
    except TimeoutError:
        pending = LineupError(
            "action_pending",
            f"action {ev.action_id!r} has no outcome yet after {timeout:g} s; it stays queued",
        )
        pending.action_id = ev.action_id  # type: ignore[attr-defined]
        raise pending from None
    finally:
        engine.drop_outcome_waiter(key, out)
    return _outcome_of(ev.action_id, done)


def _raised(error: ErrorBody) -> LineupError:
    """An outcome's (or a rejection's) error body as the exception `act` raises."""
    return LineupError(
        str(error["code"]),
        str(error.get("message", "")),
        hint=error.get("hint"),
        details=error.get("details"),
    )


def _outcome_of(action_id: str, done: Action) -> ActionOutcome:
    """A finished UI Action's outcome `{action_id, result, revision}`, or its error raised."""
    assert done.outcome is not None
    outcome = json.loads(done.outcome)
    if "error" in outcome:  # an accepted action's outcome: it names the action
        error = _raised(outcome["error"])
        error.action_id = action_id  # type: ignore[attr-defined]
        raise error
    # a result always stored the revision after it (`core.deliveries.action_done`); only
    # an error's is None
    assert done.revision is not None
    return {"action_id": action_id, "result": outcome["result"], "revision": done.revision}
