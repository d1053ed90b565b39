"""What people read (issue 18): plain lines without a terminal, a timeline that shows each
message whole and says what each step checked, prompt mistakes with their usage line, hints
that fit the cause, and the error code in every failure line."""

from __future__ import annotations

import ast
import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from lineup_build.init import init_project
from tests.cli_kit import run_cli

_BOX = set("┏┓┗┛┃━┡┩╇┳┻│─┌┐└┘├┤┬┴┼…")
_CLI = Path(__file__).parents[2] / "lineup_build" / "cli"


@pytest.fixture(scope="module")
def hello(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("render") / "hello"
    init_project(root, template="blank")
    return root


def _scenario(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "s.toml"
    path.write_text(text)
    return path


def _rows(out: str) -> list[list[str]]:
    """The timeline's plain rows, each split into its columns (two spaces or more)."""
    import re

    lines = out.splitlines()
    start = lines.index("timeline") + 2  # the title, then the header
    return [re.split(r"  +", line) for line in lines[start:] if line[:1].isdigit()]


def test_tables_without_a_terminal_are_plain_lines(
    hello: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli(
        ["run", str(hello), "--scenario", str(hello / "scenarios" / "hello.toml")], capsys
    )
    assert code == 0, out + err
    assert not _BOX & set(out), out
    lines = out.splitlines()
    assert lines[0] == "timeline"
    assert lines[1].split() == ["#", "at", "step", "emitted", "expect"]
    assert [r[0] for r in _rows(out)] == ["1", "2"]
    code, out, _ = run_cli(["build", str(hello), "--dev-key"], capsys)
    assert code == 0 and not _BOX & set(out), out
    assert any(line.startswith("hello.hello  ") for line in out.splitlines()), out


def test_timeline_shows_results_whole(
    hello: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name = "Ada " + "x" * 70
    scenario = _scenario(
        tmp_path,
        f'[[step]]\ncall = {{ id = "h1", conversation = "c1", method = "hello.hello", '
        f'params = {{ name = "{name}" }} }}\n',
    )
    code, out, _ = run_cli(["run", str(hello), "--scenario", str(scenario)], capsys)
    assert code == 0, out
    assert f"h1 result Hello, {name}!" in out
    assert "…" not in out


def test_timeline_shows_invalid_params_pointers(
    hello: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = _scenario(
        tmp_path,
        '[[step]]\ncall = { id = "h1", conversation = "c1", method = "hello.hello", '
        "params = { name = 1, extra = true } }\n",
    )
    code, out, _ = run_cli(["run", str(hello), "--scenario", str(scenario)], capsys)
    assert code == 0, out
    emitted = _rows(out)[0][3]
    assert emitted.startswith("h1 error invalid_params: ")
    assert "/extra: " in emitted and "/name: " in emitted


def test_expect_column_says_what_was_checked(
    hello: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    call = 'call = { id = "h%d", conversation = "c1", method = "hello.hello", params = { name = "A" } }\n'
    scenario = _scenario(
        tmp_path,
        "[[step]]\n" + call % 1 + "[[step]]\n" + call % 2 + 'expect = [{ result = "Hello, A!" }]\n',
    )
    code, out, _ = run_cli(["run", str(hello), "--scenario", str(scenario)], capsys)
    assert code == 0, out
    assert [r[-1] for r in _rows(out)] == ["-", "ok"]


def _prompt(
    hello: Path,
    typed: list[str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> str:
    lines = iter([*typed, "quit"])
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True)
    monkeypatch.setattr("builtins.input", lambda prompt="": next(lines))
    code, out, err = run_cli(["run", str(hello)], capsys)
    assert code == 0, out + err
    return out


def test_prompt_call_without_id_and_conversation_is_a_usage_error(
    hello: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _prompt(hello, ['call hello.hello {"name": "run"}'], monkeypatch, capsys)
    assert "unknown_method" not in out
    assert (
        "usage_invalid: call needs an ID, a CONVERSATION and a METHOD; got only 'hello.hello'"
        in out
    )
    assert "usage: call ID CONVERSATION METHOD [JSON]" in out


@pytest.mark.parametrize(
    ("typed", "message", "usage"),
    [
        ("bogus 1", "unknown command 'bogus'", "type `help` for the commands"),
        (
            "advance soon",
            "advance: `clock.advance`: 'soon' is not a duration",
            "usage: advance DURATION",
        ),
        ("advance", "advance: wrong arguments (nothing)", "usage: advance DURATION"),
        (
            "host teleport c1",
            "host: `host.event`: Input should be",
            "usage: host EVENT CONVERSATION [SCOPE]",
        ),
        ("host c1", "host: wrong arguments (c1)", "usage: host EVENT CONVERSATION [SCOPE]"),
        ("call h1 c1 hello.hello {oops", "the params are not JSON", "usage: call ID CONVERSATION"),
        ("call h1 c1 hello.hello a b", "'a b' is one too many", "usage: call ID CONVERSATION"),
        ("data", "data: wrong arguments (nothing)", "usage: data CONVERSATION [SCOPE]"),
        ("im 'c1", "cannot split the line", "usage: im CONVERSATION"),
        ("restart now", "restart: wrong arguments (now)", "usage: restart"),
    ],
    ids=[
        "unknown",
        "bad-duration",
        "no-duration",
        "bad-event",
        "host-one-word",
        "bad-json",
        "two-methods",
        "data-nothing",
        "unbalanced-quote",
        "restart-argument",
    ],
)
def test_prompt_mistakes_say_what_and_show_the_usage_line(
    hello: Path,
    typed: str,
    message: str,
    usage: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = _prompt(hello, [typed], monkeypatch, capsys)
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("usage_invalid: "))
    assert message in lines[at], out
    assert lines[at + 1].strip().startswith(usage), out
    assert "cannot read" not in out


def _bundle(hello: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    assert run_cli(["build", str(hello), "--dev-key"], capsys)[0] == 0
    return next((hello / "dist").glob("*.lineup"))


_HAPPY = "scenarios/hello.toml"
Case = Callable[[Path, Path, Path], list[str]]


@pytest.mark.parametrize(
    ("args", "code", "hint"),
    [
        (
            lambda hello, bundle, tmp: [
                "run",
                str(bundle),
                "--trust",
                str(tmp / "none.toml"),
                "--scenario",
                str(hello / _HAPPY),
                "--json",
            ],
            "trust_store_invalid",
            "create it with `lineup trust add PUBKEY --scope SCOPE --trust ",
        ),
        (
            lambda hello, bundle, tmp: [
                "verify",
                str(bundle),
                "--trust",
                str(tmp / "none.toml"),
                "--json",
            ],
            "trust_store_invalid",
            "or pass --trust FILE",
        ),
        (
            lambda hello, bundle, tmp: [
                "run",
                str(tmp / "no-such-folder"),
                "--scenario",
                str(hello / _HAPPY),
                "--json",
            ],
            "usage_invalid",
            "check the path",
        ),
        (
            lambda hello, bundle, tmp: ["inspect", str(tmp / "no-such.lineup"), "--json"],
            "bundle_unreadable",
            "check the path",
        ),
        (
            lambda hello, bundle, tmp: [
                "run",
                str(hello),
                "--scenario",
                str(tmp / "none.toml"),
                "--json",
            ],
            "scenario_invalid",
            "check the path; `lineup test` plays and lists every scenarios/**/*.toml",
        ),
    ],
    ids=[
        "run-trust-file",
        "verify-trust-file",
        "run-folder",
        "inspect-bundle",
        "run-scenario-file",
    ],
)
def test_a_missing_file_has_a_hint_that_fits(
    hello: Path,
    tmp_path: Path,
    args: Case,
    code: str,
    hint: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    bundle = _bundle(hello, capsys)
    status, out, err = run_cli(args(hello, bundle, tmp_path), capsys)
    assert status != 0, out + err
    doc = json.loads(out.splitlines()[-1])
    problem = doc["diagnostics"][0]
    assert problem["code"] == code, doc
    assert hint in problem["hint"], doc
    assert "Rebuild" not in problem["hint"] and "Fix the named" not in problem["hint"]


_WRONG_STAGE = (
    '[[step]]\ncall = { id = "h1", conversation = "c1", method = "hello.hello", params = { name = 1 } }\n'
    'expect = [{ stage = "accepted" }]\n'
)


def test_a_wrong_stage_failure_names_the_error_code(
    hello: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "wrong"
    init_project(project, template="blank", scope="hello")
    scenario = project / "scenarios" / "wrong_stage.toml"
    scenario.write_text(_WRONG_STAGE)
    code, out, err = run_cli(["test", str(scenario)], capsys)
    assert code == 1, out + err
    failing = [line for line in out.splitlines() if "step 1 (" in line]
    assert failing and all("(got error invalid_params: " in line for line in failing), out
    code, out, err = run_cli(["run", str(hello), "--scenario", str(scenario)], capsys)
    assert code == 1
    assert "error expectation_failed: " in err and "(got error invalid_params: " in err
    assert _rows(out)[0][-1].startswith("FAIL: ") and "got error invalid_params" in out


def test_outside_text_reaches_rich_only_as_values() -> None:
    """Every `_render.line` outside `_render` has a constant template: outside text can
    only be one of its `{}` values, which are escaped (SPEC 13.1, STYLE 27)."""
    offenders = []
    for path in sorted(_CLI.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("line", "_say", "print")
                and not (node.args and isinstance(node.args[0], ast.Constant))
                and not (path.name == "_render.py" and node.func.attr != "line")
            ):
                offenders.append(f"{path.name}:{node.lineno}")
    assert offenders == []
