"""Validation cost (SPEC 13.3): a schema that is not plain is validated in a killable
validator process under a time budget per value, never on the runtime's loop, so another
app's calls complete while an exponential schema is being validated."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from lineup_build.schema_cost import schema_cost
from lineup_build.signing import SigningKey
from lineup_build.trust import TrustStore
from lineup_runtime_lite import AsyncRuntime, HostSimulator, Runtime
from lineup_runtime_lite.core.messages import AgentMessage
from lineup_runtime_lite.validation.checks import Unchecked, check_value
from lineup_runtime_lite.validation.pool import ValidatorPool
from tests.runtime.conftest import build_source_app
from tests.runtime.validation.validation_cost_kit import FAST, SLOW, exponential_defs


@pytest.fixture(scope="module")
def slow_bundle(tmp_path_factory: pytest.TempPathFactory, rt_key: SigningKey) -> Path:
    return build_source_app(tmp_path_factory.mktemp("slow") / "slow", "slow", SLOW, rt_key)


@pytest.fixture(scope="module")
def fast_bundle(tmp_path_factory: pytest.TempPathFactory, rt_key: SigningKey) -> Path:
    return build_source_app(tmp_path_factory.mktemp("fast") / "fast", "fast", FAST, rt_key)


def _final(record: dict[str, Any] | None) -> dict[str, Any]:
    assert record is not None
    final: dict[str, Any] = record["messages"][-1]
    return final


def _finals_order(outbox: Sequence[Mapping[str, Any]]) -> list[str]:
    return [m["call_id"] for m in outbox if m["kind"] in ("result", "error")]


def test_the_exponential_schema_is_not_plain_and_passes_the_static_bound() -> None:
    cost = schema_cost({"$defs": exponential_defs(), "$ref": "#/$defs/a0"})
    assert not cost.plain and cost.expensive and not cost.too_complex


def test_a_value_over_the_budget_is_unchecked_and_the_process_restarts() -> None:
    pool = ValidatorPool(budget_s=0.05)
    try:
        schema = {"$defs": exponential_defs(), "$ref": "#/$defs/a0"}
        assert check_value(schema, "x", pool) == Unchecked(0.05)
        # the killed process is replaced: the next value of a cheap non-plain schema passes
        small = {"$defs": exponential_defs(9), "$ref": "#/$defs/a0"}
        assert check_value(small, 7, pool) == []
        assert check_value(small, "x", pool) != []
    finally:
        pool.close()


def test_an_exponential_result_schema_answers_validation_budget_while_another_app_completes(
    trust: TrustStore, slow_bundle: Path, fast_bundle: Path
) -> None:
    async def go() -> tuple[dict[str, Any], dict[str, Any], list[str]]:
        art = await AsyncRuntime.open(
            ":memory:",
            trust=trust,
            host=HostSimulator(policy="auto"),
            validation_budget_s=2.0,
        )
        async with art:
            await art.install(slow_bundle)
            await art.install(fast_bundle)
            await art.call("w1", "c1", "slow.ping", {})  # both sessions ready first
            await art.call("w2", "c2", "fast.ping", {})
            await art.settle()
            # a call to a ready session may answer with its final: send both at once
            await asyncio.gather(
                art.call("slow-1", "c1", "slow.give", {}),
                art.call("fast-1", "c2", "fast.ping", {"n": 1}),
            )
            await art.settle()
            slow = _final(await art.call_record("slow-1"))
            fast = _final(await art.call_record("fast-1"))
            return slow, fast, _finals_order(await art.outbox.all())

    slow, fast, order = asyncio.run(go())
    assert fast["kind"] == "result" and fast["result"] == 2
    assert slow["error"]["code"] == "handler_result_invalid"
    assert slow["error"]["details"]["reason"] == "validation_budget"
    assert order.index("fast-1") < order.index("slow-1")  # never queued behind it


def test_an_exponential_input_schema_answers_validation_budget_while_another_app_completes(
    trust: TrustStore, slow_bundle: Path, fast_bundle: Path
) -> None:
    async def go() -> tuple[AgentMessage, dict[str, Any], bool]:
        art = await AsyncRuntime.open(
            ":memory:",
            trust=trust,
            host=HostSimulator(policy="auto"),
            validation_budget_s=2.0,
        )
        async with art:
            await art.install(slow_bundle)
            await art.install(fast_bundle)
            await art.call("w2", "c2", "fast.ping", {})
            await art.settle()
            slow_task = asyncio.ensure_future(art.call("slow-1", "c1", "slow.check", {"x": "s"}))
            await art.call("fast-1", "c2", "fast.ping", {"n": 1})
            await art.settle()
            fast = _final(await art.call_record("fast-1"))
            done_before = slow_task.done()
            return await slow_task, fast, done_before

    slow, fast, slow_done_first = asyncio.run(go())
    assert fast["kind"] == "result" and fast["result"] == 2
    assert not slow_done_first
    assert slow["error"]["code"] == "invalid_params"
    assert slow["error"]["details"] == {"reason": "validation_budget", "budget_s": 2.0}


def test_the_sync_runtime_checks_an_exponential_input_in_the_callers_thread(
    trust: TrustStore, slow_bundle: Path
) -> None:
    with Runtime.open(
        ":memory:", trust=trust, host=HostSimulator(policy="auto"), validation_budget_s=0.2
    ) as rt:
        rt.install(slow_bundle)
        msg = rt.call("s", "c", "slow.check", {"x": "s"})
        assert msg["error"]["code"] == "invalid_params"
        assert msg["error"]["details"]["reason"] == "validation_budget"
        ok = rt.call("t", "c", "slow.check", {"x": 5})  # a valid value is found valid
        assert ok["kind"] != "error"


def test_the_validation_budget_option_is_checked(trust: TrustStore) -> None:
    from lineup_sdk.errors import LineupError

    with pytest.raises(LineupError) as caught:
        Runtime.open(":memory:", trust=trust, validation_budget_s=0)
    assert caught.value.code == "usage_invalid"


def test_serve_answers_an_exponential_input_validation_budget_while_another_session_is_served(
    tmp_path: Path, trust: TrustStore, slow_bundle: Path, fast_bundle: Path
) -> None:
    import anyio

    from lineup_runtime_lite import VirtualClock
    from lineup_runtime_lite.serve import Bridge
    from tests.runtime.serve_kit import FAST, memory_session

    rt = Runtime.open(
        tmp_path / "rt.db",
        trust=trust,
        clock=VirtualClock(),
        host=HostSimulator(policy="auto"),
        validation_budget_s=2.0,
    )
    try:
        rt.install(slow_bundle)
        rt.install(fast_bundle)
        bridge = Bridge(rt, FAST)
        seen: dict[str, Any] = {}

        async def slow_client() -> None:
            async with memory_session(bridge) as s:
                seen["slow"] = await s.call_tool("slow.check", {"x": "s"})

        async def main() -> None:
            async with memory_session(bridge) as s2, anyio.create_task_group() as tg:
                await s2.call_tool("fast.ping", {"n": 0})  # its session ready first
                tg.start_soon(slow_client)
                await anyio.sleep(0)  # let the slow call be sent first
                assert len((await s2.list_tools()).tools) == 5
                res = await s2.call_tool("fast.ping", {"n": 1})
                seen["fast_done_first"] = "slow" not in seen
                assert res.structured_content == {"result": 2}

        anyio.run(main)
    finally:
        rt.close()
    assert seen["fast_done_first"]
    slow = seen["slow"]
    assert slow.is_error
    text = slow.content[0].text
    assert "invalid_params" in text and "validation_budget" in text


def test_install_refuses_an_existing_bundle_past_the_static_bound(tmp_path: Path) -> None:
    from lineup_sdk.errors import LineupError
    from tests.build import bundle_kit as kit
    from tests.build.schema_cost_kit import too_complex_bundle

    bundle = too_complex_bundle(tmp_path / "deep.lineup")
    with Runtime.open(":memory:", trust=kit.trust()) as rt:
        with pytest.raises(LineupError) as caught:
            rt.install(bundle)
        assert caught.value.code == "schema_too_complex"
        assert caught.value.hint
        assert rt.apps() == []
