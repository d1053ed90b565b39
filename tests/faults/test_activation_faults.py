"""Faults around activations and their queue: F5–F9 and F23."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from lineup_build.trust import TrustStore
from lineup_runtime_lite import HostSimulator, Runtime, VirtualClock
from lineup_runtime_lite.drivers import WORKER_START_TRIES
from lineup_runtime_lite.internals import engine_of
from lineup_runtime_lite.store import faults
from tests.faults import invariants
from tests.faults.harness import Env, final, host_event, stages

FG = {"call": ["f1", "c1", "probe.fg", {}]}
QUEUE = [{"call": [f"a{i}", "c1", "probe.append", {"item": f"a{i}"}]} for i in range(4)]


@pytest.fixture(autouse=True)
def _disarm() -> Iterator[None]:
    yield
    faults.disarm()


def activation_states(rt: Runtime) -> list[str]:
    return [r[3] for r in rt.store_dump()["activations"]]


@pytest.mark.store
def test_F05_crash_after_starting_committed_before_the_host_or_worker_was_asked(
    env: Env,
) -> None:
    run = env.drive([{"arm": ["commit.after", "crash", 0]}, FG])
    env.crashed_at(run, "commit.after")
    with env.open() as rt:
        rt.settle()  # recovery asks the Host and starts the worker, once
        assert len(rt.host.simulator.intents) == 1
        assert [r[3] for r in rt.store_dump()["host_intents"]] == [1]
        assert host_event(rt, "foreground_confirmed", "c1", "probe")
        rt.settle()
        assert stages(rt, "f1") == ["accepted", "activation_ready", "result"]
        assert activation_states(rt) == ["ready"]
        invariants.check(rt)


@pytest.mark.store
def test_F06_ready_but_crashed_before_ready_committed(env: Env) -> None:
    # the foreground confirmation commits first, then `ready`: crash at the second commit
    run = env.drive(
        [
            FG,
            {"settle": True},
            {"arm": ["commit.before", "crash", 1]},
            {"host": ["foreground_confirmed", "c1", "probe"]},
        ]
    )
    env.crashed_at(run, "commit.before")
    with env.open() as rt:
        rt.settle()  # recovery reconciles and commits `ready` once
        assert stages(rt, "f1") == ["accepted", "activation_ready", "result"]
        assert activation_states(rt) == ["ready"]
        invariants.check(rt)
    with env.open() as rt:  # and a second recovery changes nothing
        before = rt.store_dump()
        rt.settle()
        invariants.assert_unchanged(before, rt.store_dump())


@pytest.mark.store
def test_F07_queued_calls_survive_restart(env: Env) -> None:
    run = env.drive([FG, {"settle": True}, *QUEUE, {"exit": True}])
    env.crashed_at(run, "exit")
    assert all(run.calls()[f"a{i}"]["activation"] == "queued" for i in range(4))
    with env.open() as rt:
        rt.settle()
        assert rt.surface("c1", "probe").get().revision == 0  # still waiting
        assert host_event(rt, "foreground_confirmed", "c1", "probe")
        rt.settle()
        assert rt.surface("c1", "probe").get().data == {"items": ["a0", "a1", "a2", "a3"]}
        assert [final(rt, f"a{i}")["result"] for i in range(4)] == [1, 2, 3, 4]
        invariants.check(rt)


@pytest.mark.store
def test_F08_activation_fails_each_queued_call_gets_one_error(probe: Runtime) -> None:
    probe.call("f1", "c1", "probe.fg", {})
    probe.settle()
    for i in range(4):
        probe.call(f"a{i}", "c1", "probe.append", {"item": "x"})
    assert host_event(probe, "activation_failed", "c1", "probe")
    assert not host_event(probe, "activation_failed", "c1", "probe")  # once
    probe.settle()
    for cid in ("f1", "a0", "a1", "a2", "a3"):
        err = final(probe, cid)["error"]
        assert err["code"] == "activation_failed" and err["details"] == {"reason": "host_failed"}
    assert probe.surface("c1", "probe").get().revision == 0  # no handler ran
    invariants.check(probe)


@pytest.mark.store
def test_F08_activation_times_out_while_the_runtime_is_down(env: Env) -> None:
    run = env.drive([FG, {"settle": True}, *QUEUE])
    assert run.done
    down_until = env.saved_now() + 120_000  # the activation deadline passes while down
    for _ in range(2):  # recovery answers once, and a second recovery adds nothing
        with env.open(clock=VirtualClock(down_until)) as rt:
            rt.settle()
            for cid in ("f1", "a0", "a1", "a2", "a3"):
                err = final(rt, cid)["error"]
                assert err["code"] == "activation_failed"
                assert err["details"] == {"reason": "timeout"}
            assert stages(rt, "f1") == ["accepted", "activation_failed", "error"]
            assert rt.surface("c1", "probe").get().revision == 0
            invariants.check(rt)


def race(*fns: object) -> list[object]:
    barrier = threading.Barrier(len(fns))
    out: list[object] = [None] * len(fns)

    def run(i: int) -> None:
        barrier.wait()
        out[i] = fns[i]()  # type: ignore[operator]

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(fns))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return out


@pytest.mark.store
def test_F09_cancel_races_ready(probe: Runtime) -> None:
    rt = probe
    rt.call("warm", "w", "probe.echo", {"text": "worker up"})
    rt.settle()
    outcomes = set()
    for n in range(12):
        conv = f"c{n}"
        rt.call(f"f{n}", conv, "probe.fg", {})
        rt.settle()
        rt.call(f"q{n}", conv, "probe.append", {"item": "x"})
        first, second = ("foreground_confirmed", "user_left")[:: 1 if n % 2 else -1]
        applied = race(
            lambda conv=conv, e=first: host_event(rt, e, conv, "probe"),
            lambda conv=conv, e=second: host_event(rt, e, conv, "probe"),
        )
        rt.settle()
        assert sorted(applied, key=str) == [False, True], applied  # exactly one won
        state = [r[3] for r in rt.store_dump()["activations"] if r[2] == f"f{n}"]
        winner = (first, second)[applied.index(True)]
        if winner == "foreground_confirmed":
            assert state == ["ready"]
            assert final(rt, f"q{n}")["result"] == 1  # the queue followed ready
        else:
            assert state == ["cancelled"]
            assert final(rt, f"q{n}")["error"]["code"] == "activation_cancelled"
        outcomes.add(winner)
        invariants.check(rt)
    # the loser is a no-op that writes nothing, in either order
    before = rt.store_dump()
    assert not host_event(rt, "user_left", "c1", "probe")
    assert not host_event(rt, "foreground_confirmed", "c1", "probe")
    invariants.assert_unchanged(before, rt.store_dump())


def test_F23_a_poison_app_fails_its_activation_and_nothing_else(
    tmp_path: Path,
    trust: TrustStore,
    probe_bundle: Path,
    todo_bundle: Path,
    pomodoro_bundle: Path,
) -> None:
    db = tmp_path / "rt.db"
    # the probe worker dies at import, every time (the switch reaches workers only through
    # the runtime's explicit worker_env: the sandbox passes nothing else)
    with Runtime.open(
        db,
        trust=trust,
        clock=VirtualClock(),
        host=HostSimulator("manual"),
        worker_env={"PROBE_POISON": "1"},
    ) as rt:
        for bundle in (probe_bundle, todo_bundle, pomodoro_bundle):
            rt.install(bundle)
        rt.call("p1", "c1", "probe.append", {"item": "never"})
        rt.call("p2", "c1", "probe.append", {"item": "never"})
        rt.call("t1", "c2", "todo.add", {"title": "other apps proceed"})
        rt.call("s1", "c2", "pomodoro.start", {"minutes": 5})
        rt.settle()
        for cid in ("p1", "p2"):
            err = final(rt, cid)["error"]
            assert err["code"] == "activation_failed"
            assert err["details"] == {
                "reason": "worker_failed",
                "cause": "RuntimeError: this worker cannot start",
            }
        log = (engine_of(rt).logs_dir / "probe-1.0.0.log").read_text()
        assert log.count("cannot import") == WORKER_START_TRIES  # N tries, then it gave up
        assert final(rt, "t1")["result"]["count"] == 1
        assert host_event(rt, "foreground_confirmed", "c2", "pomodoro")
        assert stages(rt, "s1") == ["accepted", "started"]
        assert rt.surface("c1", "probe").get().revision == 0  # no handler delivery ever ran
        invariants.check(rt)
    with Runtime.open(db, trust=trust, clock=VirtualClock()) as rt:
        rt.call("p3", "c1", "probe.append", {"item": "later"})
        rt.settle()
        assert rt.surface("c1", "probe").get().data == {"items": ["later"]}  # nothing retried
        invariants.check(rt)
