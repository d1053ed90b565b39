"""Session data under faults: F17 (racing replaces), F18 (a crash around a replace, then a
retry), F19 (a subscriber across a restart)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from lineup_runtime_lite import Runtime
from lineup_runtime_lite.core.decisions import ReplaceSessionData
from lineup_runtime_lite.core.deliveries import commit_pending, hold_replace
from lineup_runtime_lite.core.messages import AgentMessage
from lineup_runtime_lite.internals import engine_of
from lineup_runtime_lite.store import LostRace, faults
from lineup_sdk._session import SessionDataSubscriber
from lineup_sdk.context import Snapshot
from lineup_sdk.errors import LineupError
from tests.faults import invariants
from tests.faults.harness import Env, final
from tests.runtime.conftest import ready

pytestmark = pytest.mark.store

PROBE_UP: list[dict[str, Any]] = [
    {"call": ["w", "c1", "probe.echo", {"text": "up"}]},
    {"settle": True},
]
APPEND = {"call": ["a1", "c1", "probe.append", {"item": "a1"}]}


@pytest.fixture(autouse=True)
def _disarm() -> Iterator[None]:
    yield
    faults.disarm()


def test_F17_two_replaces_with_the_same_expected_revision(probe: Runtime) -> None:
    ready(probe)
    for rev in range(5):
        barrier = threading.Barrier(2)
        out: list[AgentMessage] = []

        def write(
            n: int,
            rev: int = rev,
            barrier: threading.Barrier = barrier,
            out: list[AgentMessage] = out,
        ) -> None:
            barrier.wait()
            params = {"data": {"writer": n}, "expected_revision": rev}
            out.append(probe.call(f"w{rev}-{n}", "conv", "probe.write", params))

        threads = [threading.Thread(target=write, args=(n,)) for n in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        wins = [m for m in out if m["kind"] == "result"]
        losses = [m for m in out if m["kind"] == "error"]
        assert [m["result"] for m in wins] == [rev + 1]  # one wins: r+1
        assert [m["error"]["code"] for m in losses] == ["session_data_revision_conflict"]
        assert probe.surface("conv", "probe").get().revision == rev + 1
    invariants.check(probe)


def test_F17_the_store_refuses_the_second_replace(probe: Runtime) -> None:
    ready(probe)
    sid = probe.store_dump()["app_sessions"][0][0]
    store = engine_of(probe).store

    def both() -> list[str]:
        outcomes = []
        for n in range(2):

            def step(tx: Any, n: int = n) -> None:
                held = hold_replace(
                    None, tx.session_revision("probe", sid), "probe", sid, {"n": n}, 0
                )
                for change in commit_pending(held, tx.session_revision("probe", sid)) or ():
                    tx.apply(change)

            [out] = store.batch([step])
            outcomes.append(out.code if isinstance(out, LineupError) else "ok")
        # the guard itself: a change decided on revision 0 after another won finds no row
        [lost] = store.batch([lambda tx: tx.apply(ReplaceSessionData("probe", sid, 0, "{}"))])
        outcomes.append(type(lost).__name__ if isinstance(lost, LostRace) else "applied")
        return outcomes

    assert probe._call_sync(both) == ["ok", "session_data_revision_conflict", "LostRace"]
    assert probe.surface("conv", "probe").get() == Snapshot({"n": 0}, 1)


@pytest.mark.parametrize("point", ["commit.before", "commit.after_write", "commit.after"])
def test_F18_crash_around_the_answer_then_the_call_is_retried(env: Env, point: str) -> None:
    # commits of the call: 1 accepted as delivered, 2 its answer with the handler's write
    # (SPEC 17: the replace itself commits nothing)
    run = env.drive([*PROBE_UP, {"arm": [point, "crash", 1]}, APPEND])
    env.crashed_at(run, point)
    with env.open() as rt:
        rt.settle()
        answered = final(rt, "a1")
        if point == "commit.after":  # the answer and its data committed together
            assert answered["result"] == 1
            revision = 1
        else:  # neither did: nothing of the delivery was applied
            assert answered["error"]["code"] == "delivery_interrupted"
            revision = 0
        assert rt.surface("c1", "probe").get().revision == revision
        retry = rt.call("a1", "c1", "probe.append", {"item": "a1"})
        assert retry == answered  # replayed, never re-executed
        assert rt.surface("c1", "probe").get().revision == revision  # no double increment
        assert rt.call("a2", "c1", "probe.append", {"item": "a2"})["result"] == revision + 1
        invariants.check(rt)


def test_F18_answer_commit_fails_in_process(probe: Runtime) -> None:
    ready(probe)
    frames: list[tuple[str, int]] = []
    probe.surface("conv", "probe").subscribe(lambda k, s: frames.append((k, s.revision)))
    # the answer's one commit is rolled back: neither its final nor the handler's write is
    # kept; the call, delivered once, ends interrupted (at most once)
    faults.arm("commit.after_write", after=1)
    msg = probe.call("a1", "conv", "probe.append", {"item": "a1"})
    assert msg["error"]["code"] == "delivery_interrupted"
    assert probe.surface("conv", "probe").get().revision == 0
    assert probe.call("a1", "conv", "probe.append", {"item": "a1"}) == msg
    assert probe.surface("conv", "probe").get().revision == 0
    # the answer commits with its write, then a later step fails: both stand, and the
    # subscriber still gets the revision once
    faults.arm("commit.after", after=1)
    ok = probe.call("a2", "conv", "probe.append", {"item": "a2"})
    assert ok["result"] == 1
    assert probe.call("a2", "conv", "probe.append", {"item": "a2"}) == ok
    assert probe.surface("conv", "probe").get() == Snapshot({"items": ["a2"]}, 1)
    probe.settle()
    assert frames == [("session_data.snapshot", 0), ("session_data.changed", 1)]
    invariants.check(probe)


class Reconnecting:
    """The Surface's bridge to whichever runtime process is current."""

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt

    def get(self) -> Snapshot:
        return self.rt.surface("c1", "probe").get()

    def subscribe(self, listener: Callable[[str, Snapshot], None]) -> Callable[[], None]:
        return self.rt.surface("c1", "probe").subscribe(listener)


