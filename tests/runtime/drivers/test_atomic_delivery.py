"""Every delivery atomic (SPEC 17): a handler's writes are held by its delivery, `get` reads
them back, and one revision and one frame commit with the delivery's answer — or nothing,
when it fails, times out or is interrupted. On both engines."""

from __future__ import annotations

import dataclasses
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lineup_build.signing import SigningKey
from lineup_build.trust import TrustStore
from lineup_runtime_lite import HostSimulator, Runtime, VirtualClock
from lineup_runtime_lite.internals import engine_of
from lineup_runtime_lite.store import faults
from lineup_sdk.context import Snapshot
from tests.runtime.conftest import build_source_app

pytestmark = pytest.mark.store

ATOMIC = '''
import asyncio
import os
from typing import Any

from lineup_sdk import ToolContext, ToolError, define_agent_tools
from lineup_sdk.errors import LineupError

tools = define_agent_tools(app_scope="atomic")


async def _gate(path: str) -> None:
    while path and not os.path.exists(path):
        await asyncio.sleep(0.01)


async def _append(ctx: ToolContext, item: str) -> Any:
    snap = await ctx.session_data.get()
    items = [*(snap.data or {}).get("items", []), item]
    return await ctx.session_data.replace({"items": items}, expected_revision=snap.revision)


@tools.tool("atomic.echo", activation="app_ready")
async def echo(ctx: ToolContext, text: str) -> str:
    """Echo."""
    return text


@tools.tool("atomic.twice", activation="app_ready", timeout_s=30)
async def twice(ctx: ToolContext, tag: str, gate: str = "") -> dict[str, Any]:
    """Append twice in one delivery, reading its own first write back in between."""
    base = (await ctx.session_data.get()).revision
    first = await _append(ctx, tag + "-1")
    seen = await ctx.session_data.get()
    await _gate(gate)
    second = await _append(ctx, tag + "-2")
    return {
        "base": base,
        "first": first.revision,
        "seen": [seen.revision, seen.data["items"]],
        "second": second.revision,
    }


@tools.tool("atomic.stale", activation="app_ready")
async def stale(ctx: ToolContext, catch: bool) -> str:
    """Write, then write again with the committed revision (stale against the held one)."""
    snap = await ctx.session_data.get()
    await ctx.session_data.replace({"n": 1}, expected_revision=snap.revision)
    try:
        await ctx.session_data.replace({"n": 2}, expected_revision=snap.revision)
    except LineupError as exc:
        if catch:
            return exc.code
        raise
    return "accepted"


@tools.tool("atomic.write_then_refuse", activation="app_ready")
async def write_then_refuse(ctx: ToolContext) -> None:
    """Write, then refuse (a business error)."""
    await _append(ctx, "refused")
    raise ToolError("refused", "no")


@tools.tool("atomic.write_then_fail", activation="app_ready")
async def write_then_fail(ctx: ToolContext) -> None:
    """Write, then raise (a bug)."""
    await _append(ctx, "failed")
    raise RuntimeError("bug")


@tools.tool("atomic.write_then_bad_result", activation="app_ready")
async def write_then_bad_result(ctx: ToolContext) -> int:
    """Write, then answer a result its schema refuses."""
    await _append(ctx, "bad")
    return "not an int"  # type: ignore[return-value]


@tools.tool("atomic.write_then_wait", activation="app_ready", timeout_s=30)
async def write_then_wait(ctx: ToolContext, gate: str) -> str:
    """Write, then stay in flight until `gate` exists (the test kills the worker)."""
    await _append(ctx, "waited")
    await _gate(gate)
    return "released"


@tools.tool("atomic.write_then_linger", activation="app_ready", timeout_s=0.3)
async def write_then_linger(ctx: ToolContext, gate: str) -> str:
    """Write, outlive the timeout until `gate` exists, then write again (late)."""
    snap = await ctx.session_data.get()
    await ctx.session_data.replace({"items": ["early"]}, expected_revision=snap.revision)
    await _gate(gate)
    try:
        await ctx.session_data.replace({"items": ["late"]}, expected_revision=snap.revision)
        print("late replace: accepted", flush=True)
    except LineupError as exc:
        print("late replace: " + exc.code, flush=True)
    return "late"
'''

KEY = ("atomic", "1.0.0")


