"""CPU, liveness and bridge flow (SPEC 13.3): a hostile MiniApp burns CPU past its timeout
and its budget, closes or stops reading its inbox, and floods the runtime with session-data
requests it never reads; each test asserts the worker is recycled with the stable reason,
and that other sessions and apps carry on.

Handler timeouts and the heartbeat run on the real clock (small settings); tests poll for
their effect with a bounded loop (`poll`) instead of sleeping for a deadline, and release
a parked delivery with a signal instead of a timer.
"""

from __future__ import annotations

import concurrent.futures
import os
import signal
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from lineup_build.signing import SigningKey
from lineup_build.trust import TrustStore
from lineup_runtime_lite import HostSimulator, Runtime, VirtualClock
from tests.runtime.conftest import APPS, build_app
from tests.runtime.processes.containment_kit import (
    SCOPE,
    error_code,
    final,
    log_line,
    result,
    worker_of,
)
from tests.sandbox_kit import pid_alive, poll


@pytest.fixture(scope="module")
def hostile_bundle(tmp_path_factory: pytest.TempPathFactory, rt_key: SigningKey) -> Path:
    return build_app(APPS / "hostile", tmp_path_factory.mktemp("hostile") / "hostile", rt_key)


#: Every rule here holds for each worker, however conversations are split among workers
#: (decision record 0007, "Tests"): each test runs under both `isolation` values, except
#: where it needs two deliveries in flight on one worker. Under `session` a worker serves
#: one App session, whose deliveries run one after the other: there is never a second.
ISOLATIONS = ["app", "session"]
#: For a test that needs another delivery in flight on the same worker.
app_only = pytest.mark.parametrize("isolation", ["app"])


