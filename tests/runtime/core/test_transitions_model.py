"""A Hypothesis state machine over the production steps and transitions (the test kit: SQLite
`:memory:`, each step in its savepoint of a `Store.batch`) checked against a small
independent model of what every call's receipt stages, final answer, activation and
session-data revision should be.

Derandomized by default (tests/conftest.py; `LINEUP_HYPOTHESIS=random` randomizes), with
enough examples that a seeded bug in a transition is found on every run.
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings

from tests.runtime.core.transitions_model_kit import (
    TOOLS,
    Machine,
    a_call_for_an_app_not_running_is_answered_and_stored,
)
from tests.runtime.transition_kit import Kit, event

TestTransitions = Machine.TestCase
TestTransitions.settings = settings(
    max_examples=300,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def test_a_second_final_of_the_other_stage_is_refused() -> None:
    kit = Kit(TOOLS)
    kit.call(event("a1", "c1", "notes.add"))
    (act,) = kit.facts.activations_to_drive()
    kit.advance(act, worker_up=True)
    sid = kit.facts.session("c1", "notes").app_session_id  # type: ignore[union-attr]
    delivered = kit.deliver_next(sid)
    assert delivered is not None
    assert kit.interrupt(delivered) is not None  # recovery: delivery_interrupted
    late = kit.answer(delivered, reply={"ok": True, "result": 1})  # the reply arrives anyway
    assert late is None, [m["stage"] for m in kit.facts.messages("a1")]


def test_a_call_for_an_app_not_running_is_answered_and_stored() -> None:
    a_call_for_an_app_not_running_is_answered_and_stored()