def test_F19_a_subscriber_across_a_restart(env: Env) -> None:
    frames: list[tuple[str, int]] = []
    applied: list[int] = []
    rt = env.open()
    try:
        rt.call("w", "c1", "probe.echo", {"text": "up"})
        rt.settle()
        bridge = Reconnecting(rt)
        client = SessionDataSubscriber(bridge, lambda s: applied.append(s.revision))
        client.start()
        rt.surface("c1", "probe").subscribe(lambda k, s: frames.append((k, s.revision)))
        for i in range(3):
            rt.call(f"a{i}", "c1", "probe.append", {"item": f"a{i}"})
        rt.settle()
    finally:
        rt.close()
    rt = env.open()
    try:
        rt.settle()
        seen: list[tuple[str, int]] = []
        rt.surface("c1", "probe").subscribe(lambda k, s: seen.append((k, s.revision)))
        assert seen == [("session_data.snapshot", 3)]  # the current snapshot first
        assert seen[0][1] >= frames[-1][1]  # never lower than already sent
        bridge.rt = rt
        client.reconnect()
        rt.call("a3", "c1", "probe.append", {"item": "a3"})
        rt.settle()  # listeners run off the loop; settle waits for their frames
        assert seen[-1] == ("session_data.changed", 4)
        assert applied == [0, 1, 2, 3, 4]  # the client saw every revision once, in order
        invariants.check(rt)
    finally:
        rt.close()
    assert frames == [("session_data.snapshot", 0)] + [
        ("session_data.changed", r) for r in (1, 2, 3)
    ]


def test_F19_a_subscriber_after_a_crash(env: Env) -> None:
    run = env.drive(
        [*PROBE_UP, APPEND, {"call": ["a2", "c1", "probe.append", {"item": "a2"}]}, {"exit": True}]
    )
    env.crashed_at(run, "exit")
    acked = run.calls()
    with env.open() as rt:
        rt.settle()
        seen: list[tuple[str, Snapshot]] = []
        rt.surface("c1", "probe").subscribe(lambda k, s: seen.append((k, s)))
        kind, snap = seen[0]
        assert kind == "session_data.snapshot"
        assert snap.revision >= max(m["result"] for m in acked.values() if m["kind"] == "result")
        assert snap.data == {"items": ["a1", "a2"][: snap.revision]}
        invariants.check(rt)
