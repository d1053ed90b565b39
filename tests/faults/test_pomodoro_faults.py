"""Faults around a running Pomodoro: F10–F14 (durable deadlines, downtime, races, clock
jumps)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from lineup_build.trust import TrustStore
from lineup_runtime_lite import HostSimulator, Runtime, VirtualClock
from lineup_runtime_lite.api.clock import format_ts
from lineup_runtime_lite.store import faults
from lineup_runtime_lite.store.faults import FaultInjected
from tests.faults import invariants
from tests.faults.harness import Env, final, host_event, stages, wait_for

MIN = 60_000
START = {"call": ["s1", "c1", "pomodoro.start", {"minutes": 25, "label": "deep work"}]}
CONFIRM = {"host": ["foreground_confirmed", "c1", "pomodoro"]}


@pytest.fixture(autouse=True)
def _disarm() -> Iterator[None]:
    yield
    faults.disarm()


def one_result(rt: Runtime, call_id: str = "s1", conv: str = "c1") -> dict[str, object]:
    result = final(rt, call_id)["result"]
    assert isinstance(result, dict)
    assert len(rt.im_records(conv)) == (0 if result["status"] == "not_started" else 1)
    return result


@pytest.mark.store
def test_F10_crash_while_focusing_then_restart_before_the_deadline(env: Env) -> None:
    run = env.drive([START, {"settle": True}, CONFIRM, {"advance": 10 * MIN}, {"exit": True}])
    env.crashed_at(run, "exit")
    assert [x["applied"] for x in run.lines if x.get("kind") == "event"] == [True]
    clock = VirtualClock()
    with env.open(clock=clock) as rt:
        started = next(m for m in rt.outbox.all() if m["id"] == "s1:started")
        ends_at = started["ends_at"]
        assert rt.surface("c1", "pomodoro").operations()[0]["ends_at"] == ends_at  # not reset
        clock.advance(15 * MIN - 1)
        assert stages(rt, "s1") == ["accepted", "started"]
        clock.advance(1)
        result = one_result(rt)
        assert result["status"] == "completed" and result["ended_at"] == ends_at
        invariants.check(rt)
    with env.open() as rt:  # another restart fires nothing again
        rt.settle()
        assert stages(rt, "s1") == ["accepted", "started", "result"]
        assert len(rt.im_records("c1")) == 1


@pytest.mark.store
def test_F11_downtime_spans_the_deadline(env: Env) -> None:
    run = env.drive([START, {"settle": True}, CONFIRM, {"advance": 5 * MIN}])
    assert run.done
    later = env.saved_now() + 3 * 60 * MIN
    for _ in range(2):
        with env.open(clock=VirtualClock(later)) as rt:
            rt.settle()
            result = one_result(rt)
            assert result["status"] == "completed"
            assert result["ended_at"] == result["ends_at"]  # at ends_at, not at reopen
            assert stages(rt, "s1") == ["accepted", "started", "result"]
            invariants.check(rt)


@pytest.mark.store
def test_F12_interrupt_wins_when_the_deadline_commit_failed(
    pomo: Runtime, clock: VirtualClock
) -> None:
    rt = pomo
    rt.call("s1", "c1", "pomodoro.start", {"minutes": 25})
    rt.settle()
    assert host_event(rt, "foreground_confirmed", "c1", "pomodoro")
    faults.arm("commit.before")  # the deadline's commit fails: the focus is still running
    with pytest.raises(FaultInjected):
        clock.advance(26 * MIN)
    assert rt.call("i1", "c1", "pomodoro.interrupt", {})["result"] == {"status": "interrupted"}
    before = rt.store_dump()
    clock.advance(0)  # the deadline fires again and loses: it writes nothing
    after = rt.store_dump()
    invariants.assert_unchanged(before, after)
    assert one_result(rt)["status"] == "interrupted"
    invariants.check(rt)


@pytest.mark.store
def test_F12_deadline_wins_then_interrupt_finds_nothing(pomo: Runtime, clock: VirtualClock) -> None:
    rt = pomo
    rt.call("s1", "c1", "pomodoro.start", {"minutes": 25})
    rt.settle()
    host_event(rt, "foreground_confirmed", "c1", "pomodoro")
    clock.advance(25 * MIN)
    assert rt.call("i1", "c1", "pomodoro.interrupt", {})["result"] == {"status": "nothing_running"}
    assert one_result(rt)["status"] == "completed"
    invariants.check(rt)


@pytest.mark.store
def test_F12_interrupts_race_the_deadline(pomo: Runtime, clock: VirtualClock) -> None:
    rt = pomo
    convs = [f"c{n}" for n in range(10)]
    for conv in convs:
        rt.call(f"s-{conv}", conv, "pomodoro.start", {"minutes": 25})
    rt.settle()
    for conv in convs:
        assert host_event(rt, "foreground_confirmed", conv, "pomodoro")
    clock.advance(25 * MIN - 5)
    answers: dict[str, object] = {}
    go = threading.Barrier(2)

    def interrupts() -> None:
        go.wait()
        for conv in convs:
            answers[conv] = rt.call(f"i-{conv}", conv, "pomodoro.interrupt", {})["result"]

    def deadline() -> None:
        go.wait()
        clock.advance(5)

    threads = [threading.Thread(target=interrupts), threading.Thread(target=deadline)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    rt.settle()
    for conv in convs:  # exactly one terminal result each, and the interrupt agrees with it
        result = one_result(rt, f"s-{conv}", conv)
        expected = "interrupted" if result["status"] == "interrupted" else "nothing_running"
        assert result["status"] in ("interrupted", "completed")
        assert answers[conv] == {"status": expected}
    invariants.check(rt)


@pytest.mark.store
@pytest.mark.parametrize("point", ["commit.before", "commit.after_write"])
def test_F13_crash_between_accepted_and_started(env: Env, point: str) -> None:
    # the confirmation, `ready` and `started` are one decision: crash at (or inside) its
    # commit, before the Host's event was acknowledged
    run = env.drive([START, {"settle": True}, {"arm": [point, "crash", 0]}, CONFIRM])
    env.crashed_at(run, point)
    with env.open() as rt:  # the Host is manual here
        rt.settle()
        assert stages(rt, "s1") == ["accepted"]  # nothing of it was kept: still starting
        assert rt.store_dump()["operations"] == []
        # the Host sends the unacknowledged event again: the focus starts, once
        assert host_event(rt, "foreground_confirmed", "c1", "pomodoro")
        rt.settle()
        assert stages(rt, "s1") == ["accepted", "started"]
        assert len(rt.store_dump()["operations"]) == 1
        assert not host_event(rt, "foreground_confirmed", "c1", "pomodoro")  # stale now
        invariants.check(rt)
    with env.open() as rt:
        rt.settle()
        assert stages(rt, "s1") == ["accepted", "started"]  # never two
        invariants.check(rt)


@pytest.mark.store
def test_F13_crash_between_accepted_and_started_then_the_activation_timed_out(env: Env) -> None:
    run = env.drive([START, {"settle": True}, {"arm": ["commit.before", "crash", 0]}, CONFIRM])
    env.crashed_at(run, "commit.before")
    with env.open(clock=VirtualClock(env.saved_now() + 2 * MIN)) as rt:
        rt.settle()
        assert one_result(rt) == {"status": "not_started", "reason": "timeout"}
        assert rt.store_dump()["operations"] == []
        invariants.check(rt)


class JumpClock:
    """A wall clock (not virtual: the runtime arms real timers) that jumps when told."""

    virtual = False

    def __init__(self, now_ms: int) -> None:
        self.now = now_ms

    def now_ms(self) -> int:
        return self.now

    def on_advance(self, listener: Callable[[int], None]) -> None:
        """A wall clock is never advanced on request."""


def armed_delay_s(rt: Runtime) -> float | None:
    def go() -> float | None:
        timer = rt._timer
        if timer is None or timer.cancelled():
            return None
        return float(timer.when() - rt._loop.time())

    rt._call_sync(lambda: None)  # let a pending re-arm run first
    return rt._call_sync(go)


def test_F14_wall_clock_jumps_while_a_timer_is_armed(
    trust: TrustStore, pomodoro_bundle: Path
) -> None:
    t0 = 1_767_225_600_000
    clock = JumpClock(t0)
    with Runtime.open(":memory:", trust=trust, clock=clock, host=HostSimulator("manual")) as rt:
        rt.install(pomodoro_bundle)
        rt.call("s1", "c1", "pomodoro.start", {"minutes": 25})
        rt.settle()
        assert host_event(rt, "foreground_confirmed", "c1", "pomodoro")
        rt.settle()
        ends = t0 + 25 * MIN
        assert final_stage(rt) == "started"
        delay = armed_delay_s(rt)
        assert delay is not None and 25 * 60 - 5 < delay <= 25 * 60  # the timer's own time

        clock.now = t0 - 60 * MIN  # the wall clock jumps back, then the timer fires early
        rt._run(rt._fire())
        assert final_stage(rt) == "started"  # no early fire
        delay = armed_delay_s(rt)
        assert delay is not None and delay > 80 * 60  # re-armed from the stored deadline

        clock.now = ends - 1
        rt._run(rt._fire())
        assert final_stage(rt) == "started"

        clock.now = ends + 40 * MIN  # the wall clock jumps past the deadline
        rt._run(rt._fire())
        result = final(rt, "s1")["result"]
        assert result["status"] == "completed" and result["ended_at"] == format_ts(ends)
        n = len(rt.outbox.all())
        rt._run(rt._fire())  # and fires again: no double fire
        assert len(rt.outbox.all()) == n and len(rt.im_records("c1")) == 1
        assert armed_delay_s(rt) is None
        invariants.check(rt)


def final_stage(rt: Runtime) -> str:
    return stages(rt, "s1")[-1]


def test_F14_a_failed_timer_tick_stays_armed(trust: TrustStore, pomodoro_bundle: Path) -> None:
    t0 = 1_767_225_600_000
    clock = JumpClock(t0)
    with Runtime.open(":memory:", trust=trust, clock=clock, host=HostSimulator("manual")) as rt:
        rt.install(pomodoro_bundle)
        rt.call("s1", "c1", "pomodoro.start", {"minutes": 1})
        rt.settle()
        assert host_event(rt, "foreground_confirmed", "c1", "pomodoro")
        clock.now = t0 + MIN
        faults.arm("commit.before")  # the deadline's commit fails when the timer fires
        with pytest.raises(FaultInjected):
            rt._run(rt._fire())
        # the timer was re-armed for the deadline that is still due: it fires again by itself
        wait_for(rt, "SELECT 1 FROM operations WHERE state='completed'")
        rt.settle()
        assert final(rt, "s1")["result"]["ended_at"] == format_ts(t0 + MIN)
        assert len(rt.im_records("c1")) == 1
        invariants.check(rt)
