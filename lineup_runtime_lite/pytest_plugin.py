"""A pytest plugin with the `lineup_app` fixture (an in-memory runtime) and the `lineup_dev`
fixture (`lineup dev` and a Playwright page in headless Chromium); enable it with
`pytest_plugins = ["lineup_runtime_lite.pytest_plugin"]` in a `conftest.py`."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from lineup_runtime_lite.testing import AppUnderTest, open_app

__all__ = ["lineup_app", "lineup_dev"]


@pytest.fixture()
def lineup_app(tmp_path: Path) -> Iterator[Callable[..., AppUnderTest]]:
    """A factory: `lineup_app(project=".", host="auto", ...)` builds the project with its
    dev key and installs it into an in-memory runtime on a virtual clock; every app it
    opened is closed after the test."""
    opened: list[AppUnderTest] = []

    def make(project: str | Path = ".", **options: Any) -> AppUnderTest:
        options.setdefault("out_dir", tmp_path / f"lineup-dist-{len(opened)}")
        app = open_app(project, **options)
        opened.append(app)
        return app

    yield make
    for app in opened:
        app.close()


@pytest.fixture()
def lineup_dev(tmp_path: Path) -> Iterator[Callable[..., Any]]:
    """A factory: `lineup_dev(project=".", host="manual", ...)` starts `lineup dev` for the
    project in this process (free ports, its state in a temporary folder) and returns a
    `DevPage`: `.page` is a Playwright page on the Host page (the token cookie set),
    `.surface()` the Surface frame, `.call(method, params)` an Agent call, `.press(button)`
    a Host panel button, `.server` the runtime and URLs. Playwright is imported only here;
    without Playwright, the web extra or a Chromium the test is skipped, saying why."""
    import contextlib

    try:
        from lineup_runtime_lite.web import browser as testing
    except Exception as exc:  # the web extra is missing: usage_invalid with the hint
        pytest.skip(f"lineup dev is not available: {exc}")
    why = testing.missing_browser()
    if why is not None:
        pytest.skip(why)
    stack = contextlib.ExitStack()
    opened = [0]

    def make(project: str | Path = ".", *, host: str = "manual", **options: Any) -> Any:
        opened[0] += 1
        options.setdefault("db", tmp_path / f"lineup-dev-{opened[0]}.db")
        return stack.enter_context(testing.dev_page(project, policy=host, **options))

    with stack:
        yield make