@pytest.fixture(scope="module")
def atomic_bundle(tmp_path_factory: pytest.TempPathFactory, rt_key: SigningKey) -> Path:
    return build_source_app(tmp_path_factory.mktemp("atomic") / "atomic", "atomic", ATOMIC, rt_key)


@pytest.fixture()
def art(
    db_target: str, trust: TrustStore, clock: VirtualClock, atomic_bundle: Path
) -> Iterator[Runtime]:
    rt = Runtime.open(db_target, trust=trust, clock=clock, host=HostSimulator(policy="manual"))
    try:
        rt.install(atomic_bundle)
        for conv in ("c1", "c2"):
            assert rt.call(f"up-{conv}", conv, "atomic.echo", {"text": "up"})["stage"] == "accepted"
        rt.settle()
        yield rt
    finally:
        faults.disarm()
        rt.close()


class Frames:
    """A Surface subscriber of one conversation's session data."""

    def __init__(self, rt: Runtime, conv: str = "c1") -> None:
        self.rt = rt
        self.seen: list[tuple[str, int]] = []
        rt.surface(conv, "atomic").subscribe(lambda k, s: self.seen.append((k, s.revision)))

    def settled(self) -> list[tuple[str, int]]:
        self.rt.settle()  # listeners run off the loop; settle waits for their frames
        return self.seen


def data(rt: Runtime, conv: str = "c1") -> Snapshot:
    return rt.surface(conv, "atomic").get()


def test_a_handler_writing_twice_commits_one_revision_and_one_frame(art: Runtime) -> None:
    frames = Frames(art)
    out = art.call("t1", "c1", "atomic.twice", {"tag": "a"})
    # the second write checks against the held first one and is still base + 1; the
    # handler's own `get` saw its first write
    assert out["result"] == {"base": 0, "first": 1, "seen": [1, ["a-1"]], "second": 1}
    assert data(art) == Snapshot({"items": ["a-1", "a-2"]}, 1)
    assert frames.settled() == [("session_data.snapshot", 0), ("session_data.changed", 1)]
    out = art.call("t2", "c1", "atomic.twice", {"tag": "b"})
    assert out["result"]["base"] == 1 and out["result"]["second"] == 2
    assert out["result"]["seen"] == [2, ["a-1", "a-2", "b-1"]]
    assert frames.settled()[1:] == [("session_data.changed", 1), ("session_data.changed", 2)]
    assert data(art, "c2") == Snapshot(None, 0)  # another session never saw any of it


def test_nothing_is_visible_before_the_answer(art: Runtime, tmp_path: Path) -> None:
    frames = Frames(art)
    gate = tmp_path / "gate"
    out: dict[str, Any] = {}
    thread = threading.Thread(
        target=lambda: out.setdefault(
            "msg", art.call("t1", "c1", "atomic.twice", {"tag": "a", "gate": str(gate)})
        )
    )
    thread.start()
    try:
        # the handler wrote once and waits at its gate: the delivery holds that write
        _poll(lambda: _holds(art))
        assert data(art) == Snapshot(None, 0)
        assert art.store_dump()["session_data"] == []
        assert frames.seen == [("session_data.snapshot", 0)]  # (no settle: t1 is in flight)
    finally:
        gate.touch()
        thread.join(timeout=60)
    assert out["msg"]["result"]["second"] == 1, out
    assert frames.settled() == [("session_data.snapshot", 0), ("session_data.changed", 1)]


def _holds(rt: Runtime, conv: str = "c1") -> bool:
    """Whether a delivery in flight in `conv` holds a write."""
    grants = list(engine_of(rt).delivery._caps.values())
    return any(g.pending is not None and g.conversation_id == conv for g in grants)


def _in_flight(rt: Runtime, call_id: str, conv: str, method: str, params: Any) -> Any:
    out: dict[str, Any] = {}
    thread = threading.Thread(
        target=lambda: out.setdefault("msg", rt.call(call_id, conv, method, params))
    )
    thread.start()

    def join() -> dict[str, Any]:
        thread.join(timeout=60)
        assert not thread.is_alive()
        msg: dict[str, Any] = out["msg"]
        return msg

    return join


def _poll(cond: Any) -> None:
    """Wait for `cond` (a state the test causes, not a deadline)."""
    event = threading.Event()
    for _ in range(6000):
        if cond():
            return
        event.wait(0.01)
    raise AssertionError("condition never held")


