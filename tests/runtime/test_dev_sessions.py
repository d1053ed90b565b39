"""`move_dev_sessions`: a rebuilt dev build takes over the sessions of the one it replaced
(SPEC 14, the one exception to pinning); session data stays, the next call runs new code."""

from __future__ import annotations

import shutil
from pathlib import Path

from lineup_build.dev import build_with_dev_key
from lineup_runtime_lite import Runtime, VirtualClock

NOTES = Path(__file__).parents[1] / "conformance" / "apps" / "notes"


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
