"""A pytest plugin with the `lineup_app` fixture; enable it with
`pytest_plugins = ["lineup_runtime_lite.pytest_plugin"]` in a `conftest.py`."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from lineup_runtime_lite.testing import AppUnderTest, open_app

__all__ = ["lineup_app"]


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
