"""The MCP Apps test host (SPEC 18.2): `lineup serve --http` on template projects, the host's
Node process (tests/users/mcp_apps/host.mjs: the official TypeScript MCP client declaring the
extension, the AppBridge page bundled with esbuild, two loopback origins) and Debian's
Chromium through Playwright on the host page.

The Node packages are pinned by tests/users/mcp_apps/package-lock.json and installed by
`.ci/run` into the folder `LINEUP_MCP_APPS_DIR` names (locally, `npm ci` in
tests/users/mcp_apps works too). Without them or without Chromium the tests skip locally and
fail in CI."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from lineup_build.init import init_project
from tests.cli_kit import serving_http, stop_process

HERE = Path(__file__).parent / "mcp_apps"
TOKEN = "mcp-apps-host-token-0123456789"
HOST_FILES = ("host.mjs", "host-page.js", "sandbox.html")


def packages_dir() -> Path | None:
    """Where the host's pinned node_modules live, or None."""
    named = os.environ.get("LINEUP_MCP_APPS_DIR")
    for folder in ([Path(named)] if named else []) + [HERE]:
        if (folder / "node_modules" / "@modelcontextprotocol" / "ext-apps").is_dir():
            return folder
    return None


def required() -> Path:
    """The packages folder, or a skip (locally) / failure (CI) that says why not."""
    from lineup_runtime_lite.web.browser import missing_browser

    why = missing_browser()
    folder = packages_dir()
    if folder is None:
        why = "no MCP Apps host packages: npm ci in tests/users/mcp_apps or LINEUP_MCP_APPS_DIR"
    if why is not None or shutil.which("node") is None:
        why = why or "no node on PATH"
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the MCP Apps host tests: {why}")
        pytest.skip(why)
    assert folder is not None
    return folder


@dataclass
class Host:
    """A running test host: the serve URL, the host page's and sandbox's origins."""

    serve_url: str
    host: str
    sandbox: str


@contextmanager
def running_host(
    tmp_path: Path,
    templates: list[str],
    *,
    extra: list[str] | None = None,
    prepare: Callable[[Path], None] | None = None,
) -> Iterator[Host]:
    """`lineup serve --http` on fresh projects of `templates` (each passed to `prepare`
    once created), and the host's Node process."""
    folder = required()
    apps = tmp_path / "apps"
    for template in templates:
        if not (apps / template).exists():  # a restart keeps the projects (and the db)
            init_project(apps / template, template=template)
            if prepare is not None:
                prepare(apps / template)
    work = tmp_path / "host"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    for name in HOST_FILES:
        shutil.copy(HERE / name, work / name)
    (work / "node_modules").symlink_to(folder / "node_modules")
    args = [*templates, "--db", str(tmp_path / "serve.db"), "--http", "127.0.0.1:0"]
    with serving_http([*args, *(extra or [])], apps, TOKEN) as served:
        assert served.url, served.text
        node = subprocess.Popen(
            ["node", str(work / "host.mjs"), served.url],
            cwd=work,
            env={**os.environ, "LINEUP_SERVE_TOKEN": TOKEN},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert node.stdout is not None
            line = node.stdout.readline()
            assert line, "the host process ended before it listened"
            where: dict[str, Any] = json.loads(line)
            yield Host(served.url, where["host"], where["sandbox"])
        finally:
            stop_process(node)


@contextmanager
def host_page(host: Host) -> Iterator[Any]:
    """The host page in Chromium (a Playwright `Page`), its bundle loaded."""
    from playwright.sync_api import sync_playwright

    from lineup_runtime_lite.web.browser import find_chromium

    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=find_chromium(), headless=True, args=["--no-sandbox"]
        )
        try:
            page = browser.new_page()
            page.goto(host.host)
            page.wait_for_function("() => document.documentElement.dataset.ready === '1'")
            yield page
        finally:
            browser.close()


def views(page: Any, count: int = 1) -> list[Any]:
    """The View frames (the documents the sandbox proxy renders), in the order opened, once
    there are at least `count` (Playwright learns of a frame's URL a moment later)."""
    for _ in range(200):
        found = [f for f in page.frames if f.url == "about:srcdoc"]
        if len(found) >= count:
            return found
        page.wait_for_timeout(50)
    raise AssertionError(f"expected {count} View frames, found {len(found)}")


def agent(page: Any, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """A `tools/call` by the host's plain MCP client (no extension): the Agent's."""
    result: dict[str, Any] = page.evaluate(
        """async ([name, args]) => {
            const r = await fetch("/plain", {method: "POST", body: JSON.stringify(
                {method: "tools/call", params: {name, arguments: args}})});
            return (await r.json()).result;
        }""",
        [name, arguments],
    )
    return result
