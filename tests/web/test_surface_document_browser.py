"""The built Surface document in Chromium (SPEC 18.2): under the MCP Apps hosts' default
CSP (nothing but inline code and `data:` images; no connections) it renders with its
inlined style, image and script and no console error, the inlined SDK doing nothing until
first use; under `lineup dev` the Surface is this same document, and `/_lineup/sdk.js`
hands back the page's one SDK instance."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from lineup_build.build import build_project
from lineup_build.init import init_project
from lineup_build.surface import SURFACE_DOCUMENT
from tests.build.bundle_kit import EPOCH, KEY

#: The MCP Apps extension's default policy for a View without a declared `csp`.
MCP_APPS_CSP = (
    "default-src 'none'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; media-src 'self' data:; connect-src 'none'"
)
#: 1x1 transparent PNG.
PIXEL = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6300010000000500010d0a2db40000000049454e44ae426082"
)
PAGE = """<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>Inlined</title><link rel="icon" href="data:,">
<link rel="stylesheet" href="style.css"></head>
<body>
  <h1 id="title">Inlined</h1>
  <img id="logo" src="img/pixel.png" alt="logo">
  <p id="status">loading</p>
  <script type="module" src="app.js"></script>
  <script type="module">
    import { sdk } from "/_lineup/sdk.js";
    window.__static = sdk;
  </script>
</body>
</html>
"""
APP_JS = """const lineup = await import("/_lineup/sdk.js");
window.__dynamic = lineup.sdk;
document.getElementById("status").textContent = lineup.sdk.app === null ? "ready" : "dev";
"""
STYLE = "h1 { color: rgb(1, 2, 3); background: url(img/pixel.png); }\n"


@pytest.fixture()
def surface_project(tmp_path: Path) -> Path:
    root = tmp_path / "inlined"
    init_project(root, template="todo")
    surface = root / "surface"
    (surface / "index.html").write_text(PAGE)
    (surface / "app.js").write_text(APP_JS)
    (surface / "style.css").write_text(STYLE)
    (surface / "img").mkdir()
    (surface / "img" / "pixel.png").write_bytes(PIXEL)
    return root


@pytest.fixture()
def served(surface_project: Path, tmp_path: Path) -> Iterator[str]:
    """The built document alone on a loopback origin, with the MCP Apps default CSP."""
    built = build_project(surface_project, signing_key=KEY, out_dir=tmp_path / "dist", epoch=EPOCH)
    assert built.ok and built.bundle, [d.to_dict() for d in built.diagnostics]
    import zipfile

    with zipfile.ZipFile(built.bundle) as z:
        document = z.read(f"app/{SURFACE_DOCUMENT}")

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path != "/view.html":
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("content-type", "text/html; charset=utf-8")
            self.send_header("content-security-policy", MCP_APPS_CSP)
            self.send_header("content-length", str(len(document)))
            self.end_headers()
            self.wfile.write(document)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/view.html"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def test_the_document_renders_under_the_mcp_apps_default_csp(served: str) -> None:
    from playwright.sync_api import sync_playwright

    from lineup_runtime_lite.web.browser import find_chromium

    problems: list[str] = []
    requests: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=find_chromium(), headless=True, args=["--no-sandbox"]
        )
        try:
            page = browser.new_page()
            page.on(
                "console",
                lambda m: (
                    problems.append(f"{m.type}: {m.text}")
                    if m.type in ("error", "warning")
                    else None
                ),
            )
            page.on("pageerror", lambda e: problems.append(f"pageerror: {e}"))
            page.on("request", lambda r: requests.append(r.url))
            page.goto(served)
            page.wait_for_function(
                "() => document.getElementById('status').textContent === 'ready'",
                timeout=10_000,
            )
            assert page.evaluate("getComputedStyle(document.getElementById('title')).color") == (
                "rgb(1, 2, 3)"
            )
            logo = page.evaluate(
                "(() => { const i = document.getElementById('logo');"
                " return [i.complete, i.naturalWidth]; })()"
            )
            assert logo == [True, 1]
            # one SDK instance for both import forms, and nothing opened by evaluating it
            assert page.evaluate("window.__static === window.__dynamic")
            assert page.evaluate("window.__static.app === null")
        finally:
            browser.close()
    assert problems == []
    assert requests == [served]  # everything inlined: no other fetch


def test_lineup_dev_serves_the_same_document_and_hands_back_its_sdk(
    lineup_dev: Callable[..., Any], template_project: Callable[[str], Path]
) -> None:
    dev = lineup_dev(template_project("todo"))
    rt = dev.server.host.rt
    (app,) = [a for a in rt.apps() if a["scope"] == "todo"]
    document = rt.surface_document("todo", app["version"])
    assert document is not None
    dev.call("todo.add", {"title": "buy milk"})  # an App session, so a Surface to show
    frame = dev.surface()
    frame.wait_for_selector('[data-testid="todo-item"]', timeout=10_000)
    served = frame.evaluate("async () => await (await fetch(location.href)).text()")
    assert served.encode("utf-8") == document
    same = frame.evaluate(
        """async () => {
          const mod = await import("/_lineup/sdk.js");
          const page = await globalThis[Symbol.for("io.lineup.sdk")]();
          return mod.sdk === page.sdk && mod.sdk.app !== null && mod.sdk.app.scope;
        }"""
    )
    assert same == "todo"