@pytest.mark.parametrize("catch", [True, False], ids=["caught", "raised"])
def test_expected_revision_is_checked_against_the_held_snapshot(art: Runtime, catch: bool) -> None:
    frames = Frames(art)
    out = art.call("t1", "c1", "atomic.stale", {"catch": catch})
    if catch:  # the handler got the usual CAS refusal and answered: its first write stands
        assert out["result"] == "session_data_revision_conflict"
        assert data(art) == Snapshot({"n": 1}, 1)
        assert frames.settled()[-1] == ("session_data.changed", 1)
    else:  # it let the refusal end the delivery: nothing applied
        assert out["error"]["code"] == "session_data_revision_conflict"
        assert data(art) == Snapshot(None, 0)
        assert frames.settled() == [("session_data.snapshot", 0)]


@pytest.mark.parametrize(
    ("method", "code"),
    [
        ("atomic.write_then_refuse", "app.refused"),
        ("atomic.write_then_fail", "handler_failed"),
        ("atomic.write_then_bad_result", "handler_result_invalid"),
    ],
    ids=["tool_error", "exception", "bad_result"],
)
def test_a_failed_delivery_after_a_replace_leaves_nothing(
    art: Runtime, method: str, code: str
) -> None:
    assert art.call("t0", "c1", "atomic.twice", {"tag": "a"})["result"]["second"] == 1
    frames = Frames(art)
    msg = art.call("t1", "c1", method, {})
    assert msg["error"]["code"] == code
    assert data(art) == Snapshot({"items": ["a-1", "a-2"]}, 1)
    assert frames.settled() == [("session_data.snapshot", 1)]
    assert art.call("t1", "c1", method, {}) == msg  # replayed: nothing runs again
    # the session's next delivery starts from the committed data, at the next revision
    assert art.call("t2", "c1", "atomic.twice", {"tag": "b"})["result"]["second"] == 2
    assert data(art).data == {"items": ["a-1", "a-2", "b-1", "b-2"]}
    assert frames.settled()[1:] == [("session_data.changed", 2)]


def test_a_timeout_after_a_replace_leaves_nothing_and_its_late_write_is_refused(
    art: Runtime, tmp_path: Path
) -> None:
    frames = Frames(art)
    # another session's delivery keeps the worker alive while the timed-out one drains
    other_gate, gate, next_gate = tmp_path / "other", tmp_path / "late", tmp_path / "next"
    other = _in_flight(art, "o1", "c2", "atomic.write_then_wait", {"gate": str(other_gate)})
    try:
        _poll(lambda: _holds(art, "c2"))
        msg = art.call("t1", "c1", "atomic.write_then_linger", {"gate": str(gate)})
        assert msg["error"]["code"] == "handler_timeout"
        assert data(art) == Snapshot(None, 0)
        # the session's next delivery runs on a replacement worker while the timed-out
        # handler still drains; it holds a write of its own when the late one is tried
        nxt = _in_flight(art, "t2", "c1", "atomic.twice", {"tag": "n", "gate": str(next_gate)})
        try:
            _poll(lambda: _holds(art, "c1"))
            gate.touch()
            log = engine_of(art).logs_dir / "atomic-1.0.0.log"
            _poll(lambda: log.exists() and "late replace:" in log.read_text(errors="replace"))
            assert "late replace: worker_protocol_error" in log.read_text(errors="replace")
        finally:
            next_gate.touch()
            answered = nxt()
    finally:
        other_gate.touch()
        other()
    # the late write leaked into nothing: the next delivery's answer holds only its own
    assert answered["result"] == {"base": 0, "first": 1, "seen": [1, ["n-1"]], "second": 1}
    assert data(art) == Snapshot({"items": ["n-1", "n-2"]}, 1)
    assert frames.settled() == [("session_data.snapshot", 0), ("session_data.changed", 1)]


