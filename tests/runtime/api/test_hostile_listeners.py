"""Surface listeners (issue 10, SPEC 5.5): delivered off the runtime's loop, in order per
subscription; a listener may call the runtime; a slow one delays only its own frames;
`settle()` waits until their queues drained."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from lineup_runtime_lite import Runtime
from lineup_runtime_lite.internals import engine_of
from lineup_sdk.context import Snapshot
from lineup_sdk.errors import LineupError
from tests.runtime.conftest import ready


def write(rt: Runtime, conv: str, n: int) -> None:
    msg = rt.call(f"{conv}-w{n}", conv, "probe.write", {"data": {"n": n}, "expected_revision": n})
    assert msg["result"] == n + 1, msg


def test_a_listener_may_call_the_runtime_api(probe: Runtime) -> None:
    ready(probe)
    surface = probe.surface("conv", "probe")
    seen: list[Any] = []

    def listener(kind: str, snap: Snapshot) -> None:
        # each of these deadlocked the runtime when listeners ran on its loop
        seen.append((kind, snap.revision, surface.get().revision >= snap.revision))
        seen.append(surface.operations())
        seen.append(probe.call(f"peek-{snap.revision}", "conv", "probe.peek", {})["kind"])
        probe.settle()  # a listener settling waits for everything but itself

    surface.subscribe(listener)
    write(probe, "conv", 0)
    probe.settle()
    assert seen == [
        ("session_data.snapshot", 0, True),
        [],
        "result",
        ("session_data.changed", 1, True),
        [],
        "result",
    ]
    assert probe.call("after", "conv", "probe.echo", {"text": "ok"})["result"] == "ok"


def test_a_slow_listener_delays_only_its_own_subscription(probe: Runtime) -> None:
    ready(probe, "slow")
    ready(probe, "fast")
    release = threading.Event()
    slow_frames: list[int] = []
    fast_frames: list[int] = []
    beside_frames: list[int] = []
    fast_done, beside_done = threading.Event(), threading.Event()

    def slow(kind: str, snap: Snapshot) -> None:
        if kind == "session_data.changed":
            release.wait(timeout=30)
        slow_frames.append(snap.revision)

    def fast(kind: str, snap: Snapshot) -> None:
        fast_frames.append(snap.revision)
        if snap.revision == 3:
            fast_done.set()

    def beside(kind: str, snap: Snapshot) -> None:
        beside_frames.append(snap.revision)
        if snap.revision == 1:
            beside_done.set()

    probe.surface("slow", "probe").subscribe(slow)
    probe.surface("fast", "probe").subscribe(fast)
    probe.surface("slow", "probe").subscribe(beside)  # a second listener on the slow session
    write(probe, "slow", 0)  # the slow listener is now stuck in its frame
    started = time.perf_counter()
    for n in range(3):
        write(probe, "fast", n)  # other conversations' calls are not held up
    assert probe.call("e", "slow", "probe.echo", {"text": "x"})["result"] == "x"
    assert fast_done.wait(timeout=30) and beside_done.wait(timeout=30)
    assert time.perf_counter() - started < 10
    assert fast_frames == [0, 1, 2, 3]
    assert beside_frames == [0, 1]  # the same session's other listener is not held up
    assert slow_frames == [0]
    release.set()
    probe.settle()
    assert slow_frames == [0, 1]


def test_frames_arrive_in_order_and_settle_waits_for_them(probe: Runtime) -> None:
    ready(probe)
    frames: list[tuple[str, int]] = []

    def listener(kind: str, snap: Snapshot) -> None:
        time.sleep(0.01)  # a listener slower than the writes: frames queue up
        frames.append((kind, snap.revision))

    probe.surface("conv", "probe").subscribe(listener)
    for n in range(10):
        write(probe, "conv", n)
    probe.settle()
    assert frames == [("session_data.snapshot", 0)] + [
        ("session_data.changed", r) for r in range(1, 11)
    ]


def test_settle_waits_for_a_listener_that_unsubscribed_itself(probe: Runtime) -> None:
    """A listener that drops its own subscription and goes on (a client resyncing after a
    revision gap: unsubscribe, get, subscribe again) is still waited for by `settle()`."""
    ready(probe)
    surface = probe.surface("conv", "probe")
    unsubscribed, proceed = threading.Event(), threading.Event()
    got: list[int] = []
    unsubscribe: list[Any] = []

    def listener(kind: str, snap: Snapshot) -> None:
        if kind == "session_data.changed":
            unsubscribe[0]()
            unsubscribed.set()
            assert proceed.wait(timeout=30)  # bounds a broken test only
            got.append(surface.get().revision)

    unsubscribe.append(surface.subscribe(listener))
    write(probe, "conv", 0)
    assert unsubscribed.wait(timeout=30)
    assert len(engine_of(probe).subs) == 0  # removed, while its listener still runs
    assert len(engine_of(probe).subs.pending()) == 1  # and still waited for
    proceed.set()
    probe.settle()
    assert got == [1]
    assert engine_of(probe).subs.pending() == []


def test_a_failing_listener_keeps_its_later_frames(probe: Runtime) -> None:
    ready(probe)
    got: list[int] = []

    def listener(kind: str, snap: Snapshot) -> None:
        got.append(snap.revision)
        if snap.revision == 1:
            raise RuntimeError("a listener bug")

    probe.surface("conv", "probe").subscribe(listener)
    write(probe, "conv", 0)
    write(probe, "conv", 1)
    probe.settle()
    assert got == [0, 1, 2]


def test_subscriptions_are_released(probe: Runtime) -> None:
    ready(probe)
    unsubs = [probe.surface("conv", "probe").subscribe(lambda k, s: None) for _ in range(5)]
    assert len(engine_of(probe).subs) == 5
    for unsub in unsubs:
        unsub()
    assert len(engine_of(probe).subs) == 0
    assert engine_of(probe).subs._subs == {}  # no empty entry per conversation left behind


def test_a_listener_must_be_callable(probe: Runtime) -> None:
    with pytest.raises(LineupError) as exc:
        probe.surface("conv", "probe").subscribe("not a function")  # type: ignore[arg-type]
    assert exc.value.code == "usage_invalid"
    assert len(engine_of(probe).subs) == 0
