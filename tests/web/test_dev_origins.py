"""`lineup dev`'s origins and bridge bounds in headless Chromium (SPEC 16.3): the Host token
cookie never reaches the Surface origin, many listeners on one Surface stay under the
bridge's subscription cap, and a session with nothing stored gives its listener the
revision-0 snapshot first."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.conftest import HEADER, toml

QUIET = '''
@tools.tool("demo.hello", activation="app_ready")
async def hello(ctx: ToolContext) -> str:
    """Answer without storing anything."""
    return "hi"
'''

RECORDING_SURFACE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>demo</title></head>
<body><p data-testid="demo">demo</p>
<script type="module">
  import { sdk } from "/_lineup/sdk.js";
  window.__frames = [];
  sdk.sessionData.subscribe((snap) => window.__frames.push(snap));
  window.__got = await sdk.sessionData.get();
  sdk.host.ready();
</script></body></html>
"""


def _quiet_project(root: Path) -> Path:
    (root / "demo_app").mkdir(parents=True)
    (root / "demo_app" / "__init__.py").write_text("")
    (root / "demo_app" / "tools.py").write_text(HEADER + textwrap.dedent(QUIET))
    (root / "surface").mkdir()
    (root / "surface" / "index.html").write_text(RECORDING_SURFACE)
    (root / "lineup.toml").write_text(toml(include=("demo_app/**/*.py", "surface/**")))
    return root


def test_the_host_token_cookie_never_reaches_the_surface_origin(
    lineup_dev: Callable[..., Any], template_project: Callable[[str], Path]
) -> None:
    dev = lineup_dev(template_project("todo"))
    urls = dev.server.urls
    sent: list[tuple[str, str]] = []  # (url, cookie header) of every request the page made
    dev.page.context.on(
        "request", lambda r: sent.append((r.url, r.all_headers().get("cookie", "")))
    )
    dev.call("todo.add", {"title": "milk"})
    dev.server.rt.settle()
    frame = dev.surface()
    frame.wait_for_selector('[data-testid="todo-item"]')
    # the Host origin gets its cookie (so the check below could fail) ...
    dev.page.evaluate("fetch('/_lineup/api/state').then((r) => r.status)")
    assert dev.page.context.cookies(urls.host_origin)
    # ... the Surface origin never: not the frame, its SDK, its bridge, nor a top-level tab
    dev.page.goto(urls.surface_origin + "/_lineup/sdk.js")
    assert dev.page.context.cookies(urls.surface_origin) == []
    to_host = [c for u, c in sent if u.startswith(urls.host_origin)]
    to_surface = [c for u, c in sent if u.startswith(urls.surface_origin)]
    assert any("lineup_dev_token=" in c for c in to_host), sent
    assert len(to_surface) >= 3, sent  # the frame's page, the SDK, /_lineup/app, ...
    assert not any("lineup_dev_token" in c for c in to_surface), to_surface


MANY_LISTENERS = """
async () => {
  const { sdk } = await import("/_lineup/sdk.js");
  window.__data = Array.from({ length: 40 }, () => []);
  window.__ops = Array.from({ length: 40 }, () => []);
  window.__errors = [];
  const origError = console.error;
  console.error = (...args) => { window.__errors.push(args.map(String).join(" ")); origError(...args); };
  window.__data.forEach((seen) => sdk.sessionData.subscribe((s) => seen.push(s.revision)));
  window.__ops.forEach((seen) => sdk.operations.subscribe((ops) => seen.push(ops.length)));
}
"""


def test_many_listeners_on_one_surface_stay_under_the_subscription_cap(
    lineup_dev: Callable[..., Any], template_project: Callable[[str], Path]
) -> None:
    dev = lineup_dev(template_project("todo"))
    dev.call("todo.add", {"title": "one"})
    dev.server.rt.settle()
    frame = dev.surface()
    frame.wait_for_selector('[data-testid="todo-item"]')
    frame.evaluate(MANY_LISTENERS)
    frame.wait_for_function(
        "() => window.__data.every((s) => s.length === 1) && window.__ops.every((s) => s.length >= 1)",
        timeout=10_000,
    )
    dev.call("todo.add", {"title": "two"})
    frame.wait_for_function("() => window.__data.every((s) => s.join() === '1,2')", timeout=10_000)
    assert frame.evaluate("window.__errors") == []
    # one bridge subscription per kind however many listeners (the template's own included)
    [conn] = list(dev.server.host._connections)
    assert len(conn.operation_subs) == 1


def test_a_session_with_nothing_stored_gets_the_revision_0_snapshot_first(
    lineup_dev: Callable[..., Any], tmp_path: Path
) -> None:
    # catches: the SDK's `this.last = -1` (deliver the first snapshot, revision 0 too) made 0
    dev = lineup_dev(_quiet_project(tmp_path / "quiet"))
    assert dev.call("demo.hello", {})["stage"] in ("accepted", "result")
    dev.server.rt.settle()
    frame = dev.surface()
    frame.wait_for_function("() => window.__got && window.__frames.length >= 1", timeout=10_000)
    assert frame.evaluate("window.__got") == {"data": None, "revision": 0}
    assert frame.evaluate("window.__frames") == [{"data": None, "revision": 0}]
