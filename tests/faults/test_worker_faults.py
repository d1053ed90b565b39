"""Worker faults (SPEC 5.7): a handler that hangs, exits its process, writes garbage,
sends an oversized message or answers a call it was not given. The runtime stays up, the
affected calls get stable codes, other apps and idle sessions carry on."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from lineup_runtime_lite import Runtime
from lineup_runtime_lite.internals import engine_of
from lineup_sdk.context import Snapshot
from tests.faults import invariants
from tests.faults.harness import final, host_event, stages, wait_for

pytestmark = pytest.mark.store

FLAKY = ("flaky", "1.0.0")


@pytest.fixture()
def mixed(
    rt: Runtime,
    flaky_bundle: Path,
    probe_bundle: Path,
    todo_bundle: Path,
    pomodoro_bundle: Path,
) -> Runtime:
    """Four apps in one runtime, each already running in some conversation."""
    for bundle in (flaky_bundle, probe_bundle, todo_bundle, pomodoro_bundle):
        rt.install(bundle)
    for conv in ("victim", "bystander", "idle"):
        rt.call(f"up-{conv}", conv, "flaky.echo", {"text": "up"})
    rt.call("up-probe", "other", "probe.echo", {"text": "up"})
    rt.call("up-todo", "other", "todo.add", {"title": "keep me"})
    rt.call("focus", "other", "pomodoro.start", {"minutes": 25})
    rt.settle()
    assert host_event(rt, "foreground_confirmed", "other", "pomodoro")
    assert rt.call("i1", "idle", "flaky.append", {"item": "i1"})["result"] == 1
    return rt


def in_flight(rt: Runtime, call_id: str, conv: str, method: str, params: dict[str, Any]) -> Any:
    """Start a call on another thread and return once the worker has it."""
    out: dict[str, Any] = {}
    thread = threading.Thread(
        target=lambda: out.setdefault("msg", rt.call(call_id, conv, method, params))
    )
    thread.start()
    wait_for(rt, "SELECT 1 FROM calls WHERE call_id=? AND state='delivered'", (call_id,))

    def join() -> dict[str, Any]:
        thread.join(timeout=60)
        assert not thread.is_alive()
        msg: dict[str, Any] = out["msg"]
        return msg

    return join


# A bad bridge line fails the worker (SPEC 8): the delivery it names ends
# `worker_protocol_error`; every other in-flight delivery, and the one a line that names
# none came from, ends `delivery_interrupted` (at most once holds).
CASES = [
    ("flaky.exit", "delivery_interrupted", "delivery_interrupted"),
    ("flaky.garbage", "delivery_interrupted", "delivery_interrupted"),
    ("flaky.huge", "delivery_interrupted", "delivery_interrupted"),
    ("flaky.stray", "delivery_interrupted", "delivery_interrupted"),
    ("flaky.malformed", "worker_protocol_error", "delivery_interrupted"),
    ("flaky.unknown", "worker_protocol_error", "delivery_interrupted"),
    ("flaky.hang", "handler_timeout", None),  # the worker lives on: the bystander finishes
]


@pytest.mark.parametrize(
    ("method", "code", "bystander_code"), CASES, ids=[c[0].split(".")[1] for c in CASES]
)
def test_worker_fault_is_contained(
    mixed: Runtime, tmp_path: Path, method: str, code: str, bystander_code: str | None
) -> None:
    rt = mixed
    worker = engine_of(rt).workers[FLAKY]
    pid = worker.pid
    release = tmp_path / "release"
    join = in_flight(rt, "b1", "bystander", "flaky.wait", {"path": str(release)})

    msg = rt.call("v1", "victim", method, {})
    assert msg["kind"] == "error" and msg["error"]["code"] == code
    assert "Traceback" not in str(msg)

    release.touch()
    bystander = join()
    if bystander_code is None:
        assert bystander["result"] == "released"
        assert engine_of(rt).workers[FLAKY].pid == pid  # still the same worker
    else:  # a dead worker fails every other delivery it had in flight
        assert bystander["error"]["code"] == bystander_code
        assert worker.dead
    # the same app's session with nothing in flight carries on, its data intact, with no
    # new activation (the worker restarts on demand)
    assert rt.call("i2", "idle", "flaky.append", {"item": "i2"})["result"] == 2
    assert stages(rt, "i2") == ["result"]
    assert rt.surface("idle", "flaky").get().data == {"items": ["i1", "i2"]}
    # the victim's session too
    assert rt.call("v2", "victim", "flaky.echo", {"text": "again"})["result"] == "again"
    # other apps never noticed
    assert rt.call("p2", "other", "probe.echo", {"text": "fine"})["result"] == "fine"
    assert len(rt.call("t2", "other", "todo.list", {})["result"]["items"]) == 1
    assert rt.surface("other", "pomodoro").operations()[0]["state"] == "focusing"
    # a retried faulty call replays its stored final; nothing runs again
    assert rt.call("v1", "victim", method, {}) == msg
    assert final(rt, "v1") == msg
    invariants.check(rt)


def test_handler_that_writes_then_exits_applied_nothing_once(mixed: Runtime) -> None:
    rt = mixed
    msg = rt.call("x1", "idle", "flaky.append_then_exit", {"item": "x1"})
    assert msg["error"]["code"] == "delivery_interrupted"
    # its write was held by the delivery, never committed (SPEC 17): nothing was applied,
    # and the call is never delivered again
    assert rt.surface("idle", "flaky").get() == Snapshot({"items": ["i1"]}, 1)
    assert rt.call("x1", "idle", "flaky.append_then_exit", {"item": "x1"}) == msg
    assert rt.surface("idle", "flaky").get().revision == 1
    # the session's next delivery starts from the committed data
    assert rt.call("x2", "idle", "flaky.append", {"item": "x2"})["result"] == 2
    assert rt.surface("idle", "flaky").get().data == {"items": ["i1", "x2"]}
    invariants.check(rt)


def test_many_worker_faults_in_a_row_leave_the_runtime_up(mixed: Runtime) -> None:
    rt = mixed
    for i, (method, code, _) in enumerate(CASES * 2):
        assert rt.call(f"f{i}", "victim", method, {})["error"]["code"] == code
    assert rt.call("ok", "idle", "flaky.append", {"item": "i2"})["result"] == 2
    invariants.check(rt)
