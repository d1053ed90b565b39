"""Workers: handler outcomes, timeouts, crashes, protocol errors, capability isolation."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from lineup_build.trust import TrustStore
from lineup_runtime_lite import HostSimulator, Runtime, VirtualClock
from lineup_runtime_lite.internals import engine_of
from lineup_runtime_lite.processes.proctree import tree_pids
from lineup_sdk.bridge import READ_CHUNK
from tests.runtime.conftest import APPS, build_app, message, ready


@pytest.fixture()
def rt(store_rt: Runtime) -> Runtime:
    """This module's runtimes (`rt`, `probe`, `pomo`) run on the chosen store engine."""
    return store_rt


def code(msg: Mapping[str, Any]) -> str:
    assert msg["kind"] == "error", msg
    return str(msg["error"]["code"])


@pytest.mark.store
def test_print_in_a_handler_does_not_corrupt_the_bridge(probe: Runtime) -> None:
    ready(probe)
    assert probe.call("e1", "conv", "probe.echo", {"text": "ok"})["result"] == "ok"


@pytest.mark.store
def test_sync_handler_reads_session_data(probe: Runtime) -> None:
    ready(probe)
    probe.call("a1", "conv", "probe.append", {"item": "x"})
    assert probe.call("s1", "conv", "probe.sync_echo", {"text": "t"})["result"] == {
        "text": "t",
        "revision": 1,
    }


@pytest.mark.store
@pytest.mark.parametrize(
    ("method", "params", "expected"),
    [
        ("probe.fail", {"code": "not_found"}, "app.not_found"),
        ("probe.fail", {"code": "Not-Snake"}, "handler_failed"),
        ("probe.boom", {}, "handler_failed"),
        ("probe.bad_result", {}, "handler_result_invalid"),
        ("probe.hang", {}, "handler_timeout"),
    ],
    ids=["tool-error", "tool-error-bad-code", "exception", "bad-result", "timeout"],
)
def test_handler_outcomes(
    probe: Runtime, method: str, params: dict[str, Any], expected: str
) -> None:
    ready(probe)
    msg = probe.call("x", "conv", method, params)
    assert code(msg) == expected
    assert "secret internal detail" not in str(msg)
    assert "Traceback" not in str(msg)
    # the session carries on afterwards
    assert probe.call("after", "conv", "probe.echo", {"text": "still"})["result"] == "still"


@pytest.mark.store
def test_crashed_worker_interrupts_its_delivery_and_restarts(probe: Runtime) -> None:
    ready(probe, "one")
    ready(probe, "two")
    assert code(probe.call("k", "one", "probe.crash", {})) == "delivery_interrupted"
    # other sessions with nothing in flight carry on (the worker restarts on demand)
    assert probe.call("e2", "two", "probe.echo", {"text": "alive"})["result"] == "alive"
    assert probe.call("e1", "one", "probe.echo", {"text": "alive"})["result"] == "alive"


@pytest.mark.store
@pytest.mark.parametrize("method", ["probe.garbage", "probe.stray"])
def test_a_malformed_line_naming_no_delivery_recycles_the_worker(
    probe: Runtime, method: str
) -> None:
    ready(probe)
    pid = engine_of(probe).workers["probe", "1.0.0"].pid
    # the line answers no delivery it names, so its own delivery is only interrupted
    assert code(probe.call("g", "conv", method, {})) == "delivery_interrupted"
    assert probe.call("after", "conv", "probe.echo", {"text": "ok"})["result"] == "ok"
    assert engine_of(probe).workers["probe", "1.0.0"].pid != pid


@pytest.mark.store
def test_the_runtime_reads_its_workers_bridge_in_small_chunks(probe: Runtime) -> None:
    """Not asyncio's 256 KiB per read (a fresh mmap, mremap and munmap each message)."""
    ready(probe)
    worker = engine_of(probe).workers["probe", "1.0.0"]
    assert worker._read_t is not None
    assert getattr(worker._read_t, "max_size", None) == READ_CHUNK
    # a line longer than a read still arrives whole
    text = "x" * (3 * READ_CHUNK)
    assert probe.call("long", "conv", "probe.echo", {"text": text})["result"] == text


@pytest.mark.store
def test_an_oversized_result_is_refused_by_the_worker_itself(probe: Runtime) -> None:
    ready(probe)
    pid = engine_of(probe).workers["probe", "1.0.0"].pid
    assert code(probe.call("h", "conv", "probe.huge", {})) == "handler_result_invalid"
    assert probe.call("after", "conv", "probe.echo", {"text": "ok"})["result"] == "ok"
    assert engine_of(probe).workers["probe", "1.0.0"].pid == pid  # nothing to recycle


