"""The dev Host's state behind the page (issue 41), without a browser: a call refused
before acceptance gets its timeline entry; a failed build is kept with each problem's file
and line until a build succeeds, and the calls answered meanwhile name the last good
build; a session says what its start waits for (`waiting_for`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lineup_build.init import init_project
from lineup_runtime_lite import VirtualClock


@pytest.fixture()
def dev(tmp_path: Path) -> Iterator[Any]:
    from lineup_runtime_lite.web import open_dev

    init_project(tmp_path / "todo", template="todo")
    session = open_dev(tmp_path / "todo", db=tmp_path / "d.db", watch=False)
    try:
        yield session
    finally:
        session.close()


def _agent(host: Any) -> list[dict[str, Any]]:
    return [e for e in host.state()["timeline"] if e["source"] == "agent"]


def test_a_call_refused_before_acceptance_is_in_the_timeline(dev: Any) -> None:
    answer = dev.host.call("dev", "todo.add", {"title": ""})
    assert answer["error"]["code"] == "invalid_params"
    [entry] = _agent(dev.host)
    assert entry["rejected"] is True and entry["call_id"] == answer["call_id"]
    assert entry["method"] == "todo.add" and entry["origin"] == "agent"
    assert entry["error"]["details"][0]["path"] == "/title"
    accepted = dev.host.call("dev", "todo.add", {"title": "milk"})
    dev.rt.settle()
    dev.host.poll()
    mine = [e for e in _agent(dev.host) if e["call_id"] == accepted["call_id"]]
    assert mine and not any(e.get("rejected") for e in mine)  # stored answers: not rejected


def test_a_failed_build_stands_until_a_build_succeeds(dev: Any) -> None:
    tools = dev.project / "todo_app" / "tools.py"
    good = tools.read_text()
    tools.write_text(good + "\ndef broken(:\n")
    from lineup_sdk.errors import LineupError

    with pytest.raises(LineupError) as failed:
        dev.host.rebuilt()
    entry = dev.host.build_failed(failed.value)
    state = dev.host.state()
    failure = state["build_failure"]
    assert failure is not None and failure["running"] == 1 and entry["action"] == "failed"
    [problem] = failure["problems"]
    assert problem["file"] == "todo_app/tools.py" and problem["line"] == len(good.splitlines()) + 2
    assert "SyntaxError" in problem["message"] and problem["code"] == "entry_import_failed"
    dev.host.call("dev", "todo.add", {"title": "meanwhile"})
    dev.rt.settle()
    dev.host.poll()
    final = [e for e in _agent(dev.host) if e["stage"] == "result"][-1]
    assert final["build"] == 1 and final["last_good"] is True
    tools.write_text(good.replace("count=len(items))", "count=len(items) + 1)"))
    done = dev.host.rebuilt()
    state = dev.host.state()
    assert state["build_failure"] is None and state["build"] == 2 == done["build"]
    assert state["version"].startswith("1.0.0+dev")
    dev.host.call("dev", "todo.add", {"title": "after"})
    dev.rt.settle()
    dev.host.poll()
    final = [e for e in _agent(dev.host) if e["stage"] == "result"][-1]
    assert final["build"] == 2 and "last_good" not in final


def test_a_session_says_what_its_start_waits_for(tmp_path: Path) -> None:
    from lineup_runtime_lite.web import open_dev

    init_project(tmp_path / "pomodoro", template="pomodoro")
    session = open_dev(
        tmp_path / "pomodoro", db=tmp_path / "p.db", watch=False, clock=VirtualClock()
    )
    try:
        session.host.call("dev", "pomodoro.start", {"minutes": 5})
        session.rt.settle()
        [s] = session.rt.sessions()
        assert s["state"] == "starting" and s["waiting_for"] == "foreground"
        session.host.panel("confirm", s["instance"])
        session.rt.settle()
        [s] = session.rt.sessions()
        assert s["state"] == "ready" and s["waiting_for"] is None
    finally:
        session.close()


def test_a_large_result_is_kept_in_the_timeline_as_its_size_and_a_preview(dev: Any) -> None:
    from lineup_runtime_lite.internals import TIMELINE_PREVIEW_CHARS, TIMELINE_RESULT_BYTES

    for i in range(90):
        dev.host.call("dev", "todo.add", {"title": f"{i:03d}" + "x" * 197})
    listed = dev.host.call("dev", "todo.list", {})
    dev.rt.settle()
    dev.host.poll()
    whole = dev.rt.outbox.all()[-1]  # the final (a receipt may come before it, under load)
    assert whole["call_id"] == listed["call_id"] and len(whole["result"]["items"]) == 90
    [entry] = [
        e
        for e in _agent(dev.host)
        if e["call_id"] == listed["call_id"] and e.get("stage") == "result"
    ]
    kept = entry["result"]["truncated"]
    assert kept["bytes"] > TIMELINE_RESULT_BYTES
    assert len(kept["preview"]) == TIMELINE_PREVIEW_CHARS
    assert kept["preview"].startswith('{"items":[{"done":false,')
    # a small result stays whole
    added = [e for e in _agent(dev.host) if e.get("stage") == "result" and "item" in e["result"]]
    assert len(added) == 90 and added[0]["result"]["item"]["title"].startswith("000")
