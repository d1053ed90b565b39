"""Outside text on a real terminal (SPEC 13.1): a `[` in a name, a folder, a typed prompt
line or a scenario value is shown as written and never crashes a command. Each test runs
`lineup` as a process on a pseudo-terminal, where rich renders (a captured stream would
take the plain path and hide the crash)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lineup_build.init import init_project
from tests.cli_kit import run_on_terminal

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _text(shown: str) -> str:
    """What a person reads: colours gone, line ends plain."""
    return _ANSI.sub("", shown).replace("\r\n", "\n")


def _no_crash(shown: str) -> None:
    assert "Traceback" not in shown and "MarkupError" not in shown, shown


@pytest.fixture(scope="module")
def hello(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("terminal") / "hello"
    init_project(root, template="blank")
    return root


def test_init_a_name_with_a_closing_tag(tmp_path: Path) -> None:
    code, shown = run_on_terminal(["init", "x[/y]"], cwd=tmp_path)
    _no_crash(shown)
    assert code == 0, shown
    text = _text(shown)
    assert "created x[/y] from template blank" in text
    assert "next: lineup check x[/y]" in text
    assert (tmp_path / "x[/y]" / "lineup.toml").is_file()


def test_prompt_line_with_a_closing_tag(hello: Path, tmp_path: Path) -> None:
    typed = "foo [/oops]\nadvance [/oops]\nquit\n"
    code, shown = run_on_terminal(["run", str(hello)], cwd=tmp_path, typed=typed)
    _no_crash(shown)
    assert code == 0, shown
    text = _text(shown)
    assert "usage_invalid: unknown command 'foo'" in text
    assert "'[/oops]' is not a duration" in text
    assert "usage: advance DURATION" in text


def test_scenario_values_with_markup_in_the_timeline(hello: Path, tmp_path: Path) -> None:
    scenario = tmp_path / "markup.toml"
    scenario.write_text(
        "[[step]]\n"
        'call = { id = "[/i]", conversation = "[bold]c[/]", method = "hello.hello", '
        'params = { name = "[red]Ada[/]" } }\n'
    )
    code, shown = run_on_terminal(
        ["run", str(hello), "--scenario", str(scenario)], cwd=tmp_path, columns=200
    )
    _no_crash(shown)
    assert code == 0, shown
    text = _text(shown)
    assert "[bold]c[/]" in text and "[/i]" in text
    assert "Hello, [red]Ada[/]!" in text


def test_a_folder_with_brackets_checks_and_builds(tmp_path: Path) -> None:
    project = tmp_path / "my[/app]"
    init_project(project, template="blank", scope="bracketed")
    code, shown = run_on_terminal(["check", str(project)], cwd=tmp_path)
    _no_crash(shown)
    assert code == 0, shown
    code, shown = run_on_terminal(["build", str(project), "--dev-key"], cwd=tmp_path)
    _no_crash(shown)
    assert code == 0, shown
    assert "my[/app]" in _text(shown).replace("\n", "")
