"""F22: a crash inside `recover()` itself; recovery re-runs cleanly and strands nothing."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from lineup_runtime_lite import VirtualClock
from lineup_runtime_lite.store import faults
from lineup_runtime_lite.store.faults import FaultInjected
from tests.faults import invariants
from tests.faults.harness import Env, final, stages

pytestmark = pytest.mark.store

MIN = 60_000


@pytest.fixture(autouse=True)
def _disarm() -> Iterator[None]:
    yield
    faults.disarm()


def pending_work(env: Env) -> int:
    """A database whose recovery has several steps; returns a clock time after downtime."""
    run = env.drive(
        [
            {"call": ["s1", "c2", "pomodoro.start", {"minutes": 5}]},
            {"settle": True},
            {"host": ["foreground_confirmed", "c2", "pomodoro"]},
            {"call": ["f1", "c3", "probe.fg", {}]},
            {"call": ["q1", "c3", "probe.append", {"item": "q1"}]},
            {"call": ["w", "c1", "probe.echo", {"text": "up"}]},
            {"settle": True},
            {"arm": ["deliver.before_send", "crash", 0]},
            {"call": ["a1", "c1", "probe.append", {"item": "a1"}]},
        ]
    )
    env.crashed_at(run, "deliver.before_send")
    return env.saved_now() + 10 * MIN  # the focus and the activation expire while down


def assert_recovered(env: Env, later: int) -> None:
    for _ in range(2):  # and recovering again changes nothing
        with env.open(clock=VirtualClock(later)) as rt:
            rt.settle()
            assert final(rt, "a1")["error"]["code"] == "delivery_interrupted"
            result = final(rt, "s1")["result"]
            assert result["status"] == "completed" and result["ended_at"] == result["ends_at"]
            assert stages(rt, "f1") == ["accepted", "activation_failed", "error"]
            assert final(rt, "q1")["error"]["details"] == {"reason": "timeout"}
            assert len(rt.im_records("c2")) == 1
            assert rt.surface("c1", "probe").get().revision == 0
            invariants.check(rt)


CRASHES = [
    ("recover.step", 0),  # before the interrupted delivery is answered
    ("commit.after_write", 0),  # inside that answer's transaction
    ("recover.step", 1),  # between the deliveries and the clock
    ("commit.before", 1),  # at the first deadline's commit
    ("commit.after", 2),  # after a deadline committed, before the rest
]


def test_F22_crash_inside_recover_at_every_step(env: Env) -> None:
    later = pending_work(env)
    for point, after in CRASHES:
        run = env.drive(arm_at_open=(point, "crash", after), clock_ms=later)
        if run.returncode == 0:  # an earlier crash already finished that step
            continue
        env.crashed_at(run, point)
    assert_recovered(env, later)


@pytest.mark.parametrize(("point", "after"), CRASHES)
def test_F22_recover_that_raises_runs_again_cleanly(env: Env, point: str, after: int) -> None:
    later = pending_work(env)
    faults.arm(point, after=after)
    with pytest.raises(FaultInjected):
        env.open(clock=VirtualClock(later))
    faults.disarm()
    assert_recovered(env, later)
