"""`AsyncRuntime` (issue 12): the primary API, on the caller's own loop — the same answers
as `Runtime` (a thin wrapper over it), and no thread hop for an asyncio caller."""

from __future__ import annotations

import asyncio
import gc
import threading
from pathlib import Path
from typing import Any

import pytest

from lineup_build.trust import TrustStore
from lineup_runtime_lite import AsyncRuntime, HostSimulator, Runtime, VirtualClock
from lineup_runtime_lite.internals import engine_of
from lineup_sdk.errors import LineupError

MIN = 60_000


def _shape(msg: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in msg.items() if k != "at"}


def _sequence_sync(rt: Runtime) -> list[Any]:
    out: list[Any] = [rt.call("a", "c", "probe.echo", {"text": "hi"})]
    rt.settle()
    out.append(rt.call("b", "c", "probe.append", {"item": "x"}))
    out.append(rt.call("b", "c", "probe.append", {"item": "x"}))  # replayed
    out.append(rt.call("b", "c", "probe.append", {"item": "y"}))  # call_id_conflict
    out.append(rt.call("z", "c", "nope.tool", {}))
    out.append(rt.call("v", "c", "probe.echo", {"text": 3}))  # invalid_params
    out.append(rt.call_record("b"))
    out.append(rt.surface("c", "probe").get())
    out.append([m["id"] for m in rt.outbox.fetch(100)])
    return out


async def _sequence_async(art: AsyncRuntime) -> list[Any]:
    out: list[Any] = [await art.call("a", "c", "probe.echo", {"text": "hi"})]
    await art.settle()
    out.append(await art.call("b", "c", "probe.append", {"item": "x"}))
    out.append(await art.call("b", "c", "probe.append", {"item": "x"}))
    out.append(await art.call("b", "c", "probe.append", {"item": "y"}))
    out.append(await art.call("z", "c", "nope.tool", {}))
    out.append(await art.call("v", "c", "probe.echo", {"text": 3}))
    out.append(await art.call_record("b"))
    out.append(await art.surface("c", "probe").get())
    out.append([m["id"] for m in await art.outbox.fetch(100)])
    return out


def _normalize(items: list[Any]) -> list[Any]:
    out = []
    for item in items:
        if isinstance(item, dict) and "messages" in item:
            item = {**item, "messages": [_shape(m) for m in item["messages"]]}
        elif isinstance(item, dict):
            item = _shape(item)
        out.append(item)
    return out


def test_the_same_answers_as_runtime(trust: TrustStore, probe_bundle: Path) -> None:
    with Runtime.open(":memory:", trust=trust, clock=VirtualClock()) as rt:
        rt.install(probe_bundle)
        sync = _sequence_sync(rt)

    async def go() -> list[Any]:
        async with await AsyncRuntime.open(":memory:", trust=trust, clock=VirtualClock()) as art:
            await art.install(probe_bundle)
            return await _sequence_async(art)

    assert _normalize(asyncio.run(go())) == _normalize(sync)
    codes = [m["error"]["code"] for m in sync[3:6]]
    assert codes == ["call_id_conflict", "unknown_method", "invalid_params"]


