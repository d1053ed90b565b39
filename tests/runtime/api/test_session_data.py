"""Session data (SPEC 5.5): revision 0, CAS, limits, and the TIS2-04 subscription order."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lineup_build.trust import TrustStore
from lineup_runtime_lite import HostSimulator, Runtime, VirtualClock
from lineup_runtime_lite.core.messages import AgentMessage
from lineup_sdk._session import SessionDataSubscriber
from lineup_sdk.context import Snapshot
from tests.runtime.conftest import ready


@pytest.fixture()
def rt(store_rt: Runtime) -> Runtime:
    """This module's runtimes (`rt`, `probe`, `pomo`) run on the chosen store engine."""
    return store_rt


def write(rt: Runtime, cid: str, data: Any, rev: int) -> AgentMessage:
    return rt.call(cid, "conv", "probe.write", {"data": data, "expected_revision": rev})


@pytest.mark.store
def test_empty_is_revision_zero(probe: Runtime) -> None:
    ready(probe)
    assert probe.call("r", "conv", "probe.read", {})["result"] == {"data": None, "revision": 0}
    assert probe.surface("conv", "probe").get() == Snapshot(None, 0)
    assert probe.surface("nobody", "probe").get() == Snapshot(None, 0)


def test_cas_and_limits(
    trust: TrustStore, clock: VirtualClock, host: HostSimulator, probe_bundle: Path
) -> None:
    # params may be larger than 1 MiB here, so the session data limit is the one reached
    probe = Runtime.open(":memory:", trust=trust, clock=clock, host=host, max_params_bytes=2**21)
    probe.install(probe_bundle)
    try:
        _cas_and_limits(probe)
    finally:
        probe.close()


def _cas_and_limits(probe: Runtime) -> None:
    ready(probe)
    assert write(probe, "w1", {"a": 1}, 0)["result"] == 1
    assert write(probe, "w2", {"a": 2}, 1)["result"] == 2
    stale = write(probe, "w3", {"a": 3}, 1)
    assert stale["error"]["code"] == "session_data_revision_conflict"
    assert write(probe, "w4", [1, 2], 2)["error"]["code"] == "session_data_invalid"
    big = {"blob": "x" * (1024 * 1024)}
    assert write(probe, "w5", big, 2)["error"]["code"] == "session_data_too_large"
    assert probe.surface("conv", "probe").get() == Snapshot({"a": 2}, 2)


def frames(rt: Runtime) -> tuple[list[tuple[str, int]], Callable[[], None]]:
    seen: list[tuple[str, int]] = []
    unsub = rt.surface("conv", "probe").subscribe(
        lambda kind, snap: seen.append((kind, snap.revision))
    )
    return seen, unsub


@pytest.mark.store
def test_replace_before_subscribe_is_the_first_frame(probe: Runtime) -> None:
    ready(probe)
    for i in range(3):
        write(probe, f"w{i}", {"n": i}, i)
    assert probe.surface("conv", "probe").get().revision == 3  # get (rev 3)
    write(probe, "w3", {"n": 3}, 3)  # replace (rev 4)
    seen, _ = frames(probe)  # subscribe
    assert seen == [("session_data.snapshot", 4)]


@pytest.mark.store
def test_subscribe_before_replace_gets_snapshot_then_change(probe: Runtime) -> None:
    ready(probe)
    for i in range(3):
        write(probe, f"w{i}", {"n": i}, i)
    seen, unsub = frames(probe)
    write(probe, "w3", {"n": 3}, 3)
    probe.settle()  # listeners run off the loop; settle waits for their queues
    assert seen == [("session_data.snapshot", 3), ("session_data.changed", 4)]
    unsub()
    write(probe, "w4", {"n": 4}, 4)
    probe.settle()
    assert seen[-1] == ("session_data.changed", 4)


class FakeSource:
    """A bridge whose frames the test controls."""

    def __init__(self, snap: Snapshot) -> None:
        self.snap = snap
        self.listener: Callable[[str, Snapshot], None] | None = None
        self.subscriptions = 0

    def get(self) -> Snapshot:
        return self.snap

    def subscribe(self, listener: Callable[[str, Snapshot], None]) -> Callable[[], None]:
        self.subscriptions += 1
        self.listener = listener
        listener("session_data.snapshot", self.snap)
        return lambda: None

    def push(self, rev: int) -> None:
        assert self.listener is not None
        self.listener("session_data.changed", Snapshot({"r": rev}, rev))


def test_client_subscriber_drops_duplicates_and_resyncs_on_gap() -> None:
    src = FakeSource(Snapshot({"r": 3}, 3))
    applied: list[int] = []
    sub = SessionDataSubscriber(src, lambda s: applied.append(s.revision))
    sub.start()
    src.push(4)
    src.push(4)  # duplicate
    src.push(2)  # older
    assert applied == [3, 4]
    src.snap = Snapshot({"r": 7}, 7)
    src.push(7)  # gap: 5 and 6 missing → get + resubscribe
    assert applied == [3, 4, 7]
    assert sub.resyncs == 1 and src.subscriptions == 2
    src.snap = Snapshot({"r": 8}, 8)
    sub.reconnect()
    assert applied[-1] == 8 and sub.resyncs == 2


@pytest.mark.store
@pytest.mark.parametrize("order", ["get-replace-subscribe", "subscribe-replace"])
def test_client_subscriber_against_the_runtime(probe: Runtime, order: str) -> None:
    ready(probe)
    for i in range(3):
        write(probe, f"w{i}", {"n": i}, i)
    surface = probe.surface("conv", "probe")
    applied: list[int] = []
    sub = SessionDataSubscriber(surface, lambda s: applied.append(s.revision))
    if order == "get-replace-subscribe":
        write(probe, "w3", {"n": 3}, 3)
        sub.start()
        assert applied == [4]
    else:
        sub.start()
        write(probe, "w3", {"n": 3}, 3)
        probe.settle()  # listeners run off the loop; settle waits for their frames
        assert applied == [3, 4]
