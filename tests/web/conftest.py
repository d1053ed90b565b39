"""Browser tests of `lineup dev` (SPEC 14): Python Playwright driving the machine's real
Chromium binary (Debian's `chromium` package in CI, installed by `.ci/run` with apt-get;
never `playwright install`). Locally they skip only when no Chromium is found, and say so;
with `CI` set they never skip."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from lineup_build.init import init_project
from lineup_runtime_lite.pytest_plugin import lineup_dev  # noqa: F401  (the authors' fixture)


@pytest.fixture(autouse=True)
def _browser_required() -> None:
    """No Chromium: a skip that says so, locally; a failure in CI (it must run them)."""
    from lineup_runtime_lite.web.browser import missing_browser

    why = missing_browser()
    if why is not None:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the browser tests: {why}")
        pytest.skip(why)


@pytest.fixture()
def template_project(tmp_path: Path) -> Callable[[str], Path]:
    """`template_project("todo")`: a fresh project from a template (scope = its name)."""

    def make(template: str) -> Path:
        folder = tmp_path / template
        init_project(folder, template=template)
        return folder

    return make
