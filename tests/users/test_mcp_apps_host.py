"""The Surface in an MCP Apps host (SPEC 18.2), on the official ext-apps AppBridge: the test
host's page on two loopback origins in Debian's Chromium, its MCP client in a Node process
beside it, against `lineup serve --http` on the todo and pomodoro templates. The harness
relays with plain `postMessage` (ext-apps' PostMessageTransport transfers no MessagePort),
so headless Chromium's dropped cross-origin MessagePort transfers do not touch it."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from tests.users.mcp_apps_kit import agent, host_page, running_host, views

ITEMS = "Array.from(document.querySelectorAll('[data-testid=todo-title]'), e => e.textContent)"


def titles(frame: Any) -> list[str]:
    found: list[str] = frame.evaluate(ITEMS)
    return found


def wait_titles(frame: Any, expected: list[str]) -> None:
    want = json.dumps(json.dumps(expected, separators=(",", ":")))
    frame.wait_for_function(f"() => JSON.stringify({ITEMS}) === {want}")


def counts(page: Any, index: int) -> dict[str, Any]:
    got: dict[str, Any] = page.evaluate(f"lineupHost.counts({index})")
    return got


def test_todo_in_the_host_live_interactive_and_converging(tmp_path: Path) -> None:
    with running_host(tmp_path, ["todo"]) as host, host_page(host) as page:
        # the View renders from resources/read, its first data from the tool result's view
        assert page.evaluate("lineupHost.open('todo-add', {title: 'milk'})") == 0
        first = views(page)[0]
        wait_titles(first, ["milk"])
        page.wait_for_function("() => lineupHost.counts(0).sizes > 0")  # size-changed
        # an item the Agent adds appears in the View
        added = agent(page, "todo-add", {"title": "eggs"})
        assert added["isError"] is False
        wait_titles(first, ["milk", "eggs"])
        # a tick in the View goes through lineup-ui-action; the Agent's todo-list sees it
        first.click("[data-testid=todo-item]:first-child [data-testid=todo-toggle]")
        page.wait_for_function("() => lineupHost.counts(0).actions === 1")
        first.wait_for_selector("[data-testid=todo-item].done")
        listed = agent(page, "todo-list", {})["structuredContent"]["items"]
        assert [i["done"] for i in listed] == [True, False]
        # a second View of the session converges on the same revisions
        assert page.evaluate("lineupHost.open('todo-list', {})") == 1
        second = views(page, 2)[1]
        wait_titles(second, ["milk", "eggs"])
        agent(page, "todo-add", {"title": "bread"})
        for frame in (first, second):
            wait_titles(frame, ["milk", "eggs", "bread"])
        revision = "document.getElementById('items').dataset.revision"
        assert first.evaluate(revision) == second.evaluate(revision)
        # teardown stops the polling of that View; the other goes on
        page.evaluate("lineupHost.teardown(0)")
        agent(page, "todo-add", {"title": "jam"})
        wait_titles(second, ["milk", "eggs", "bread", "jam"])
        torn = counts(page, 0)["syncs"]
        agent(page, "todo-add", {"title": "tea"})
        wait_titles(second, ["milk", "eggs", "bread", "jam", "tea"])
        assert counts(page, 0)["syncs"] == torn
        assert titles(first)[-1] != "tea"


def test_a_hidden_view_pauses_its_polling(tmp_path: Path) -> None:
    with running_host(tmp_path, ["todo"]) as host, host_page(host) as page:
        page.evaluate("lineupHost.open('todo-add', {title: 'milk'})")
        view = views(page)[0]
        wait_titles(view, ["milk"])
        view.evaluate(
            "() => { Object.defineProperty(document, 'hidden', {configurable: true,"
            " get: () => true}); document.dispatchEvent(new Event('visibilitychange')); }"
        )
        agent(page, "todo-add", {"title": "eggs"})  # the sync in flight still answers it
        wait_titles(view, ["milk", "eggs"])
        paused = counts(page, 0)["syncs"]
        agent(page, "todo-add", {"title": "bread"})
        time.sleep(0.5)  # nothing may happen: a negative check, not a deadline
        assert counts(page, 0)["syncs"] == paused
        assert titles(view) == ["milk", "eggs"]
        view.evaluate(
            "() => { Object.defineProperty(document, 'hidden', {configurable: true,"
            " get: () => false}); document.dispatchEvent(new Event('visibilitychange')); }"
        )
        wait_titles(view, ["milk", "eggs", "bread"])


def test_the_pomodoro_countdown_runs_from_the_accepted_answer(tmp_path: Path) -> None:
    with running_host(tmp_path, ["pomodoro"]) as host, host_page(host) as page:
        started = time.monotonic()
        page.evaluate("lineupHost.open('pomodoro-start', {minutes: 25})")
        assert time.monotonic() - started < 20  # answered at acceptance, not after 25 min
        result = page.evaluate("lineupHost.views[0].result")
        assert result["structuredContent"]["status"] == "pending"
        view = views(page)[0]
        view.wait_for_function(
            "() => /^2[45]:[0-5][0-9]$/.test(document.getElementById('countdown').textContent)"
        )


def test_a_client_without_the_extension_sees_no_ui_metadata(tmp_path: Path) -> None:
    with running_host(tmp_path, ["todo"]) as host, host_page(host) as page:
        plain = page.evaluate(
            """async () => (await (await fetch("/plain", {method: "POST", body: JSON.stringify(
                {method: "tools/list", params: {}})})).json()).result.tools"""
        )
        ui = page.evaluate("async () => (await lineupHost.rpc('tools/list', {})).tools")
        assert not [t["name"] for t in plain if "ui" in (t.get("_meta") or {})]
        assert "lineup-surface-sync" not in [t["name"] for t in plain]
        assert {t["name"] for t in ui} - {t["name"] for t in plain} == {
            "lineup-surface-sync",
            "lineup-ui-action",
        }
        answer = agent(page, "todo-add", {"title": "milk"})
        assert "io.lineup/surface" not in (answer.get("_meta") or {})


def test_a_view_of_a_session_pinned_to_another_version_warns(tmp_path: Path) -> None:
    with running_host(tmp_path, ["todo"]) as host, host_page(host) as page:
        page.evaluate("lineupHost.open('todo-add', {title: 'milk'})")
        wait_titles(views(page)[0], ["milk"])
        assert views(page)[0].query_selector("[data-lineup-version-warning]") is None
    toml = tmp_path / "apps" / "todo" / "lineup.toml"
    toml.write_text(toml.read_text().replace('version = "1.0.0"', 'version = "1.1.0"'))
    assert 'version = "1.1.0"' in toml.read_text()
    with running_host(tmp_path, ["todo"]) as host, host_page(host) as page:
        page.evaluate("lineupHost.open('todo-list', {})")
        view = views(page)[0]
        view.wait_for_selector("[data-lineup-version-warning]")
        text = view.inner_text("[data-lineup-version-warning]")
        assert "1.0.0" in text and "1.1.0" in text
        wait_titles(view, ["milk"])


PROBE = """
  <script type="module">
    import { sdk } from "/_lineup/sdk.js";
    document.body.dataset.appAtLoad = JSON.stringify(sdk.app);
    await sdk.host.ready();  // a no-op in an MCP Apps host
    const app = await sdk.ready();
    document.body.dataset.app = JSON.stringify(app);
    document.body.dataset.same = String(app === sdk.app);
  </script>
</body>"""


def _probe(project: Path) -> None:
    page = project / "surface" / "index.html"
    page.write_text(page.read_text().replace("</body>", PROBE, 1))


def test_sdk_app_is_null_until_the_tool_result_then_ready_resolves_with_it(
    tmp_path: Path,
) -> None:
    with running_host(tmp_path, ["todo"], prepare=_probe) as host, host_page(host) as page:
        page.evaluate("lineupHost.open('todo-add', {title: 'milk'})")
        view = views(page)[0]
        view.wait_for_function("() => document.body.dataset.same !== undefined")
        data = view.evaluate("({...document.body.dataset})")
        assert data["appAtLoad"] == "null"
        app = json.loads(data["app"])
        assert app["scope"] == "todo" and app["version"] == "1.0.0"
        assert data["same"] == "true"
