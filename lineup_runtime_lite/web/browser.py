"""Browser tests for MiniApp authors: `lineup dev` for a project, in this process, and a
Playwright page on its Host page (Playwright imported lazily; a Chromium found on the machine,
never downloaded). The `lineup_dev` pytest fixture (`lineup_runtime_lite.pytest_plugin`)
hands one out; `dev_page(...)` is the same as a context manager."""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lineup_runtime_lite.web._server import DevUrls, serve_dev
from lineup_runtime_lite.web._session import DevSession, mcp_app, open_dev
from lineup_sdk import __version__

__all__ = ["CHROMIUM_ENV", "DevPage", "DevServer", "dev_page", "find_chromium", "missing_browser"]

#: A Chromium binary to use instead of the ones looked for.
CHROMIUM_ENV = "LINEUP_CHROMIUM"

#: Where distributions put the real Chromium binary (not the shell wrapper on PATH).
CHROMIUM_PATHS = (
    "/usr/lib/chromium/chromium",  # Debian, Ubuntu's deb
    "/usr/lib64/chromium-browser/chromium-browser",  # Fedora
    "/usr/lib/chromium-browser/chromium-browser",
    "/Applications/Chromium.app/Contents/MacOS/Chromium",
    "/Applications/Google Chrome.app/Contents/MacOS/Google Chrome",
)


def find_chromium(env: dict[str, str] | None = None) -> str | None:
    """The Chromium binary to drive: `$LINEUP_CHROMIUM`, else a distribution's real binary,
    else `chromium`/`google-chrome` on PATH; None when there is none."""
    env = dict(os.environ) if env is None else env
    given = env.get(CHROMIUM_ENV)
    if given:
        return given if os.access(given, os.X_OK) else None
    for path in CHROMIUM_PATHS:
        if os.access(path, os.X_OK):
            return path
    for name in ("google-chrome", "chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return None


def missing_browser() -> str | None:
    """Why a browser test cannot run here (None when it can): no Playwright, or no Chromium."""
    try:
        import playwright.sync_api  # noqa: F401
    except ModuleNotFoundError:
        return (
            'Playwright is not installed (pip install ".[web]" playwright in a LineUp '
            f'checkout, or pip install "lineup_sdk-{__version__}-py3-none-any.whl[web]" '
            "playwright beside the wheel)"
        )
    if find_chromium() is None:
        return (
            "no Chromium found (install it, e.g. `apt-get install -y chromium`, or set "
            f"{CHROMIUM_ENV}); never `playwright install` here"
        )
    return None


@dataclass
class DevServer:
    """`lineup dev` for a project on free loopback ports, served by a thread of this process."""

    session: DevSession
    urls: DevUrls
    _stop: threading.Event
    _thread: threading.Thread

    @classmethod
    def start(cls, project: str | Path, **options: Any) -> DevServer:
        """Open the project as `lineup dev` does (`open_dev` options: `db`, `policy`,
        `clock`, `watch`, `faults`, `sandbox`, `isolation`; and `limits`, the HTTP limits)
        and serve it; returns once both origins listen."""
        limits = options.pop("limits", None)
        session = open_dev(Path(project), **options)
        ready = threading.Event()
        stop = threading.Event()
        box: list[DevUrls] = []
        errors: list[BaseException] = []

        def on_ready(urls: DevUrls) -> None:
            box.append(urls)
            ready.set()

        def run() -> None:
            try:
                serve_dev(
                    session.host,
                    0,
                    mcp_app=mcp_app(
                        session.rt, scopes=[session.host.scope], observe=session.host.answered
                    ),
                    on_ready=on_ready,
                    stop=stop,
                    limits=limits,
                )
            except BaseException as exc:
                errors.append(exc)
                ready.set()

        thread = threading.Thread(target=run, name="lineup-dev-server", daemon=True)
        thread.start()
        ready.wait(30)
        if errors or not box:
            stop.set()
            thread.join(10)
            session.close()
            if errors:
                raise errors[0]
            raise RuntimeError("lineup dev did not start within 30 s")
        return cls(session, box[0], stop, thread)

    @property
    def rt(self) -> Any:
        return self.session.rt

    @property
    def host(self) -> Any:
        return self.session.host

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(15)
        self.session.close()


@dataclass
class DevPage:
    """A Playwright page on the dev Host page (its token cookie set), and the server.

    Attributes:
        page: The Playwright `Page`.
        server: The `DevServer` (its `rt`, `host`, `urls`).
    """

    page: Any
    server: DevServer
    _calls: int = field(default=0)

    def call(
        self, method: str, params: dict[str, Any] | None = None, conversation: str = "dev"
    ) -> dict[str, Any]:
        """An Agent call through the console (a fresh call_id), answered as the page shows it."""
        self._calls += 1
        return dict(self.server.host.call(conversation, method, params or {}))

    def surface(self, instance: str | None = None, timeout_s: float = 10.0) -> Any:
        """The Surface frame of the selected instance (or of `instance`, once the page
        shows it), loaded."""
        import time

        selector = '[data-testid="lineup-surface-frame"]'
        if instance is not None:
            selector += f'[data-instance="{instance}"]'
        deadline = time.monotonic() + timeout_s
        while True:
            handle = self.page.wait_for_selector(selector, timeout=timeout_s * 1000)
            frame = handle.content_frame() if handle is not None else None
            if frame is not None and "/s/" in frame.url:
                frame.wait_for_load_state()
                return frame
            if time.monotonic() > deadline:
                raise TimeoutError(f"no Surface frame within {timeout_s} s")
            self.page.wait_for_timeout(50)  # the page replaced the frame meanwhile

    def select(self, conversation: str, instance: str | None = None) -> Any:
        """Select a conversation (and one of its instances) in the Host page; returns the
        Surface frame shown."""
        self.page.locator(
            f'[data-testid="lineup-conversation"][data-conversation="{conversation}"]'
        ).click()
        if instance is not None:
            self.page.locator(
                f'[data-testid="lineup-instance"][data-instance="{instance}"]'
            ).click()
        return self.surface(instance)

    def press(self, button: str) -> None:
        """A Host panel button: `confirm`, `decline`, `leave`, `close`."""
        self.page.get_by_test_id(f"lineup-host-{button}").click()


def _launch(playwright: Any) -> Any:
    return playwright.chromium.launch(
        executable_path=find_chromium(), headless=True, args=["--no-sandbox"]
    )


@contextlib.contextmanager
def dev_page(project: str | Path, **options: Any) -> Iterator[DevPage]:
    """`lineup dev` for `project` and a headless Chromium page on its Host page; everything
    is stopped afterwards.

    Raises:
        RuntimeError: no browser (`missing_browser()` says why).
    """
    why = missing_browser()
    if why is not None:
        raise RuntimeError(why)
    from playwright.sync_api import sync_playwright

    server = DevServer.start(project, **options)
    try:
        with sync_playwright() as pw:
            browser = _launch(pw)
            try:
                page = browser.new_page()
                page.goto(server.urls.open_url)
                yield DevPage(page, server)
            finally:
                browser.close()
    finally:
        server.stop()