def test_an_asyncio_caller_pays_no_thread_hop(
    trust: TrustStore, probe_bundle: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ready-session call from an asyncio caller runs on that caller's thread: no
    executor, no `call_soon_threadsafe`, no other thread touching the engine."""

    async def go() -> tuple[list[str], set[int]]:
        art = await AsyncRuntime.open(":memory:", trust=trust, clock=VirtualClock())
        try:
            await art.install(probe_bundle)
            await art.call("w", "c", "probe.echo", {"text": "up"})
            await art.settle()
            await art.call("w2", "c", "probe.echo", {"text": "warm"})
            hops: list[str] = []
            loop = asyncio.get_running_loop()
            real_exec, real_threadsafe = loop.run_in_executor, loop.call_soon_threadsafe
            threads: set[int] = set()
            engine_call = engine_of(art).call

            async def spy(*a: Any, **k: Any) -> Any:
                threads.add(threading.get_ident())
                return await engine_call(*a, **k)

            def no_exec(*a: Any, **k: Any) -> Any:
                hops.append("run_in_executor")
                return real_exec(*a, **k)

            def no_threadsafe(*a: Any, **k: Any) -> Any:
                hops.append("call_soon_threadsafe")
                return real_threadsafe(*a, **k)

            monkeypatch.setattr(engine_of(art), "call", spy)
            monkeypatch.setattr(loop, "run_in_executor", no_exec)
            monkeypatch.setattr(loop, "call_soon_threadsafe", no_threadsafe)
            for i in range(20):
                msg = await art.call(f"x{i}", "c", "probe.echo", {"text": str(i)})
                assert msg["result"] == str(i)
            monkeypatch.undo()
            return hops, threads
        finally:
            await art.close()

    hops, threads = asyncio.run(go())
    assert hops == []
    assert threads == {threading.get_ident()}


def test_large_params_are_checked_off_the_loop(trust: TrustStore, probe_bundle: Path) -> None:
    async def go() -> tuple[str, list[int]]:
        art = await AsyncRuntime.open(":memory:", trust=trust, clock=VirtualClock())
        try:
            await art.install(probe_bundle)
            seen: list[int] = []
            prepare = art._prepare

            def spy(*a: Any) -> Any:
                seen.append(threading.get_ident())
                return prepare(*a)

            art._prepare = spy  # type: ignore[method-assign, assignment]
            msg = await art.call("big", "c", "probe.echo", {"text": "x" * 100_000})
            return msg["stage"], seen
        finally:
            await art.close()

    stage, seen = asyncio.run(go())
    assert stage == "accepted"
    assert seen and seen[0] != threading.get_ident()


def test_the_virtual_clock_fires_deadlines_after_settle(
    trust: TrustStore, tmp_path: Path, pomodoro_bundle: Path
) -> None:
    async def go() -> list[str]:
        clock = VirtualClock()
        host = HostSimulator(policy="auto")
        art = await AsyncRuntime.open(":memory:", trust=trust, clock=clock, host=host)
        try:
            await art.install(pomodoro_bundle)
            await art.call("s1", "c1", "pomodoro.start", {"minutes": 1})
            await art.settle()
            clock.advance(MIN)  # from the loop's own thread
            await art.settle()
            record = await art.call_record("s1")
            assert record is not None
            return [m["stage"] for m in record["messages"]]
        finally:
            await art.close()

    assert asyncio.run(go()) == ["accepted", "started", "result"]


def test_a_closed_async_runtime_refuses_calls(trust: TrustStore) -> None:
    async def go() -> str:
        art = await AsyncRuntime.open(":memory:", trust=trust)
        await art.close()
        await art.close()  # closing twice is fine
        try:
            await art.call("a", "c", "probe.echo", {"text": "x"})
        except LineupError as exc:
            return exc.code
        return "answered"

    assert asyncio.run(go()) == "usage_invalid"


def test_open_refuses_bad_options_with_usage_invalid(trust: TrustStore) -> None:
    async def go() -> str:
        try:
            await AsyncRuntime.open(":memory:", trust=trust, max_params_bytes=0)
        except LineupError as exc:
            return exc.code
        return "opened"

    assert asyncio.run(go()) == "usage_invalid"


def test_waiters_told_to_retry_leave_no_unretrieved_exception(trust: TrustStore) -> None:
    """`fail_waiters` (a node that lost its lease) tells every in-process waiter to retry; a
    waiter whose caller already went (it failed on its own) is not logged by asyncio as
    "Future exception was never retrieved", and one still waiting gets the error."""

    async def go() -> tuple[list[str], LineupError]:
        art = await AsyncRuntime.open(":memory:", trust=trust, clock=VirtualClock())
        logged: list[str] = []
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(lambda _loop, ctx: logged.append(str(ctx.get("message"))))
        try:
            engine = engine_of(art)
            gone = engine._wait_final("gone")
            waiting = engine._wait_final("waiting")
            engine.fail_waiters("stopped")
            del gone
            gc.collect()
            with pytest.raises(LineupError) as exc:
                await waiting
            return logged, exc.value
        finally:
            await art.close()

    logged, exc = asyncio.run(go())
    assert logged == []
    assert exc.code == "store_unavailable" and "retry" in (exc.hint or "")
