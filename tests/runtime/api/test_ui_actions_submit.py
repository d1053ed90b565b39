"""`Surface.asubmit` / `AsyncSurface.submit`: a UI Action's two answers (SPEC 17's bridge) —
accepted once persisted, then the outcome; a rejection before acceptance raised at once."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from lineup_build.signing import SigningKey
from lineup_runtime_lite import Runtime
from lineup_runtime_lite.core.messages import ActionAccepted, ActionOutcome
from lineup_sdk.errors import LineupError
from tests.runtime.conftest import APPS, build_app

pytestmark = pytest.mark.store


@pytest.fixture()
def rt(store_rt: Runtime) -> Runtime:
    """This module's runtimes (`rt`, `probe`, `pomo`) run on the chosen store engine."""
    return store_rt


@pytest.fixture(scope="session")
def queue_bundle(tmp_path_factory: pytest.TempPathFactory, rt_key: SigningKey) -> Path:
    return build_app(APPS / "queue", tmp_path_factory.mktemp("queue") / "queue", rt_key)


@pytest.fixture()
def q(rt: Runtime, queue_bundle: Path) -> Runtime:
    rt.install(queue_bundle)
    assert rt.call("up", "conv", "queue.read", {})["stage"] == "accepted"
    rt.settle()
    return rt


def test_submit_answers_accepted_then_the_outcome(q: Runtime) -> None:
    s = q.surface("conv", "queue")

    async def go() -> tuple[ActionAccepted, ActionOutcome]:
        accepted, outcome = await s.asubmit("queue.push", {"item": "a"}, client_id="c", seq=1)
        return accepted, await outcome

    accepted, outcome = asyncio.run(go())
    assert accepted == {"action_id": "c:1", "seq": 1}
    assert outcome["action_id"] == "c:1" and outcome["revision"] == 1
    assert s.get().data == {"items": ["a"]}


def test_submit_is_accepted_before_the_outcome_exists(q: Runtime) -> None:
    """An action that never answers (queue.hang) is still accepted: the first answer does
    not wait for the handler."""
    s = q.surface("conv", "queue")

    async def go() -> str:
        accepted, outcome = await s.asubmit("queue.hang", {}, client_id="c", seq=1)
        assert not outcome.done()  # type: ignore[attr-defined]
        with pytest.raises(LineupError) as exc:
            await outcome
        return f"{accepted['action_id']} {exc.value.code}"

    assert asyncio.run(go()) == "c:1 handler_timeout"


@pytest.mark.parametrize(
    ("name", "params", "seq", "code"),
    [
        ("queue.nope", {}, 1, "unknown_action"),
        ("queue.read", {}, 1, "unknown_action"),  # an Agent tool's name
        ("queue.push", {"item": 3}, 1, "invalid_params"),
        ("queue.push", {"item": "a"}, 2, "action_out_of_order"),
    ],
)
def test_a_rejection_before_acceptance_is_raised_by_submit(
    q: Runtime, name: str, params: dict[str, object], seq: int, code: str
) -> None:
    s = q.surface("conv", "queue")

    async def go() -> str:
        with pytest.raises(LineupError) as exc:
            await s.asubmit(name, params, client_id="c", seq=seq)
        return exc.value.code

    assert asyncio.run(go()) == code
    # nothing persisted, no seq used: seq 1 is still the next one
    assert s.act("queue.push", {"item": "b"}, client_id="c", seq=1)["action_id"] == "c:1"


def test_a_business_refusal_is_accepted_then_the_outcome_raises(q: Runtime) -> None:
    s = q.surface("conv", "queue")

    async def go() -> str:
        accepted, outcome = await s.asubmit("queue.refuse", {"item": "x"}, client_id="c", seq=1)
        assert accepted["seq"] == 1
        with pytest.raises(LineupError) as exc:
            await outcome
        return exc.value.code

    assert asyncio.run(go()) == "app.refused"
    assert s.get().data is None  # what it appended before refusing is not kept


def test_a_resend_is_accepted_again_and_answers_the_stored_outcome(q: Runtime) -> None:
    s = q.surface("conv", "queue")
    first = s.act("queue.push", {"item": "a"}, client_id="c", seq=1)

    async def go() -> tuple[ActionAccepted, ActionOutcome]:
        accepted, outcome = await s.asubmit("queue.push", {"item": "a"}, client_id="c", seq=1)
        return accepted, await outcome

    accepted, again = asyncio.run(go())
    assert accepted == {"action_id": "c:1", "seq": 1} and again == first
    assert s.get().data == {"items": ["a"]}


def test_the_blocking_submit_returns_once_accepted_with_a_future_outcome(q: Runtime) -> None:
    s = q.surface("conv", "queue")
    accepted, outcome = s.submit("queue.push", {"item": "a"}, client_id="c", seq=1)
    assert accepted == {"action_id": "c:1", "seq": 1}
    assert outcome.result(timeout=30)["revision"] == 1
    with pytest.raises(LineupError) as exc:
        s.submit("queue.push", {"item": "b"}, client_id="c", seq=3)
    assert exc.value.code == "action_out_of_order"
