"""`lineup dev` on the command line: usage errors as stable codes (no traceback), the web
extra's install hint, and when a browser opens (SPEC 14)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from lineup_build.cli.dev import should_open
from lineup_build.init import init_project
from tests.cli_kit import run_cli


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--host", "sometimes"], "--host"),
        (["--isolation", "conversation"], "isolation"),
        (["--sandbox", "maybe"], "sandbox"),
    ],
    ids=["host", "isolation", "sandbox"],
)
def test_usage_errors(
    args: list[str], needle: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    init_project(tmp_path / "todo", template="todo")
    code, _, err = run_cli(["dev", str(tmp_path / "todo"), *args, "--no-open"], capsys)
    assert code == 2
    assert "usage_invalid" in err and needle in err and "Traceback" not in err


def test_not_a_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(["dev", str(tmp_path / "missing.lineup"), "--no-open"], capsys)
    assert code == 2
    assert "usage_invalid" in err and "not a MiniApp folder" in err


def test_without_the_web_extra_the_hint_says_what_to_install(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import lineup_runtime_lite

    for name in [m for m in sys.modules if m.startswith("lineup_runtime_lite.web")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.delattr(lineup_runtime_lite, "web", raising=False)
    monkeypatch.setitem(sys.modules, "websockets", None)  # as if not installed
    init_project(tmp_path / "todo", template="todo")
    code, _, err = run_cli(["dev", str(tmp_path / "todo"), "--no-open"], capsys)
    assert code == 2
    from lineup_sdk import __version__

    # install lines that work before the distribution is on an index: a checkout, a wheel
    assert "usage_invalid" in err and 'pip install ".[web]"' in err
    assert f'pip install "lineup_sdk-{__version__}-py3-none-any.whl[web]"' in err
    assert "lineup-sdk[" not in err


@pytest.mark.parametrize(
    ("flag", "env", "tty", "opens"),
    [
        (None, {"DISPLAY": ":0"}, True, True),
        (None, {}, True, False),
        (None, {"DISPLAY": ":0"}, False, False),
        (True, {}, False, True),
        (False, {"DISPLAY": ":0"}, True, False),
    ],
    ids=["terminal-with-display", "no-display", "no-terminal", "--open", "--no-open"],
)
def test_a_browser_opens_only_on_a_terminal_with_a_display(
    flag: bool | None, env: dict[str, str], tty: bool, opens: bool
) -> None:
    assert should_open(flag, env, tty) is opens
