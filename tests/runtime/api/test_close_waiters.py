"""A caller waiting on a call's final answer when the runtime closes is answered, never left
hanging: `call_pending` (the call stays persisted, and the same call_id answers it once a
runtime is open on the database again), as a UI Action's waiter answers `action_pending`.

The call that waits is queued behind a handler that is still running (a session delivers
one call at a time): closing stops the worker, which ends the running one
`delivery_interrupted`, but the queued one was never delivered, so nothing answers it.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lineup_build.signing import SigningKey
from lineup_build.trust import TrustStore
from lineup_runtime_lite import AsyncRuntime, HostSimulator, Runtime, VirtualClock
from lineup_sdk.errors import LineupError
from tests.runtime.conftest import build_source_app

SLOW_APP = '''
import asyncio

from lineup_sdk import ToolContext, define_agent_tools

tools = define_agent_tools(app_scope="slow")


@tools.tool("slow.up", activation="app_ready")
async def up(ctx: ToolContext) -> int:
    """Answer at once."""
    return 1


@tools.tool("slow.wait", activation="app_ready", timeout_s=60)
async def wait(ctx: ToolContext) -> int:
    """Keep the session busy (a delivery in flight)."""
    await asyncio.sleep(60)
    return 2
'''


@pytest.fixture(scope="module")
def slow_bundle(tmp_path_factory: pytest.TempPathFactory, rt_key: SigningKey) -> Path:
    return build_source_app(tmp_path_factory.mktemp("slow"), "slow", SLOW_APP, rt_key)


def until(check: Callable[[], Any], what: str) -> Any:
    """Poll for an event (the bound only ends a broken test)."""
    end = time.monotonic() + 30
    while not (got := check()):
        assert time.monotonic() < end, f"never happened: {what}"
        time.sleep(0.01)
    return got


def test_a_call_waiting_on_its_final_when_the_runtime_closes_is_call_pending(
    tmp_path: Path, trust: TrustStore, slow_bundle: Path
) -> None:
    db = tmp_path / "rt.db"
    clock = VirtualClock()
    rt = Runtime.open(db, trust=trust, clock=clock, host=HostSimulator("manual"))
    rt.install(slow_bundle)
    assert rt.call("up", "conv", "slow.up", {})["stage"] == "accepted"
    rt.settle()
    box: dict[str, Any] = {}

    def call(call_id: str, method: str) -> None:
        try:
            box[call_id] = rt.call(call_id, "conv", method, {})
        except LineupError as exc:
            box[call_id] = exc

    busy = threading.Thread(target=call, args=("busy", "slow.wait"), daemon=True)
    busy.start()
    until(lambda: _calls(rt.store_dump()).get("busy") == "delivered", "the first delivered")
    queued = threading.Thread(target=call, args=("queued", "slow.up"), daemon=True)
    queued.start()
    until(lambda: _calls(rt.store_dump()).get("queued") == "queued", "the second call queued")
    rt.close()
    queued.join(30)
    busy.join(30)
    assert not queued.is_alive(), "call() hangs after close()"
    exc = box["queued"]
    assert isinstance(exc, LineupError) and exc.code == "call_pending", exc
    assert exc.details == {"call_id": "queued"}
    assert "queued" in exc.message and exc.hint
    # the running one was answered by the store: its worker was stopped
    assert box["busy"]["error"]["code"] == "delivery_interrupted"
    rt = Runtime.open(db, trust=trust, clock=clock, host=HostSimulator("manual"))
    try:  # it stayed queued: the same call_id answers it, delivered once
        again = rt.call("queued", "conv", "slow.up", {})
        if again["stage"] == "accepted":
            rt.settle()
            again = rt.call("queued", "conv", "slow.up", {})
        assert again["kind"] == "result" and again["result"] == 1, again
        assert _calls(rt.store_dump())["queued"] == "done"
    finally:
        rt.close()


def test_an_async_call_waiting_on_its_final_when_the_runtime_closes_is_call_pending(
    tmp_path: Path, trust: TrustStore, slow_bundle: Path
) -> None:
    async def go() -> BaseException | None:
        rt = await AsyncRuntime.open(
            tmp_path / "rt.db", trust=trust, clock=VirtualClock(), host=HostSimulator("manual")
        )
        await rt.install(slow_bundle)
        await rt.call("up", "conv", "slow.up", {})
        await rt.settle()
        busy = asyncio.ensure_future(rt.call("busy", "conv", "slow.wait", {}))
        while _calls(await rt.store_dump()).get("busy") != "delivered":
            await asyncio.sleep(0.01)
        queued = asyncio.ensure_future(rt.call("queued", "conv", "slow.up", {}))
        while _calls(await rt.store_dump()).get("queued") != "queued":
            await asyncio.sleep(0.01)
        await rt.close()
        done, _ = await asyncio.wait({queued, busy}, timeout=30)
        assert queued in done, "AsyncRuntime.call hangs after close()"
        return queued.exception()

    exc = asyncio.run(go())
    assert isinstance(exc, LineupError) and exc.code == "call_pending", exc


def _calls(dump: dict[str, list[tuple[Any, ...]]]) -> dict[str, str]:
    """Each call's state in a store dump (`calls`: call_id first, state tenth)."""
    return {str(row[0]): str(row[9]) for row in dump["calls"]}
