"""Every named fault point, in `raise` mode (in-process) and `crash` mode (a driver process
exits at the point): the runtime keeps its promises, and a point added to `faults.POINTS`
without a scenario here fails the suite."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from lineup_runtime_lite import Runtime
from lineup_runtime_lite.store import faults
from lineup_runtime_lite.store.faults import FaultInjected
from tests.faults import invariants
from tests.faults.harness import DriverRun, Env, host_event


@pytest.fixture(autouse=True)
def _disarm() -> Iterator[None]:
    yield
    faults.disarm()


def stages(rt: Runtime, call_id: str) -> list[str]:
    return [m["stage"] for m in rt.outbox.all() if m["call_id"] == call_id]


def confirm(rt: Runtime, conv: str = "c1", scope: str = "pomodoro") -> bool:
    return host_event(rt, "foreground_confirmed", conv, scope)


def start_focus(rt: Runtime) -> None:
    """The Pomodoro in c1 reaches `started` exactly once."""
    rt.settle()
    assert confirm(rt)
    assert stages(rt, "s1") == ["accepted", "started"]


def fired(point: str, before: int) -> None:
    assert faults.fired()[point] == before + 1, f"{point} never fired"


# -- raise mode ------------------------------------------------------------------------
def raise_rolls_back(point: str) -> Callable[[Env], None]:
    """A failure before or inside the transaction: nothing changed; a retry is accepted."""

    def scenario(env: Env) -> None:
        with env.open() as rt:
            before = rt.store_dump()
            faults.arm(point)
            with pytest.raises(FaultInjected):
                rt.call("s1", "c1", "pomodoro.start", {"minutes": 5})
            invariants.assert_unchanged(before, rt.store_dump())
            invariants.check(rt)
            assert rt.call("s1", "c1", "pomodoro.start", {"minutes": 5})["stage"] == "accepted"
            start_focus(rt)
            invariants.check(rt)

    return scenario


def raise_after_commit(env: Env) -> None:
    """Committed, then the reply and every reconcile step were lost: a retry replays."""
    with env.open() as rt:
        faults.arm("commit.after")
        with pytest.raises(FaultInjected):
            rt.call("s1", "c1", "pomodoro.start", {"minutes": 5})
        rt.settle()
        assert rt.host.simulator.intents == []  # the Host was never asked
        invariants.check(rt, host_down=True)  # the call is legitimately pending
        retry = rt.call("s1", "c1", "pomodoro.start", {"minutes": 5})
        assert retry["stage"] == "accepted" and stages(rt, "s1") == ["accepted"]
        rt.settle()  # the retry re-drove the saved facts
        assert len(rt.host.simulator.intents) == 1
        start_focus(rt)
        invariants.check(rt)


def raise_in_delivery(point: str, revision: int) -> Callable[[Env], None]:
    """A failed delivery step: the call ends `delivery_interrupted`, never re-delivered."""

    def scenario(env: Env) -> None:
        with env.open() as rt:
            rt.call("w", "c1", "probe.echo", {"text": "up"})
            rt.settle()
            faults.arm(point)
            msg = rt.call("a1", "c1", "probe.append", {"item": "a1"})
            assert msg["error"]["code"] == "delivery_interrupted"
            rt.settle()
            assert rt.surface("c1", "probe").get().revision == revision
            invariants.check(rt)
            assert rt.call("a2", "c1", "probe.append", {"item": "a2"})["result"] == revision + 1
            assert rt.call("a1", "c1", "probe.append", {"item": "a1"}) == msg  # never again
            invariants.check(rt)

    return scenario


def raise_in_host_relay(point: str) -> Callable[[Env], None]:
    """The Host call fails (before or after it acted): retried, applied once."""

    def scenario(env: Env) -> None:
        with env.open() as rt:
            faults.arm(point)
            rt.call("s1", "c1", "pomodoro.start", {"minutes": 5})
            rt.settle()
            assert len(rt.host.simulator.intents) == 1
            start_focus(rt)
            invariants.check(rt)

    return scenario


def raise_in_fetch(env: Env) -> None:
    with env.open() as rt:
        rt.call("i1", "c1", "pomodoro.interrupt", {})
        faults.arm("outbox.fetch")
        with pytest.raises(FaultInjected):
            rt.outbox.fetch()
        assert [m["id"] for m in rt.outbox.fetch()] == ["i1:result"]
        invariants.check(rt)


def raise_in_ack(env: Env) -> None:
    with env.open() as rt:
        rt.call("i1", "c1", "pomodoro.interrupt", {})
        got = rt.outbox.fetch()
        faults.arm("outbox.ack")
        with pytest.raises(FaultInjected):
            rt.outbox.ack([m["id"] for m in got])
        assert rt.outbox.fetch() == got  # not acknowledged: delivered again, same ids
        rt.outbox.ack([m["id"] for m in got])
        assert rt.outbox.fetch() == []


def raise_in_recover(env: Env) -> None:
    with env.open() as rt:
        rt.call("s1", "c1", "pomodoro.start", {"minutes": 5})
        start_focus(rt)
        rt.call("s2", "c2", "pomodoro.start", {"minutes": 5})
        rt.settle()
    faults.arm("recover.step")
    with pytest.raises(FaultInjected):
        env.open()
    with env.open() as rt:  # the failed open released its lock; recovery runs again
        rt.settle()
        invariants.check(rt)
        assert confirm(rt, "c2")
        assert stages(rt, "s2") == ["accepted", "started"]


RAISE: dict[str, Callable[[Env], None]] = {
    "commit.before": raise_rolls_back("commit.before"),
    "commit.after_write": raise_rolls_back("commit.after_write"),
    "commit.after": raise_after_commit,
    "deliver.before_send": raise_in_delivery("deliver.before_send", 0),
    # the handler's write is held by its delivery (SPEC 17): lost with its reply
    "deliver.after_reply": raise_in_delivery("deliver.after_reply", 0),
    "host.reconcile": raise_in_host_relay("host.reconcile"),
    "host.after_intent": raise_in_host_relay("host.after_intent"),
    "outbox.fetch": raise_in_fetch,
    "outbox.ack": raise_in_ack,
    "recover.step": raise_in_recover,
}


# -- crash mode ------------------------------------------------------------------------
START = {"call": ["s1", "c1", "pomodoro.start", {"minutes": 5}]}


def crash_before_commit(env: Env, run: DriverRun) -> None:
    assert "s1" not in run.calls()
    with env.open() as rt:
        assert stages(rt, "s1") == []  # nothing stored
        assert rt.call("s1", "c1", "pomodoro.start", {"minutes": 5})["stage"] == "accepted"
        start_focus(rt)
        invariants.check(rt)


def crash_after_commit(env: Env, run: DriverRun) -> None:
    assert "s1" not in run.calls()  # the reply was lost
    with env.open() as rt:
        rt.settle()
        assert stages(rt, "s1") == ["accepted"]
        accepted = [m for m in rt.outbox.all() if m["id"] == "s1:accepted"]
        assert rt.call("s1", "c1", "pomodoro.start", {"minutes": 5}) == accepted[0]
        assert len(rt.host.simulator.intents) == 1  # recovery asked the Host
        start_focus(rt)
        invariants.check(rt)


def crash_in_delivery(revision: int) -> Callable[[Env, DriverRun], None]:
    def after(env: Env, run: DriverRun) -> None:
        with env.open() as rt:
            rt.settle()
            final = [m for m in rt.outbox.all() if m["call_id"] == "a1"]
            assert [m["error"]["code"] for m in final] == ["delivery_interrupted"]
            assert rt.surface("c1", "probe").get().revision == revision  # never re-run
            invariants.check(rt)

    return after


def crash_in_host_relay(env: Env, run: DriverRun) -> None:
    with env.open() as rt:
        rt.settle()
        intents = rt.host.simulator.intents
        assert len(intents) == 1 and intents[0]["conversation"] == "c1"  # sent again
        start_focus(rt)
        invariants.check(rt)


def crash_in_drain(env: Env, run: DriverRun) -> None:
    with env.open() as rt:
        assert [m["id"] for m in rt.outbox.fetch()] == ["i1:result"]  # not acked: again
        invariants.check(rt)


def crash_in_recover(env: Env, run: DriverRun) -> None:
    with env.open() as rt:
        rt.settle()
        invariants.check(rt)
        assert stages(rt, "s1") == ["accepted", "started"]
        assert confirm(rt, "c2")


PROBE_UP: list[dict[str, Any]] = [
    {"call": ["w", "c1", "probe.echo", {"text": "up"}]},
    {"settle": True},
]
APPEND = {"call": ["a1", "c1", "probe.append", {"item": "a1"}]}
INTERRUPT = {"call": ["i1", "c1", "pomodoro.interrupt", {}]}


def crash_plan(point: str) -> list[dict[str, Any]]:
    arm = {"arm": [point, "crash", 0]}
    if point.startswith("commit."):
        return [arm, START]
    if point.startswith("deliver."):
        return [*PROBE_UP, arm, APPEND]
    if point.startswith("host."):
        return [arm, START, {"settle": True}]
    if point == "outbox.fetch":
        return [INTERRUPT, arm, {"fetch": 10}]
    if point == "outbox.ack":
        return [INTERRUPT, arm, {"fetch": 10, "ack": True}]
    raise AssertionError(point)


CRASH: dict[str, Callable[[Env, DriverRun], None]] = {
    "commit.before": crash_before_commit,
    "commit.after_write": crash_before_commit,
    "commit.after": crash_after_commit,
    "deliver.before_send": crash_in_delivery(0),
    "deliver.after_reply": crash_in_delivery(0),  # nothing of the delivery applied
    "host.reconcile": crash_in_host_relay,
    "host.after_intent": crash_in_host_relay,
    "outbox.fetch": crash_in_drain,
    "outbox.ack": crash_in_drain,
    "recover.step": crash_in_recover,
}


def test_every_fault_point_has_a_raise_and_a_crash_scenario() -> None:
    assert len(set(faults.POINTS)) == len(faults.POINTS)
    assert set(RAISE) == set(faults.POINTS), "a fault point without a raise scenario"
    assert set(CRASH) == set(faults.POINTS), "a fault point without a crash scenario"


@pytest.mark.store
@pytest.mark.parametrize("point", faults.POINTS)
def test_raise_at_point(env: Env, point: str) -> None:
    before = faults.fired()[point]
    RAISE[point](env)
    fired(point, before)
    faults.disarm()
    with env.open() as rt:  # and after a restart
        rt.settle()
        invariants.check(rt)


@pytest.mark.store
@pytest.mark.parametrize("point", faults.POINTS)
def test_crash_at_point(env: Env, point: str) -> None:
    if point == "recover.step":
        setup = env.drive(
            [
                START,
                {"settle": True},
                {"host": ["foreground_confirmed", "c1", "pomodoro"]},
                {"call": ["s2", "c2", "pomodoro.start", {}]},
                {"settle": True},
            ]
        )
        assert setup.done
        run = env.drive(arm_at_open=(point, "crash", 0))
    else:
        run = env.drive(crash_plan(point))
    env.crashed_at(run, point)
    CRASH[point](env, run)
