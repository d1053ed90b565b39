"""The people-facing output: a tools table that stays fast for thousands of tools."""

from __future__ import annotations

import pytest

from lineup_build.cli import _render
from lineup_build.model import Tool


def _tools(n: int) -> list[Tool]:
    return [
        Tool(
            method=f"demo.t{i:04d}",
            description="",
            delivery="miniapp_sdk",
            activation="app_ready",
            long_running=i == 0,
            input_schema={"type": "object"},
            result_schema=True,
            timeout_s=30,
        )
        for i in range(n)
    ]


@pytest.mark.parametrize(
    ("count", "shown", "more"),
    [(3, 3, None), (200, 200, None), (201, 200, "… and 1 more"), (5000, 200, "… and 4800 more")],
    ids=["small", "at_limit", "one_over", "many"],
)
def test_tools_table_shows_at_most_the_limit(
    count: int,
    shown: int,
    more: str | None,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "120")  # one table row per line
    _render.tools_table(list(reversed(_tools(count))), "demo 1.0.0")
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if "demo.t" in line]
    assert len(rows) == shown
    assert "demo.t0000" in rows[0] and "yes" in rows[0]  # sorted by method
    if more is None:
        assert "more (--json lists all)" not in out
    else:
        assert more in out
