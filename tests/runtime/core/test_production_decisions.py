"""The test kit, the Hypothesis models (of the kit and of the runtime), the in-process
fixture replay (the production runtime
with an in-process worker) and the runtime itself run the production decision: change one
transition's answer (`app_not_running`, in `calls.accept_call`) and every one of
their checks fails (issue 23, "Tests that must exist"). Each suite runs in-process on a
small example set."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test

from lineup_runtime_lite.api.runtime import Runtime
from lineup_runtime_lite.core import calls
from lineup_runtime_lite.core.decisions import Decision
from lineup_runtime_lite.core.rows import Activation, RegistryEntry, Session
from tests.conformance.conformance_kit import FIXTURES, bundles, replay_in_process
from tests.runtime.api import engine_model_kit
from tests.runtime.core import transitions_model_kit


@pytest.fixture()
def rt(store_rt: Runtime) -> Runtime:
    """This module's runtimes (`rt`, `probe`, `pomo`) run on the chosen store engine."""
    return store_rt


__all__ = ["bundles"]

#: The fixture whose steps include a call answered `app_not_running`.
FIXTURE = next(p for p in FIXTURES if p.stem == "tis2_05_early_calls_queued")
#: Enough of the derandomized model to reach an `activation_not_required` call (25
#: examples of 10 steps do not: Hypothesis starts from its smallest programs).
SMALL = settings(
    max_examples=50,
    stateful_step_count=30,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@pytest.fixture()
def mutated(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """`accept_call` answers `handler_failed` where it answered `app_not_running`."""
    original = calls.accept_call

    def accept_call(
        ev: calls.CallEvent,
        tool: RegistryEntry,
        session: Session | None,
        act: Activation | None,
        **kw: Any,
    ) -> Decision:
        decision = original(ev, tool, session, act, **kw)
        if decision.answer is not None and decision.answer.get("error", {}).get("code") == (
            "app_not_running"
        ):
            return calls.answer_error(ev, tool, "handler_failed", "mutated", kw["now"])
        return decision

    monkeypatch.setattr(calls, "accept_call", accept_call)
    yield


def test_the_suites_pass_unmutated(bundles: dict[str, Path]) -> None:
    transitions_model_kit.a_call_for_an_app_not_running_is_answered_and_stored()
    run_state_machine_as_test(transitions_model_kit.Machine, settings=SMALL)
    run_state_machine_as_test(engine_model_kit.Machine, settings=SMALL)
    replay_in_process(FIXTURE, bundles)


@pytest.mark.usefixtures("mutated")
def test_the_kit_runs_the_production_decision() -> None:
    with pytest.raises(AssertionError):
        transitions_model_kit.a_call_for_an_app_not_running_is_answered_and_stored()


@pytest.mark.usefixtures("mutated")
def test_the_model_runs_the_production_decision() -> None:
    with pytest.raises(AssertionError):
        run_state_machine_as_test(transitions_model_kit.Machine, settings=SMALL)


@pytest.mark.usefixtures("mutated")
def test_the_engine_model_runs_the_production_decision() -> None:
    with pytest.raises(AssertionError):
        run_state_machine_as_test(engine_model_kit.Machine, settings=SMALL)


@pytest.mark.usefixtures("mutated")
def test_the_fixture_replay_runs_the_production_decision(
    bundles: dict[str, Path],
) -> None:
    with pytest.raises(AssertionError, match="app_not_running"):
        replay_in_process(FIXTURE, bundles)


@pytest.mark.store
@pytest.mark.usefixtures("mutated")
def test_the_engine_runs_the_production_decision(probe: Runtime) -> None:
    msg = probe.call("p1", "conv", "probe.peek", {})
    assert msg["error"]["code"] == "handler_failed"
