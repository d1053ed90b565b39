"""`lineup dev` in headless Chromium (SPEC 14): the Host page and its token, the todo Surface
updating live from an `/mcp` call, the Host panel's foreground confirmation and the pomodoro
countdown, a Surface's limits, and an edit that changes the next call's answer."""

from __future__ import annotations

import json
import os
import re
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.web.dev_host_kit import _mcp_call, _run

SCREENSHOT = Path(__file__).parents[2] / "docs" / "images" / "dev-host.png"


def _get(url: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, exc.read().decode()


def test_host_page_needs_its_token_and_refuses_foreign_origins(
    lineup_dev: Callable[..., Any], template_project: Callable[[str], Path]
) -> None:
    dev = lineup_dev(template_project("todo"))
    page, urls = dev.page, dev.server.urls
    # the page opened with /?token= lands on / with the token as an HttpOnly cookie only
    assert page.url == urls.host_origin + "/"
    for testid in ("lineup-console-tool", "lineup-console-params", "lineup-console-call"):
        assert page.get_by_test_id(testid).count() == 1
    [cookie] = page.context.cookies()
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert page.evaluate("document.cookie") == ""
    assert _get(urls.host_origin + "/")[0] == 401
    assert _get(urls.host_origin + "/_lineup/api/state")[0] == 401
    assert _get(urls.host_origin + "/?token=wrong")[0] == 401
    token = dev.server.host.host_token
    cookie_header = {"Cookie": f"lineup_dev_token={token}"}
    assert _get(urls.host_origin + "/", cookie_header)[0] == 200
    foreign = {**cookie_header, "Origin": "http://evil.example"}
    assert _get(urls.host_origin + "/_lineup/api/state", foreign)[0] == 403
    rebinding = {**cookie_header, "Host": "evil.example"}
    assert _get(urls.host_origin + "/_lineup/api/state", rebinding)[0] == 403
    # the Surface origin: the SDK for opaque-origin frames (CORS), its Host header checked
    sdk_js = urllib.request.urlopen(urls.surface_origin + "/_lineup/sdk.js", timeout=10)
    with sdk_js:
        assert sdk_js.headers["access-control-allow-origin"] == "*"
    assert _get(urls.surface_origin + "/_lineup/sdk.js", {"Host": "evil.example"})[0] == 403
    assert _get(urls.surface_origin + "/s/not-a-token/index.html")[0] == 401
    # without LINEUP_DEV_FAULTS=1 there is no fault seam
    req = urllib.request.Request(
        urls.host_origin + "/_lineup/api/fault",
        data=b'{"fault": "reconnect"}',
        headers={**cookie_header, "content-type": "application/json"},
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(req, timeout=10)
    with refused.value:
        assert refused.value.code == 404


def test_mcp_call_updates_the_todo_surface_live_with_no_click(
    lineup_dev: Callable[..., Any], template_project: Callable[[str], Path]
) -> None:
    dev = lineup_dev(template_project("todo"))
    urls, token = dev.server.urls, dev.server.host.host_token
    # app_ready: the worker handshake is its readiness, so no Host panel click is needed
    result = _run(_mcp_call, urls.mcp_url, token, "todo-add", {"title": "buy milk"})
    assert not result.is_error, result
    assert result.structured_content["count"] == 1
    frame = dev.surface()
    frame.wait_for_selector('[data-testid="todo-item"]', timeout=10_000)
    assert "buy milk" in frame.inner_text('[data-testid="todo-items"]')
    frame.evaluate("window.__before = true")
    second = _run(_mcp_call, urls.mcp_url, token, "todo-add", {"title": "call Ada"})
    assert not second.is_error
    frame.wait_for_function(
        "() => document.querySelectorAll('[data-testid=todo-item]').length === 2", timeout=10_000
    )
    assert frame.evaluate("window.__before === true")  # live, without a reload
    # /mcp keeps serve's checks: no bearer token, no call
    assert _get(urls.mcp_url)[0] == 401
    if os.environ.get("LINEUP_REGEN_SCREENSHOT") == "1":
        dev.page.get_by_test_id("lineup-timeline").locator("li[data-stage=result]").nth(
            1
        ).wait_for()
        dev.page.screenshot(path=str(SCREENSHOT), full_page=True)


def test_foreground_call_waits_for_the_panel_and_the_countdown_moves(
    lineup_dev: Callable[..., Any], template_project: Callable[[str], Path]
) -> None:
    dev = lineup_dev(template_project("pomodoro"))
    page = dev.page
    page.get_by_test_id("lineup-console-tool").select_option("pomodoro.start")
    page.get_by_test_id("lineup-console-params").fill('{"minutes": 25}')
    page.get_by_test_id("lineup-console-call").click()
    page.get_by_test_id("lineup-console-answer").filter(has_text="starting").wait_for()
    frame = dev.surface()
    frame.wait_for_selector('[data-testid="pomodoro-state"]')
    timeline = page.get_by_test_id("lineup-timeline")
    timeline.locator("li[data-stage=accepted]").wait_for()
    # Surface loaded (its sdk.host.ready()) is not confirmation: nothing starts yet
    timeline.locator("li", has_text="surface_loaded").wait_for()
    assert timeline.locator("li[data-stage=started]").count() == 0
    assert dev.server.rt.surface("dev", "pomodoro").operations() == []
    dev.press("confirm")
    timeline.locator("li[data-stage=started]").wait_for(timeout=10_000)
    frame.get_by_test_id("pomodoro-state").filter(has_text="Focusing").wait_for(timeout=10_000)
    countdown = frame.get_by_test_id("pomodoro-countdown")
    first = countdown.inner_text()
    assert re.fullmatch(r"2[45]:\d\d", first), first
    frame.wait_for_function(
        "(t) => document.querySelector('[data-testid=pomodoro-countdown]').textContent !== t",
        arg=first,
        timeout=5_000,
    )


SURFACE_TRIES = """
async ({ hostOrigin, otherToken, hostToken }) => {
  const { sdk, LineupError } = await import("/_lineup/sdk.js");
  const out = { origin: self.origin, app: sdk.app };
  try { out.cookie = document.cookie; } catch (err) { out.cookie = err.name; }
  async function attempt(url, init) {
    try {
      const r = await fetch(url, init);
      return r.status;
    } catch (err) {
      return "blocked";
    }
  }
  out.state = await attempt(hostOrigin + "/_lineup/api/state", { credentials: "include" });
  out.mcp = await attempt(hostOrigin + "/mcp", {
    method: "POST", headers: { authorization: "Bearer " + hostToken }, body: "{}",
  });
  out.otherApp = await attempt("/_lineup/app?token=" + otherToken);
  out.hostTokenApp = await attempt("/_lineup/app?token=" + hostToken);
  out.socket = await new Promise((resolve) => {
    const ws = new WebSocket(location.origin.replace("http", "ws") + "/_lineup/bridge?token=" + otherToken);
    ws.onopen = () => resolve("open");
    ws.onerror = () => resolve("refused");
  });
  try {
    await sdk.sessionData.replace({ items: [] }, { expectedRevision: 1 });
    out.replace = "written";
  } catch (err) {
    out.replace = err instanceof LineupError ? err.code : String(err);
  }
  return out;
}
"""


def test_a_surface_cannot_reach_the_host_another_session_or_mcp(
    lineup_dev: Callable[..., Any], template_project: Callable[[str], Path]
) -> None:
    dev = lineup_dev(template_project("todo"))
    dev.call("todo.add", {"title": "mine"}, conversation="dev")
    dev.call("todo.add", {"title": "theirs"}, conversation="other")
    dev.server.rt.settle()
    sessions = {s["conversation_id"]: s for s in dev.server.rt.sessions()}
    other = dev.server.host.surface_token(sessions["other"]["instance"])
    frame = dev.select("dev", sessions["dev"]["instance"])
    frame.wait_for_selector('[data-testid="todo-item"]')
    tried = frame.evaluate(
        SURFACE_TRIES,
        {
            "hostOrigin": dev.server.urls.host_origin,
            "otherToken": ("y" if other.token[0] == "x" else "x") + other.token[1:],
            "hostToken": dev.server.host.host_token,
        },
    )
    # sandboxed: an opaque origin with no cookie jar at all
    assert tried["cookie"] == "SecurityError" and tried["origin"] == "null"
    assert tried["app"]["conversationId"] == "dev"
    assert tried["state"] == "blocked" and tried["mcp"] == "blocked"  # CSP: never sent
    assert tried["otherApp"] == 401 and tried["hostTokenApp"] == 401
    assert tried["socket"] == "refused"
    assert tried["replace"] == "session_data_write_not_allowed"
    assert "theirs" not in frame.inner_text('[data-testid="todo-items"]')
    # even without the CSP: the server refuses what a Surface origin page could send
    surface_token = dev.server.host.surface_token(sessions["dev"]["instance"]).token
    assert _get(dev.server.urls.mcp_url, {"Origin": "null"})[0] == 401
    assert (
        _get(
            dev.server.urls.host_origin + "/_lineup/api/state",
            {"Origin": "null", "Authorization": f"Bearer {surface_token}"},
        )[0]
        == 403
    )
    # the bridge allows get, subscribe and ready only: no tool calls, no Host events
    answers = _run(_bridge_ops, dev.server.urls.surface_origin, surface_token)
    assert answers == ["usage_invalid", "usage_invalid"]


async def _bridge_ops(origin: str, token: str) -> list[str]:
    import websockets
    from websockets.typing import Origin

    url = origin.replace("http", "ws") + f"/_lineup/bridge?token={token}"
    out = []
    async with websockets.connect(url, origin=Origin("null")) as ws:  # a sandboxed frame
        for i, op in enumerate(("call", "host"), start=1):
            await ws.send(json.dumps({"id": i, "op": op, "method": "todo.add"}))
            out.append(json.loads(await ws.recv())["error"]["code"])
    return out


def test_editing_a_handler_changes_the_next_answer_and_reloads_the_surface(
    lineup_dev: Callable[..., Any], template_project: Callable[[str], Path]
) -> None:
    project = template_project("todo")
    dev = lineup_dev(project)
    first = dev.call("todo.add", {"title": "one"})
    dev.server.rt.settle()
    assert first["stage"] in ("accepted", "result")
    frame = dev.surface()
    frame.wait_for_selector('[data-testid="todo-item"]')
    tools = project / "todo_app" / "tools.py"
    text = tools.read_text()
    assert "return Added(item=Item(**item), count=len(items))" in text
    frame.evaluate("window.__before = true")
    tools.write_text(text.replace("count=len(items))", "count=len(items) + 1000)"))
    dev.page.get_by_test_id("lineup-build").filter(has_text="build 2").wait_for(timeout=20_000)
    answer = dev.call("todo.add", {"title": "two"})
    assert answer["stage"] == "result" and answer["result"]["count"] == 1002
    [session] = dev.server.rt.sessions()
    assert "+dev." in session["version"]
    assert dev.server.rt.surface("dev", "todo").get().revision == 2  # session data kept
    # the open Surface reloaded (the marker is gone) and shows the kept data plus the new item
    dev.surface().wait_for_function(
        "() => !window.__before"
        " && document.querySelectorAll('[data-testid=todo-item]').length === 2",
        timeout=10_000,
    )


def test_the_virtual_clock_seam_completes_a_focus_without_waiting(
    lineup_dev: Callable[..., Any], template_project: Callable[[str], Path]
) -> None:
    from lineup_runtime_lite import VirtualClock

    clock = VirtualClock()
    dev = lineup_dev(template_project("pomodoro"), host="auto", clock=clock)
    answer = dev.call("pomodoro.start", {"minutes": 25})
    assert answer["activation"] == "starting"
    frame = dev.surface()  # host auto: its sdk.host.ready() is confirmed at once
    frame.get_by_test_id("pomodoro-state").filter(has_text="Focusing").wait_for(timeout=10_000)
    clock.advance(25 * 60_000)  # the deadline on the runtime's clock, not a real wait
    frame.get_by_test_id("pomodoro-state").filter(has_text="completed").wait_for(timeout=10_000)
    timeline = dev.page.get_by_test_id("lineup-timeline")
    timeline.locator("li[data-stage=result]", has_text="completed").wait_for(timeout=10_000)