@pytest.fixture(params=ISOLATIONS)
def isolation(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture()
def open_hostile(
    tmp_path: Path, trust: TrustStore, hostile_bundle: Path, probe_bundle: Path, isolation: str
) -> Iterator[Callable[..., Runtime]]:
    """Open a runtime on a file with the hostile and probe apps (closed at the end)."""
    opened: list[Runtime] = []

    def go(**options: Any) -> Runtime:
        rt = Runtime.open(
            tmp_path / f"rt{len(opened)}.db",
            trust=trust,
            clock=VirtualClock(),
            host=HostSimulator(policy="manual"),
            isolation=isolation,
            **options,
        )
        opened.append(rt)
        rt.install(hostile_bundle)
        rt.install(probe_bundle)
        return rt

    yield go
    for rt in opened:
        rt.close()


def reason(msg: Mapping[str, Any]) -> Any:
    return (msg.get("error") or {}).get("details", {}).get("reason")


def tree(root: int) -> list[int]:
    """`root` and its live descendants (host pids)."""
    parents: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as fh:
                    raw = fh.read()
            except OSError:
                continue
            parents[int(name)] = int(raw[raw.rfind(b")") + 2 :].split()[1])
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        if pid_alive(pid):
            found.append(pid)
        todo.extend(p for p, parent in parents.items() if parent == pid)
    return found


def wake(w: Any) -> None:
    """SIGUSR1 to the worker's own process (the launcher's child in a PID namespace)."""
    pids = tree(w.pid)
    target = pids[1] if len(pids) > 1 else pids[0]
    os.kill(target, signal.SIGUSR1)


def park(rt: Runtime, pool: concurrent.futures.Executor, conversation: str) -> Any:
    """A delivery in flight in `conversation` until `wake` (waits until its handler runs)."""
    future = pool.submit(final, rt, conversation, "hostile.wait_signal", {"tag": conversation})
    log_line(rt, f"PARKED {conversation}")
    return future


# -- CPU -------------------------------------------------------------------------------
@app_only
def test_a_timed_out_cpu_bound_handler_is_revoked_and_its_worker_drains_to_a_replacement(
    open_hostile: Callable[..., Runtime],
) -> None:
    """(Under `session` the handler is alone on its worker: the next test.)"""
    rt = open_hostile()
    for conv in ("a", "b", "c"):
        result(rt, conv, "hostile.echo", {"text": "up"})
    old = worker_of(rt, "a")
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        parked = park(rt, pool, "b")  # another session's delivery on the same worker
        assert error_code(final(rt, "a", "hostile.spin", {})) == "handler_timeout"
        # its capability went at the timeout: the handler, spinning on, cannot read
        assert log_line(rt, "SPIN:") == "SPIN: worker_protocol_error"
        # new deliveries go to a replacement while the old worker drains
        assert old.draining and not old.dead
        assert result(rt, "c", "hostile.echo", {"text": "c"}) == "c"
        assert result(rt, "a", "hostile.echo", {"text": "a"}) == "a"
        assert worker_of(rt, "a") is not old and worker_of(rt, "a").pid != old.pid
        # the other session's delivery is answered by the draining worker, then it goes
        wake(old)
        got = parked.result(timeout=30)
        assert got["kind"] == "result" and got["result"] == "woke", got
    assert poll(lambda: old.dead), "the drained worker was not recycled"
    assert old.death.kind == "recycled"
    assert poll(lambda: not pid_alive(old.pid)), "the spinning handler still runs"


def test_a_timed_out_handler_alone_on_its_worker_gets_it_recycled_at_once(
    open_hostile: Callable[..., Runtime],
) -> None:
    rt = open_hostile()
    result(rt, "a", "hostile.echo", {"text": "up"})
    old = worker_of(rt, "a")
    assert error_code(final(rt, "a", "hostile.stuck", {})) == "handler_timeout"
    assert poll(lambda: old.dead) and old.death.kind == "recycled"
    assert poll(lambda: not pid_alive(old.pid))
    assert result(rt, "a", "hostile.sync_echo", {"text": "free"}) == "free"


def test_a_worker_past_its_cpu_budget_is_recycled_with_reason_cpu_limit(
    open_hostile: Callable[..., Runtime],
) -> None:
    rt = open_hostile(worker_cpu_s=2, worker_heartbeat_s=0.2)
    result(rt, "a", "hostile.echo", {"text": "up"})
    old = worker_of(rt, "a")
    started = time.monotonic()
    msg = final(rt, "a", "hostile.burn", {})  # its own timeout is 60 s
    assert error_code(msg) == "delivery_interrupted" and reason(msg) == "cpu_limit", msg
    assert time.monotonic() - started < 30
    assert old.dead and old.death.reason == "cpu_limit"
    assert poll(lambda: not pid_alive(old.pid))
    assert result(rt, "b", "hostile.echo", {"text": "b"}) == "b"
    assert result(rt, "a", "hostile.echo", {"text": "a"}) == "a"
    assert worker_of(rt, "a") is not old


@pytest.mark.parametrize("value", [0, -1, float("nan"), True, "600"])
def test_a_bad_cpu_budget_is_usage_invalid(trust: TrustStore, value: Any) -> None:
    from lineup_sdk.errors import LineupError

    with pytest.raises(LineupError) as exc:
        Runtime.open(":memory:", trust=trust, clock=VirtualClock(), worker_cpu_s=value)
    assert exc.value.code == "usage_invalid"


# -- liveness --------------------------------------------------------------------------
def test_a_worker_that_closes_its_inbox_is_failed_with_reason_worker_lost(
    open_hostile: Callable[..., Runtime], isolation: str
) -> None:
    """Under `app`, b's delivery in flight on the same worker ends with it."""
    rt = open_hostile()
    for conv in ("a", "b"):
        result(rt, conv, "hostile.echo", {"text": "up"})
    old = worker_of(rt, "a")
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        parked = park(rt, pool, "b") if isolation == "app" else None
        msg = final(rt, "a", "hostile.close_inbox", {})
        assert error_code(msg) == "delivery_interrupted" and reason(msg) == "worker_lost", msg
        other = parked.result(timeout=30) if parked is not None else None
    if other is not None:
        assert error_code(other) == "delivery_interrupted" and reason(other) == "worker_lost"
    assert old.dead
    # not left stalled: every conversation's later calls succeed, on a new worker
    for conv in ("a", "b", "c"):
        assert result(rt, conv, "hostile.echo", {"text": conv}) == conv
    assert worker_of(rt, "a") is not old


def test_a_worker_that_stops_reading_its_inbox_fails_its_next_delivery_as_worker_lost(
    open_hostile: Callable[..., Runtime], isolation: str
) -> None:
    rt = open_hostile(worker_heartbeat_s=0.3)
    result(rt, "a", "hostile.echo", {"text": "up"})
    old = worker_of(rt, "a")
    assert result(rt, "a", "hostile.stop_reading") == "stopped"
    started = time.monotonic()
    # b's delivery goes to a's worker under `app`; under `session` a's own next one does
    msg = final(rt, "b" if isolation == "app" else "a", "hostile.echo", {"text": "never read"})
    assert error_code(msg) == "delivery_interrupted" and reason(msg) == "worker_lost", msg
    assert time.monotonic() - started < 15
    assert old.dead
    for conv in ("a", "b"):
        assert result(rt, conv, "hostile.echo", {"text": conv}) == conv
    assert worker_of(rt, "a") is not old


# -- bridge flow -----------------------------------------------------------------------
def _rss_kib(field: str) -> int:
    with open("/proc/self/status") as fh:
        line = next(x for x in fh if x.startswith(field + ":"))
    return int(line.split()[1])


def test_a_request_flood_never_read_keeps_the_runtime_bounded_and_other_apps_answering(
    open_hostile: Callable[..., Runtime],
) -> None:
    rt = open_hostile(worker_heartbeat_s=1.0)
    assert result(rt, "a", "hostile.put", {"secret": "s" * (900 << 10)}) == 1
    result(rt, "p", "probe.echo", {"text": "up"})
    flooded = worker_of(rt, "a")
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")  # the peak RSS starts again from now
    before = _rss_kib("VmRSS")
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        flood = pool.submit(final, rt, "a", "hostile.flood", {"n": 2000})
        assert poll(lambda: flooded.reading_paused), "the runtime kept reading the flood"
        waits = []
        for i in range(20):  # another app, meanwhile
            start = time.monotonic()
            assert result(rt, "p", "probe.echo", {"text": f"p{i}"}) == f"p{i}"
            waits.append(time.monotonic() - start)
        msg = flood.result(timeout=60)
    growth_mib = (_rss_kib("VmHWM") - before) / 1024
    print(f"peak RSS growth {growth_mib:.1f} MiB; other app: max {max(waits) * 1000:.1f} ms")
    assert growth_mib <= 64, growth_mib
    assert max(waits) < 1.0, waits
    # no more than the bound was outstanding, and the worker went with its heartbeat
    assert error_code(msg) == "delivery_interrupted" and reason(msg) == "worker_lost", msg
    assert flooded.dead
    assert result(rt, "a", "hostile.echo", {"text": "a"}) == "a"
    snap = rt.surface("a", SCOPE).get()
    assert snap.revision == 1


# -- capabilities ------------------------------------------------------------------------
def test_a_live_capability_of_another_delivery_sent_with_the_own_id_ends_the_asker(
    open_hostile: Callable[..., Runtime], isolation: str
) -> None:
    """Under `session`, X's capability is in another process: y's handler finds none."""
    rt = open_hostile()
    assert result(rt, "x", "hostile.put", {"secret": "x-secret"}) == 1
    result(rt, "y", "hostile.echo", {"text": "y is up"})
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        parked = park(rt, pool, "x")  # X's delivery is in flight: its capability is live
        msg = final(rt, "y", "hostile.steal_live_own_id", {})
        if isolation == "app":
            assert error_code(msg) == "worker_protocol_error", msg
            found = log_line(rt, "STEAL_OWN:")
            assert found is not None
            report = found
        else:
            assert msg["result"] == "no other delivery in flight", msg
            report = ""
        wake(worker_of(rt, "x"))
        assert parked.result(timeout=30)["result"] == "woke"  # X's delivery was untouched
    assert "x-secret" not in report and "read" not in report and "replaced" not in report
    snap = rt.surface("x", SCOPE).get()
    assert (snap.revision, snap.data) == (1, {"secret": "x-secret"})
    assert rt.surface("y", SCOPE).get().revision == 0
    assert result(rt, "x", "hostile.echo", {"text": "x"}) == "x"
