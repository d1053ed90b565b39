"""`lineup dev` tells the author what happened (issue 41), in headless Chromium: a failed
build in the page with its file, line and message while the last good build answers (and
says so), then repaired; the console's answer box following a call to its final; a call
refused before acceptance in the timeline; the instance's state with what to do (waiting
for foreground); structured timeline entries; the params form and the JSON in step; the
first screen's empty state."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _console_call(page: Any, tool: str, params: dict[str, Any] | None = None) -> None:
    page.get_by_test_id("lineup-console-tool").select_option(tool)
    if params is not None:
        page.get_by_test_id("lineup-console-params").fill(json.dumps(params))
    page.get_by_test_id("lineup-console-call").click()


def test_a_broken_build_shows_in_the_page_and_the_last_good_build_answers(
    lineup_dev: Callable[..., Any], template_project: Callable[[str], Path]
) -> None:
    project = template_project("todo")
    dev = lineup_dev(project)
    page = dev.page
    build = page.get_by_test_id("lineup-build")
    build.filter(has_text="build 1 · 1.0.0").wait_for()
    failure = page.get_by_test_id("lineup-build-failure")
    assert failure.is_hidden()
    tools = project / "todo_app" / "tools.py"
    good = tools.read_text()
    broken_line = len(good.splitlines()) + 3
    tools.write_text(good + "\n\ndef broken(:\n")
    failure.wait_for(state="visible", timeout=20_000)
    problem = page.get_by_test_id("lineup-build-problem").first
    assert problem.locator(".where").inner_text() == f"todo_app/tools.py:{broken_line}"
    assert "SyntaxError" in problem.inner_text()
    assert "Calls still run build 1, the last good one" in failure.inner_text()
    build.filter(has_text="build 1 (last good)").wait_for()
    timeline = page.get_by_test_id("lineup-timeline")
    failed = timeline.locator("li[data-action=failed]")
    failed.wait_for()
    assert f"todo_app/tools.py:{broken_line}" in failed.inner_text()
    assert "build 1 keeps running" in failed.inner_text()
    # a call now is answered by the running build, and labelled so
    _console_call(page, "todo.add", {"title": "still works"})
    head = page.get_by_test_id("lineup-console-answer-head")
    head.filter(has_text="answered by build 1 (the last good one)").wait_for(timeout=20_000)
    assert head.get_attribute("data-final") == "true"
    # repaired: the failure goes, build 2 runs
    tools.write_text(good.replace("count=len(items))", "count=len(items) + 1000)"))
    build.filter(has_text="build 2 · 1.0.0+dev").wait_for(timeout=20_000)
    failure.wait_for(state="hidden")
    assert build.get_attribute("data-last-good") == "false"
    _console_call(page, "todo.add", {"title": "new code"})
    head.filter(has_text="answered by build 2").wait_for(timeout=20_000)
    assert '"count": 1002' in page.get_by_test_id("lineup-console-answer").inner_text()


def test_the_answer_box_follows_a_call_to_its_final_and_the_foreground_wait_is_named(
    lineup_dev: Callable[..., Any], template_project: Callable[[str], Path]
) -> None:
    from lineup_runtime_lite import VirtualClock

    clock = VirtualClock()
    dev = lineup_dev(template_project("pomodoro"), clock=clock)
    page = dev.page
    _console_call(page, "pomodoro.start", {"minutes": 5})
    head = page.get_by_test_id("lineup-console-answer-head")
    head.filter(has_text="(latest; the final follows)").wait_for()
    assert head.get_attribute("data-final") == "false"
    state = page.get_by_test_id("lineup-instance-state")
    state.filter(has_text="Waiting for foreground").wait_for(timeout=20_000)
    assert state.get_attribute("data-state") == "waiting"
    assert "Press Confirm foreground" in state.inner_text()
    instance = page.get_by_test_id("lineup-instance").first
    assert "waiting for foreground" in instance.inner_text()
    dev.press("confirm")
    state.filter(has_text="Ready").wait_for(timeout=20_000)
    head.filter(has_text=": started (latest").wait_for(timeout=20_000)
    assert '"ends_at"' in page.get_by_test_id("lineup-console-answer").inner_text()
    clock.advance(5 * 60_000)
    head.filter(has_text="final result").wait_for(timeout=20_000)
    assert head.get_attribute("data-final") == "true"
    answer = json.loads(page.get_by_test_id("lineup-console-answer").inner_text())
    assert answer["stage"] == "result" and answer["result"]["status"] == "completed"


def test_a_rejected_call_and_an_ignored_host_event_are_in_the_timeline_explained(
    lineup_dev: Callable[..., Any], template_project: Callable[[str], Path]
) -> None:
    dev = lineup_dev(template_project("todo"))
    page = dev.page
    timeline = page.get_by_test_id("lineup-timeline")
    _console_call(page, "todo.add", {"title": ""})
    rejected = timeline.locator("li[data-rejected=true]")
    rejected.wait_for(timeout=20_000)
    text = rejected.inner_text()
    assert "invalid_params" in text and "/title" in text and "todo.add" in text
    assert "refused before it was accepted; nothing ran" in text
    assert rejected.get_attribute("data-origin") == "agent"
    # structured: each entry in labelled parts, never one raw line
    parts = rejected.evaluate("li => [...li.children].map((c) => c.className)")
    assert re.match(r"\d\d:\d\d:\d\d\.\d{3} agent dev-\S+ todo\.add rejected invalid_params", text)
    assert parts[:5] == ["at", "origin", "who", "what", "detail"]
    assert rejected.locator(".what").inner_text() == "rejected"
    # a call from a real MCP client refused the same way reaches the timeline too
    from tests.web.dev_host_kit import _mcp_call, _run

    urls, token = dev.server.urls, dev.server.host.host_token
    refused = _run(_mcp_call, urls.mcp_url, token, "todo-add", {"title": ""})
    assert refused.is_error
    from_mcp = timeline.locator("li[data-rejected=true]", has_text="mcp_")
    from_mcp.wait_for(timeout=20_000)
    assert "todo.add" in from_mcp.inner_text() and "invalid_params" in from_mcp.inner_text()
    # a Host event that finds nothing waiting says why it was ignored
    _console_call(page, "todo.add", {"title": "milk"})
    page.get_by_test_id("lineup-console-answer-head").filter(has_text="final result").wait_for(
        timeout=20_000
    )
    dev.surface()
    dev.press("confirm")  # app_ready: already ready, nothing waits for the Host
    ignored = timeline.locator(
        "li[data-origin=host][data-applied=false]", has_text="foreground_confirmed"
    )
    ignored.wait_for()
    assert "ignored: no start of this instance was waiting for it" in ignored.inner_text()
    assert "(ignored)" not in timeline.inner_text()
    # list numbers have room from 10 on (the markers sit in the list's left padding)
    room = timeline.evaluate(
        "ol => parseFloat(getComputedStyle(ol).paddingLeft) / parseFloat(getComputedStyle(ol).fontSize)"
    )
    assert room >= 4  # "1000." in a 12px monospace font


def test_the_form_and_the_json_stay_in_step_and_the_json_wins_visibly(
    lineup_dev: Callable[..., Any], template_project: Callable[[str], Path]
) -> None:
    dev = lineup_dev(template_project("todo"))
    page = dev.page
    page.get_by_test_id("lineup-console-tool").select_option("todo.add")
    title = page.get_by_test_id("lineup-console-param-title")
    params = page.get_by_test_id("lineup-console-params")
    title.fill("buy milk")
    assert json.loads(params.input_value()) == {"title": "buy milk"}
    params.fill('{"title": "call Ada", "extra": [1, 2]}')
    assert title.input_value() == "call Ada"  # JSON → form
    title.fill("call Bob")
    assert json.loads(params.input_value()) == {"title": "call Bob", "extra": [1, 2]}
    params.fill('{"title": 5}')  # not a string: the JSON wins, and the field says so
    assert title.get_attribute("data-json-wins") == "true"
    assert "set in the JSON: 5" in (title.get_attribute("title") or "")
    params.fill('{"title": ')  # invalid: the form waits, visibly, and nothing is lost
    error = page.get_by_test_id("lineup-console-params-error")
    error.wait_for(state="visible")
    assert "not valid" in error.inner_text() and title.is_disabled()
    assert params.input_value() == '{"title": '
    params.fill('{"title": "ok"}')
    error.wait_for(state="hidden")
    assert title.is_enabled() and title.input_value() == "ok"


def test_the_first_screen_says_what_to_try_first(
    lineup_dev: Callable[..., Any], template_project: Callable[[str], Path]
) -> None:
    dev = lineup_dev(template_project("todo"))
    empty = dev.page.get_by_test_id("lineup-empty")
    empty.wait_for()
    text = empty.inner_text()
    assert "Nothing running yet" in text
    assert re.search(r"pick todo\.\w+", text) and "Press Call" in text
    _console_call(dev.page, "todo.add", {"title": "first"})
    dev.surface()
    assert dev.page.get_by_test_id("lineup-empty").count() == 0