@pytest.mark.store
def test_forged_capability_ends_the_delivery(probe: Runtime) -> None:
    ready(probe)
    msg = probe.call("f", "conv", "probe.forge", {"cap": "guessed-capability"})
    assert code(msg) == "worker_protocol_error"
    assert probe.surface("conv", "probe").get().revision == 0
    assert probe.call("after", "conv", "probe.echo", {"text": "ok"})["result"] == "ok"


def test_method_mismatch_fails_the_activation(
    tmp_path: Path, rt_key: Any, trust: TrustStore
) -> None:
    bundle = build_app(APPS / "probe", tmp_path / "probe", rt_key, MISMATCH=True)
    with Runtime.open(
        ":memory:", trust=trust, clock=VirtualClock(), host=HostSimulator("manual")
    ) as rt:
        rt.install(bundle)
        rt.call("m", "conv", "probe.echo", {"text": "x"})
        rt.settle()
        err = message(rt, "m:error")
        assert err["error"]["code"] == "activation_failed"
        assert err["error"]["details"] == {"reason": "method_mismatch"}


def test_poison_worker_fails_activation_after_retries(
    tmp_path: Path, trust: TrustStore, probe_bundle: Path
) -> None:
    db = tmp_path / "rt.db"
    # an explicit worker_env is the one way a variable reaches a worker
    with Runtime.open(
        db, trust=trust, clock=VirtualClock(), worker_env={"PROBE_POISON": "1"}
    ) as rt:
        rt.install(probe_bundle)
        rt.call("p", "conv", "probe.echo", {"text": "x"})
        rt.settle()
        err = message(rt, "p:error")
        assert err["error"]["details"] == {
            "reason": "worker_failed",
            "cause": "RuntimeError: this worker cannot start",
        }
    with Runtime.open(db, trust=trust, clock=VirtualClock()) as rt:
        assert rt.call("p2", "conv", "probe.echo", {"text": "x"})["stage"] == "accepted"
        rt.settle()
        assert [m for m in rt.outbox.all() if m["id"] == "p2:result"]


@pytest.mark.parametrize(
    "options",
    [
        {"sandbox": "paranoid"},
        {"worker_env": {"LINEUP_SIGNING_KEY": "x"}},
        {"worker_env": {"PYTHONPATH": "/tmp"}},
        {"worker_env": {"lower": "x"}},
        {"worker_env": {"OK": 1}},
        {"worker_memory_mb": 1},
        {"worker_heartbeat_s": 0},
    ],
    ids=["mode", "lineup-var", "python-var", "lowercase", "not-a-string", "memory", "heartbeat"],
)
def test_bad_worker_options_are_usage_invalid(trust: TrustStore, options: dict[str, Any]) -> None:
    from lineup_sdk.errors import LineupError

    with pytest.raises(LineupError) as exc:
        Runtime.open(":memory:", trust=trust, clock=VirtualClock(), **options)
    assert exc.value.code == "usage_invalid"


@pytest.mark.store
def test_rt_sandbox_reports_what_the_worker_enforced(probe: Runtime) -> None:
    before = probe.sandbox  # a probe: no worker has started yet
    ready(probe)
    after = probe.sandbox  # what the running worker's launcher reported
    assert after["mode"] == before["mode"] == "best_effort"
    assert set(after) >= {
        *("files", "metadata", "network", "privileges"),
        *("process_tree", "processes", "memory", "tmp"),
    }
    # over the whole tree where a memory cgroup could be made, else per process only
    assert after["memory"] in (
        "memory cgroup v1: 1024 MiB over the tree; data 1024 MiB per process",
        "memory cgroup v2: 1024 MiB over the tree; data 1024 MiB per process",
        "data 1024 MiB per process only (no memory cgroup: not the whole tree)",
    )


@pytest.mark.store
def test_rt_sandbox_reports_the_workers_memory_by_pss_with_rss_beside_it(probe: Runtime) -> None:
    assert probe.sandbox["workers_memory"] is None  # no worker runs yet
    ready(probe)
    used = probe.sandbox["workers_memory"]
    assert used is not None and set(used) == {"workers", "pss_kib", "uss_kib", "rss_kib"}
    assert used["workers"] == 1
    # PSS divides the pages the launcher and its worker share: never above RSS
    assert 0 < used["uss_kib"] <= used["pss_kib"] <= used["rss_kib"], used
    # the whole tree is counted, the launcher outside the PID namespace included
    (worker,) = engine_of(probe).workers.values()
    if probe.sandbox["process_tree"] == "pid namespace":
        assert len(tree_pids(worker.pid)) >= 2
