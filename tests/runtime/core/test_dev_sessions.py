"""`move_dev_sessions`: a rebuilt dev build takes over the sessions of the one it replaced
(SPEC 14, the one exception to pinning); session data stays, the next call runs new code."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from lineup_build.dev import build_with_dev_key
from lineup_runtime_lite import Runtime, VirtualClock
from lineup_runtime_lite.core.messages import AgentMessage

NOTES = Path(__file__).parents[2] / "conformance" / "apps" / "notes"


def _edit_count(project: Path) -> None:
    tools = project / "notes_app" / "tools.py"
    text = tools.read_text()
    tools.write_text(text.replace('return len((snap.data or {}).get("notes", []))', "return 1000"))


def test_rebuilt_dev_build_takes_over_sessions(tmp_path: Path) -> None:
    project = tmp_path / "notes"
    shutil.copytree(NOTES, project)
    first = build_with_dev_key(project, out_dir=tmp_path / "b1")
    rt = Runtime.open(tmp_path / "rt.db", trust=first.trust, clock=VirtualClock())
    try:
        rt.install(first.bundle, dev_build=True)
        assert rt.call("a1", "c1", "notes.add", {"text": "one"})["stage"] == "accepted"
        rt.settle()
        assert rt.call("n1", "c1", "notes.count", {})["result"] == 1
        _edit_count(project)
        second = build_with_dev_key(project, out_dir=tmp_path / "b2")
        installed = rt.install(second.bundle, dev_build=True)
        assert installed.version != "1.0.0"
        assert rt.move_dev_sessions("notes") == 1
        [session] = rt.sessions("notes")
        assert session["version"] == installed.version
        assert rt.surface("c1", "notes").get().revision == 1  # session data kept
        assert rt.call("n2", "c1", "notes.count", {})["result"] == 1000  # the new code
        assert rt.move_dev_sessions("notes") == 0  # nothing left to move
    finally:
        rt.close()


def test_a_non_dev_install_never_moves(tmp_path: Path) -> None:
    project = tmp_path / "notes"
    shutil.copytree(NOTES, project)
    first = build_with_dev_key(project, out_dir=tmp_path / "b1")
    rt = Runtime.open(tmp_path / "rt.db", trust=first.trust, clock=VirtualClock())
    try:
        rt.install(first.bundle)
        rt.call("a1", "c1", "notes.add", {"text": "one"})
        rt.settle()
        assert rt.move_dev_sessions("notes") == 0
        assert rt.sessions()[0]["version"] == "1.0.0"
    finally:
        rt.close()


SLOW = '''
import asyncio


@tools.tool("demo.slow", activation="app_ready", timeout_s=60)
async def slow(ctx: ToolContext) -> str:
    """Wait long, then answer."""
    await asyncio.sleep(30)
    return "old"


@tools.tool("demo.fast", activation="app_ready")
async def fast(ctx: ToolContext) -> str:
    """Answer at once."""
    return "ANSWER"
'''


def test_a_call_in_flight_on_the_old_build_ends_delivery_interrupted(
    tmp_path: Path, make_app: Any
) -> None:
    import threading

    app = make_app(SLOW.replace("ANSWER", "old"))
    first = build_with_dev_key(app.root, out_dir=tmp_path / "b1")
    rt = Runtime.open(tmp_path / "rt.db", trust=first.trust, clock=VirtualClock())
    try:
        rt.install(first.bundle, dev_build=True)
        assert rt.call("f1", "c1", "demo.fast", {})["stage"] == "accepted"
        rt.settle()
        answers: list[AgentMessage] = []
        caller = threading.Thread(
            target=lambda: answers.append(rt.call("s1", "c1", "demo.slow", {}))
        )
        caller.start()
        # a ready session's call is committed `delivered` with its acceptance: once its
        # record exists, the old build's worker is running it
        for _ in range(500):
            record = rt.call_record("s1")
            if record is not None:
                break
            threading.Event().wait(0.01)
        tools = app.root / "demo_app" / "tools.py"
        tools.write_text(tools.read_text().replace('return "old"\n', 'return "new"\n'))
        second = build_with_dev_key(app.root, out_dir=tmp_path / "b2")
        rt.install(second.bundle, dev_build=True)
        assert rt.move_dev_sessions("demo") == 1
        caller.join(30)
        assert not caller.is_alive()
        assert answers[0]["error"]["code"] == "delivery_interrupted"
        assert rt.call("f2", "c1", "demo.fast", {})["result"] == "new"
    finally:
        rt.close()


# -- the rebuild's one decision (round-3 gaps, issue 34) -------------------------------------
def _rows() -> tuple[Any, Any, Any]:
    from lineup_runtime_lite.core.rows import Call, Session

    pinned = Session("ses_pinned", "c1", "notes", "1.0.0", 2)  # a normal install
    dev = Session("ses_dev", "c2", "notes", "1.0.0+dev.aaa", 2)
    delivered = Call(
        "slow1", "fp", "c2", "notes", "notes.add", "{}", "ses_dev", "inst2", 1, "delivered"
    )
    return pinned, dev, delivered


def test_a_session_pinned_to_a_normal_install_never_moves_onto_the_dev_build() -> None:
    # catches: `or session.version not in dev_builds` dropped in deliveries.move_dev_sessions
    from lineup_runtime_lite.core.decisions import MoveSession
    from lineup_runtime_lite.core.deliveries import move_dev_sessions

    pinned, dev, _ = _rows()
    decision = move_dev_sessions(
        [pinned, dev], {}, {"1.0.0+dev.aaa", "1.0.0+dev.bbb"}, "1.0.0+dev.bbb", 5_000
    )
    assert decision is not None
    moves = [c for c in decision.changes if isinstance(c, MoveSession)]
    assert moves == [MoveSession("ses_dev", "1.0.0+dev.aaa", "1.0.0+dev.bbb")]
    assert decision.kick == ("ses_dev",)
    # only a normal install left: nothing to decide at all
    assert move_dev_sessions([pinned], {}, {"1.0.0+dev.bbb"}, "1.0.0+dev.bbb", 5_000) is None


def test_the_in_flight_delivery_ends_in_the_same_decision_as_the_move() -> None:
    # catches: the `changes.extend(_final(...))` of a delivered call dropped (the call then
    # ends only when the killed worker's loss is noticed, in another decision, or never)
    from lineup_runtime_lite.core.decisions import MoveSession, NewReceipt
    from lineup_runtime_lite.core.deliveries import move_dev_sessions

    pinned, dev, delivered = _rows()
    decision = move_dev_sessions(
        [pinned, dev],
        {"ses_dev": [delivered], "ses_pinned": []},
        {"1.0.0+dev.aaa", "1.0.0+dev.bbb"},
        "1.0.0+dev.bbb",
        5_000,
    )
    assert decision is not None
    kinds = [type(c) for c in decision.changes]
    assert MoveSession in kinds
    [receipt] = [c for c in decision.changes if isinstance(c, NewReceipt)]
    assert receipt.message["call_id"] == "slow1"
    assert receipt.message["stage"] == "error"
    assert receipt.message["error"]["code"] == "delivery_interrupted"