def test_a_worker_killed_mid_tool_after_a_replace_applies_nothing_once(
    art: Runtime, tmp_path: Path
) -> None:
    frames = Frames(art)
    gate = tmp_path / "never"
    out: dict[str, Any] = {}
    thread = threading.Thread(
        target=lambda: out.setdefault(
            "msg", art.call("k1", "c1", "atomic.write_then_wait", {"gate": str(gate)})
        )
    )
    thread.start()
    try:
        _poll(lambda: _holds(art))
        pid = engine_of(art).workers[KEY].pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
    finally:
        thread.join(timeout=60)
    msg = out["msg"]
    assert msg["error"]["code"] == "delivery_interrupted"
    assert data(art) == Snapshot(None, 0)
    assert frames.settled() == [("session_data.snapshot", 0)]
    assert art.call("k1", "c1", "atomic.write_then_wait", {"gate": str(gate)}) == msg  # once
    assert [m["stage"] for m in art.outbox.all() if m["call_id"] == "k1"][-1] == "error"
    gate.touch()
    assert art.call("k2", "c1", "atomic.twice", {"tag": "a"})["result"]["second"] == 1


@pytest.mark.parametrize("point", ["commit.before", "commit.after_write"])
def test_a_fault_at_the_answers_commit_leaves_nothing_half_written(
    art: Runtime, point: str
) -> None:
    frames = Frames(art)
    faults.arm(point, after=1)  # 1: the call accepted as delivered; 2: its answer
    msg = art.call("f1", "c1", "atomic.twice", {"tag": "a"})
    # neither the final nor the data of that transaction was kept; the call, delivered
    # once, ends interrupted and is never delivered again
    assert msg["error"]["code"] == "delivery_interrupted"
    assert data(art) == Snapshot(None, 0)
    assert frames.settled() == [("session_data.snapshot", 0)]
    assert art.call("f1", "c1", "atomic.twice", {"tag": "a"}) == msg
    assert art.call("f2", "c1", "atomic.twice", {"tag": "b"})["result"]["second"] == 1
    assert frames.settled()[1:] == [("session_data.changed", 1)]


def test_frames_strictly_increase_one_per_committed_change_across_sessions(
    art: Runtime,
) -> None:
    convs = [f"s{i}" for i in range(5)]
    per_conv = 8
    for conv in convs:
        art.call(f"up-{conv}", conv, "atomic.echo", {"text": "up"})
    art.settle()
    seen: dict[str, list[tuple[str, int, int]]] = {c: [] for c in convs}
    for conv in convs:

        def listener(kind: str, snap: Snapshot, conv: str = conv) -> None:
            seen[conv].append((kind, snap.revision, len((snap.data or {}).get("items", []))))

        art.surface(conv, "atomic").subscribe(listener)

    def writer(conv: str) -> None:
        for n in range(per_conv):
            art.call(f"{conv}-{n}", conv, "atomic.twice", {"tag": f"{conv}{n}"})

    threads = [threading.Thread(target=writer, args=(c,)) for c in convs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    art.settle()
    for conv in convs:
        frames = seen[conv]
        assert frames[0] == ("session_data.snapshot", 0, 0)
        # one frame per delivery, revisions 1..n, each with both of its writes
        assert frames[1:] == [("session_data.changed", r, 2 * r) for r in range(1, per_conv + 1)]
        assert data(art, conv).revision == per_conv
    assert engine_of(art).delivery._held == {}  # every slot a write took was given back


def test_held_snapshots_count_in_the_bridge_flow_bound(art: Runtime, tmp_path: Path) -> None:
    """SPEC 13.3 counts a delivery's pending snapshot: past the worker's bound, a first
    write waits until a delivery holding one is answered (here the bound is 1)."""
    pool = engine_of(art).pool
    pool.options = dataclasses.replace(pool.options, max_requests=1)
    gate = tmp_path / "gate"
    first = _in_flight(art, "h1", "c1", "atomic.write_then_wait", {"gate": str(gate)})
    try:
        _poll(lambda: _holds(art, "c1"))
        second = _in_flight(art, "h2", "c2", "atomic.twice", {"tag": "b"})
        _poll(lambda: bool(engine_of(art).delivery._slot_waiters))  # its first write waits
        assert not _holds(art, "c2")
        assert data(art, "c2") == Snapshot(None, 0)
    finally:
        gate.touch()
    assert first()["result"] == "released"
    assert second()["result"] == {"base": 0, "first": 1, "seen": [1, ["b-1"]], "second": 1}
    assert data(art, "c1") == Snapshot({"items": ["waited"]}, 1)
    assert data(art, "c2") == Snapshot({"items": ["b-1", "b-2"]}, 1)
    assert engine_of(art).delivery._held == {} and engine_of(art).delivery._slot_waiters == {}
