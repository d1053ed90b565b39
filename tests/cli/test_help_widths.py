"""`lineup --help` and every command's help keep each summary whole at any width, without a
terminal (COLUMNS is all a pipe has): a reader never meets a sentence cut with `...`."""

from __future__ import annotations

import os
import re
import subprocess

import pytest
import typer
from typer.core import TyperGroup

from lineup_build.cli._app import app
from tests.cli_kit import LINEUP, run_cli

WIDTHS = [40, 200]
#: A sentence cut short: a lower-case word or a comma followed by `...` (metavars such as
#: `PATH...` are upper case).
CUT = re.compile(r"[a-z,]\.\.\.")


def _first_sentence(text: str) -> str:
    """The summary a command list owes its reader: the first sentence of the help, whole."""
    words = text.partition("\n\n")[0].split()
    for i, word in enumerate(words):
        if word.endswith(".") and (i == len(words) - 1 or not words[i + 1][0].islower()):
            return " ".join(words[: i + 1])
    return " ".join(words)


def _flat(text: str) -> str:
    return " ".join(text.split())


def _groups() -> list[tuple[list[str], TyperGroup]]:
    root = typer.main.get_command(app)
    assert isinstance(root, TyperGroup)
    found: list[tuple[list[str], TyperGroup]] = [([], root)]
    for name, command in root.commands.items():
        if isinstance(command, TyperGroup):
            found.append(([name], command))
    return found


@pytest.mark.parametrize("width", WIDTHS, ids=lambda w: f"columns-{w}")
def test_root_help_through_a_pipe_keeps_every_summary(width: int) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("LINES", "TERM")}
    env["COLUMNS"] = str(width)
    done = subprocess.run(
        [*LINEUP, "--help"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    shown = _flat(done.stdout)
    root = _groups()[0][1]
    for name, command in root.commands.items():
        summary = _first_sentence(command.help or "")
        assert f"{name} {summary}" in shown, (name, summary)
    assert not CUT.search(done.stdout), CUT.search(done.stdout)


@pytest.mark.parametrize("width", WIDTHS, ids=lambda w: f"columns-{w}")
def test_every_command_help_is_whole(
    width: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", str(width))
    for path, group in _groups():
        code, out, _ = run_cli([*path, "--help"], capsys)
        assert code == 0
        for name, command in group.commands.items():
            assert f"{name} {_first_sentence(command.help or '')}" in _flat(out), name
            code, sub, _ = run_cli([*path, name, "--help"], capsys)
            assert code == 0, name
            assert _flat(command.help or "").split(". ")[0] in _flat(sub), name
            assert not CUT.search(sub), (name, sub)
