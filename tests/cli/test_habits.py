"""Habits of ruff/uv users (issue 18): `-h`, global flags after the command, `test --json`,
`[tool.lineup]` in pyproject.toml, completion of `--template`, file/line in annotations,
relative JUnit paths, the pre-commit hook, `diff --trust`, idempotent `init`, and the
README's commands as written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lineup_build.cli import main
from lineup_build.init import init_project
from tests.cli_kit import run_cli

REPO = Path(__file__).resolve().parents[2]


def _command_paths() -> list[list[str]]:
    """Every command of the CLI as the words that name it (`["trust", "add"]`, ...)."""
    import typer

    from lineup_build.cli._app import app

    root = typer.main.get_command(app)
    out: list[list[str]] = []

    def walk(group: object, prefix: list[str]) -> None:
        for name, sub in getattr(group, "commands", {}).items():
            if getattr(sub, "commands", None):
                walk(sub, [*prefix, name])
            else:
                out.append([*prefix, name])

    walk(root, [])
    return out


# --- 1. -h is --help ---------------------------------------------------------------------


def test_dash_h_is_help_on_the_root_and_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(["-h"], capsys)
    assert code == 0 and out.startswith("Usage: lineup")
    commands = _command_paths()
    assert ["trust", "add"] in commands and ["check"] in commands
    for words in [*commands, ["trust"]]:
        code, out, err = run_cli([*words, "-h"], capsys)
        assert code == 0, (words, err)
        assert out.startswith(f"Usage: lineup {' '.join(words)}"), words


# --- 2. -q / -v after the command --------------------------------------------------------


@pytest.fixture(scope="module")
def todo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    project = tmp_path_factory.mktemp("habits") / "my-todo"
    init_project(project, template="todo")
    return project


def test_quiet_after_the_command_is_quiet(todo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["check", str(todo), "-q"], capsys) == (0, "", "")
    assert run_cli(["check", str(todo), "--quiet"], capsys) == (0, "", "")
    assert run_cli(["-q", "check", str(todo)], capsys) == (0, "", "")
    code, out, _ = run_cli(["check", str(todo)], capsys)
    assert code == 0 and out


def test_verbose_after_the_command_shows_the_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from lineup_sdk.errors import LineupError

    assert run_cli(["keygen", "--out", str(tmp_path)], capsys)[0] == 0
    for args, code in (
        (["keygen", "--out", str(tmp_path), "-v"], "key_exists"),  # typer's path
        (["verify", str(tmp_path / "x.lineup"), "-v"], "usage_invalid"),  # the fast path
        (["verify", str(tmp_path / "x.lineup"), "--verbose", "--json"], "usage_invalid"),
    ):
        with pytest.raises(LineupError) as raised:  # re-raised past the exit path
            main(args)
        assert raised.value.code == code, args
        assert f"error {code}" in capsys.readouterr().err or "--json" in args


def test_quiet_and_verbose_after_the_command_contradict(
    todo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from lineup_sdk.errors import LineupError

    for args in (
        ["check", str(todo), "-q", "-v"],
        ["-v", "check", str(todo), "-q"],
        ["-q", "check", str(todo), "--verbose"],
    ):
        with pytest.raises(LineupError) as raised:  # -v: re-raised past the exit path
            main(args)
        assert raised.value.code == "usage_invalid" and raised.value.exit_code == 2, args
        assert "error usage_invalid" in capsys.readouterr().err


# --- 3. test --json ----------------------------------------------------------------------


def _timeless(doc: object) -> object:
    """A JSON document without its timings (`seconds`), to compare two runs."""
    if isinstance(doc, dict):
        return {k: _timeless(v) for k, v in doc.items() if k != "seconds"}
    if isinstance(doc, list):
        return [_timeless(v) for v in doc]
    return doc


@pytest.fixture(scope="module")
def focus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    project = tmp_path_factory.mktemp("habits") / "focus"
    init_project(project, template="pomodoro")
    return project


def test_test_json_is_format_json(focus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["test", str(focus), "-k", "happy"]
    code, by_format, _ = run_cli([*args, "--format", "json"], capsys)
    assert code == 0
    code, by_flag, _ = run_cli([*args, "--json"], capsys)
    assert code == 0
    assert _timeless(json.loads(by_flag)) == _timeless(json.loads(by_format))
    code, both, _ = run_cli([*args, "--json", "--format", "json"], capsys)
    assert code == 0 and _timeless(json.loads(both)) == _timeless(json.loads(by_format))


@pytest.mark.parametrize("other", ["text", "github"])
def test_test_json_with_another_format_is_usage_invalid(
    focus: Path, other: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_cli(["test", str(focus), "--json", "--format", other], capsys)
    assert code == 2 and json.loads(out)["error"]["code"] == "usage_invalid"
