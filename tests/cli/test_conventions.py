"""CLI conventions (issue 11, item 4): the trust-store option and its default, global
verbosity, `lineup.toml` found upward, `check FILE...`, one JSON envelope, plain output
without a terminal, and the corrected codes."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from lineup_build.cli import main
from lineup_build.init import init_project
from lineup_build.signing import write_keypair
from tests.cli_kit import run_cli

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def released(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A pomodoro project (it ships scenarios), its bundle signed by a release key, and a store trusting that key."""
    root = tmp_path_factory.mktemp("conv")
    project = root / "pomodoro"
    init_project(project, template="pomodoro")
    _, pub, _ = write_keypair(root / "keys")
    priv = root / "keys" / "lineup-signing.pem"
    with pytest.raises(SystemExit) as built:
        main(["build", str(project), "--key", str(priv), "--json"])
    assert built.value.code == 0
    store = root / "store.toml"
    with pytest.raises(SystemExit) as added:
        main(["trust", "add", str(pub), "--scope", "pomodoro", "--trust", str(store), "--json"])
    assert added.value.code in (0, None)
    bundle = next((project / "dist").glob("*.lineup"))
    return {"root": root, "project": project, "bundle": bundle, "store": store, "pub": pub}


# --- codes corrected -------------------------------------------------------------------


def test_keygen_into_a_folder_with_a_key_is_key_exists(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(["keygen", "--out", str(tmp_path)], capsys)[0] == 0
    code, out, _ = run_cli(["keygen", "--out", str(tmp_path), "--json"], capsys)
    doc = json.loads(out)
    assert code == 2 and doc["error"]["code"] == "key_exists" and doc["error"]["hint"]


def test_key_exists_is_a_documented_code() -> None:
    from lineup_sdk.codes import CODES

    assert "key_exists" in CODES
    errors = (REPO / "docs" / "reference" / "errors.md").read_text("utf-8")
    assert re.search(r"^\| `key_exists` \| .+ \| .+ \|$", errors, re.MULTILINE)


def test_run_bundle_without_trust_is_usage_invalid(
    released: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli(["run", str(released["bundle"])], capsys)
    assert code == 2 and "error usage_invalid" in err and "hint:" in err


def test_run_host_bogus_is_usage_invalid(
    released: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_cli(["run", str(released["project"]), "--host", "bogus", "--json"], capsys)
    assert code == 2 and json.loads(out)["error"]["code"] == "usage_invalid"


def test_run_without_terminal_or_scenario_is_usage_invalid(
    released: dict[str, Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys.stdin, "isatty", lambda: False)
    code, out, _ = run_cli(["run", str(released["project"]), "--json"], capsys)
    assert code == 2 and json.loads(out)["error"]["code"] == "usage_invalid"


# --- the trust store: --trust, LINEUP_TRUST_STORE, ./trust.toml --------------------------

TRUST_READERS: dict[str, Callable[[dict[str, Path]], list[str]]] = {
    "verify": lambda r: ["verify", str(r["bundle"])],
    "inspect": lambda r: ["inspect", str(r["bundle"])],
    "trust-list": lambda r: ["trust", "list"],
    "run": lambda r: [
        "run",
        str(r["bundle"]),
        "--scenario",
        str(r["project"] / "scenarios" / "happy.toml"),
    ],
}


HOWS = ["option", "environment", "working-folder"]
TRUST_CASES = [(c, h) for c in TRUST_READERS for h in HOWS] + [("trust-list", "store-alias")]


@pytest.mark.parametrize(("command", "how"), TRUST_CASES, ids=[f"{c}-{h}" for c, h in TRUST_CASES])
def test_every_trust_reading_command_finds_the_store(
    command: str,
    how: str,
    released: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    args = TRUST_READERS[command](released)
    monkeypatch.chdir(tmp_path)
    store = released["store"]
    if how == "option":
        args += ["--trust", str(store)]
    elif how == "store-alias":
        args += ["--store", str(store)]
    elif how == "environment":
        monkeypatch.setenv("LINEUP_TRUST_STORE", str(store))
    else:
        (tmp_path / "trust.toml").write_bytes(store.read_bytes())
    code, out, err = run_cli([*args, "--json"], capsys)
    assert code == 0, (out, err)
    last = json.loads(out.splitlines()[-1])
    assert last["ok"] is True and last["schema_version"] == 1
    if command in ("verify", "inspect"):
        assert last["signature"] == "valid"


@pytest.mark.parametrize("command", ["verify", "trust-list", "run"])
def test_a_trust_reading_command_without_a_store_is_usage_invalid(
    command: str,
    released: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, _ = run_cli([*TRUST_READERS[command](released), "--json"], capsys)
    doc = json.loads(out.splitlines()[-1])
    assert code == 2 and doc["error"]["code"] == "usage_invalid" and doc["ok"] is False
    assert "--trust" in doc["error"]["hint"]


def test_inspect_needs_no_trust_store(
    released: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, _ = run_cli(["inspect", str(released["bundle"]), "--json"], capsys)
    doc = json.loads(out)
    assert code == 0 and doc["signature"] == "unchecked" and doc["diagnostics"] == []


def test_serve_a_bundle_without_a_store_is_usage_invalid(
    released: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli(["serve", str(released["bundle"])], capsys)
    assert code == 2 and "usage_invalid" in err and "--trust" in err


def test_trust_add_writes_the_environment_store(
    released: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LINEUP_TRUST_STORE", str(tmp_path / "env.toml"))
    code, _, _ = run_cli(["trust", "add", str(released["pub"]), "--scope", "pomodoro"], capsys)
    assert code == 0 and (tmp_path / "env.toml").is_file()
    assert not (tmp_path / "trust.toml").exists()


# --- lineup.toml upward, check FILE... ----------------------------------------------------


def test_check_from_a_subfolder_finds_the_project(
    released: dict[str, Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(released["project"] / "surface")
    code, out, _ = run_cli(["check", "--json"], capsys)
    doc = json.loads(out)
    assert code == 0 and doc["ok"] is True and "pomodoro.start" in doc["tools"]
    assert [p["path"] for p in doc["projects"]] == [str(released["project"])]


def test_build_from_a_subfolder_finds_the_project(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "demo"
    init_project(project, template="blank")
    monkeypatch.chdir(project / "demo_app")
    code, out, _ = run_cli(["build", "--dev-key", "--json"], capsys)
    assert code == 0 and Path(json.loads(out)["bundle"]).parent == project / "dist"


def test_test_from_a_subfolder_plays_the_project(
    released: dict[str, Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(released["project"] / "scenarios")
    code, out, _ = run_cli(["test", "--format", "json"], capsys)
    doc = json.loads(out)
    assert code == 0 and doc["schema_version"] == 1 and doc["passed"] >= 1


def test_check_with_file_arguments_checks_each_project_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    init_project(one, template="blank")
    init_project(two, template="todo")
    tools_one, tools_two = (next(p.rglob("tools.py")) for p in (one, two))
    files = [tools_one, one / "lineup.toml", tools_two, two / "lineup.toml"]
    code, out, _ = run_cli(["check", *map(str, files), "--json"], capsys)
    doc = json.loads(out)
    assert code == 0, doc
    assert [p["path"] for p in doc["projects"]] == [str(one), str(two)]


def test_check_reports_a_broken_project_among_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good, bad = tmp_path / "good", tmp_path / "bad"
    init_project(good, template="blank")
    init_project(bad, template="blank")
    (bad / "lineup.toml").write_text("[app]\nscope = 'Bad Scope'\n")
    code, out, _ = run_cli(
        ["check", str(good / "lineup.toml"), str(bad / "lineup.toml"), "--json"], capsys
    )
    doc = json.loads(out)
    assert code == 1 and doc["ok"] is False
    assert [p["ok"] for p in doc["projects"]] == [True, False]
    assert any(d["code"] == "config_invalid" for d in doc["diagnostics"])


def _hooks(text: str) -> list[dict[str, str]]:
    """The `.pre-commit-hooks.yaml` shape: a list of flat mappings of scalars."""
    hooks: list[dict[str, str]] = []
    for raw in text.splitlines():
        line = raw.split(" #")[0].rstrip() if not raw.lstrip().startswith("#") else ""
        if not line:
            continue
        if line.startswith("- "):
            hooks.append({})
            line = "  " + line[2:]
        key, _, value = line.strip().partition(":")
        hooks[-1][key] = value.strip()
    return hooks


def test_pre_commit_hook_runs_lineup_check_on_files(tmp_path: Path) -> None:
    hooks = _hooks((REPO / ".pre-commit-hooks.yaml").read_text("utf-8"))
    (hook,) = (h for h in hooks if h["id"] == "lineup-check")
    assert hook["entry"] == "lineup check" and hook["language"] == "python"
    assert hook["pass_filenames"] == "true"
    pattern = re.compile(hook["files"])
    project = tmp_path / "demo"
    init_project(project, template="blank")
    changed = sorted(
        p.relative_to(tmp_path).as_posix()
        for p in project.rglob("*")
        if p.is_file() and pattern.search(p.relative_to(tmp_path).as_posix())
    )
    assert "demo/lineup.toml" in changed and any(c.endswith(".py") for c in changed)
    entry = shlex.split(hook["entry"])
    assert entry[0] == "lineup"
    command = [sys.executable, "-c", "from lineup_build.cli import main; main()", *entry[1:]]
    done = subprocess.run([*command, *changed], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    (project / "lineup.toml").write_text("[app]\n")
    failed = subprocess.run([*command, *changed], cwd=tmp_path, capture_output=True, text=True)
    assert failed.returncode == 1 and "config_invalid" in failed.stderr


# --- one JSON envelope ---------------------------------------------------------------------

ENVELOPED: dict[str, Callable[[dict[str, Path], Path], list[str]]] = {
    "init": lambda r, t: ["init", str(t / "new"), "--json"],
    "check": lambda r, t: ["check", str(r["project"]), "--json"],
    "build": lambda r, t: ["build", str(r["project"]), "--dev-key", "--out", str(t), "--json"],
    "keygen": lambda r, t: ["keygen", "--out", str(t / "k"), "--json"],
    "verify": lambda r, t: ["verify", str(r["bundle"]), "--trust", str(r["store"]), "--json"],
    "inspect": lambda r, t: ["inspect", str(r["bundle"]), "--json"],
    "trust-add": lambda r, t: [
        "trust",
        "add",
        str(r["pub"]),
        "--scope",
        "todo",
        "--trust",
        str(t / "s.toml"),
        "--json",
    ],
    "trust-revoke": lambda r, t: [
        "trust",
        "revoke",
        "0" * 32,
        "--trust",
        str(t / "s.toml"),
        "--json",
    ],
    "trust-list": lambda r, t: ["trust", "list", "--trust", str(r["store"]), "--json"],
    "diff": lambda r, t: ["diff", str(r["bundle"]), str(r["project"]), "--json"],
    "docs": lambda r, t: ["docs", str(r["bundle"]), "--json"],
    "test": lambda r, t: ["test", str(r["project"]), "--format", "json"],
}


@pytest.mark.parametrize("command", ENVELOPED, ids=list(ENVELOPED))
def test_every_command_prints_the_json_envelope(
    command: str, released: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_cli(ENVELOPED[command](released, tmp_path), capsys)
    assert out.count("\n") == 1, out  # one line, success printed like failure
    doc = json.loads(out)
    assert code == (0 if doc["ok"] else 1)
    assert doc["schema_version"] == 1 and isinstance(doc["diagnostics"], list)
    assert out == json.dumps(doc, sort_keys=True, ensure_ascii=False) + "\n"


@pytest.mark.parametrize("command", ["check", "verify", "keygen", "trust-list"])
def test_errors_print_the_json_envelope(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "junk.lineup").write_bytes(b"not a zip")
    (tmp_path / "bad.toml").write_text("not = [toml")
    (tmp_path / "k").mkdir()
    (tmp_path / "k" / "lineup-signing.pem").write_text("x")
    args = {
        "check": ["check", str(tmp_path / "nowhere")],
        "verify": ["verify", str(tmp_path / "junk.lineup"), "--trust", str(tmp_path / "bad.toml")],
        "keygen": ["keygen", "--out", str(tmp_path / "k")],
        "trust-list": ["trust", "list", "--trust", str(tmp_path / "bad.toml")],
    }[command]
    code, out, _ = run_cli([*args, "--json"], capsys)
    doc = json.loads(out)
    assert code != 0 and doc["ok"] is False and doc["schema_version"] == 1
    assert doc["diagnostics"] and all("code" in d for d in doc["diagnostics"])
    if "error" in doc:
        assert {"code", "message", "hint"} <= set(doc["error"])


def test_run_json_lines_carry_the_schema_version(
    released: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    scenarios = sorted((released["project"] / "scenarios").glob("*.toml"))
    args = ["run", str(released["project"]), "--scenario", str(scenarios[0]), "--json"]
    code, out, _ = run_cli(args, capsys)
    lines = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and len(lines) >= 2
    assert all(doc["schema_version"] == 1 for doc in lines)
    assert lines[-1]["ok"] is True and lines[-1]["diagnostics"] == []


# --- output: no wrapping, --quiet, --verbose, --source --------------------------------------


def test_no_wrapping_without_a_terminal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    project = tmp_path / ("a-rather-long-project-folder-name-" * 3)
    init_project(project, template="blank", scope="demo")
    (project / "lineup.toml").write_text(
        (project / "lineup.toml").read_text() + "\nbogus_key_that_is_not_allowed = 1\n"
    )
    code, _, err = run_cli(["check", str(project)], capsys)
    assert code == 1
    lines = [line for line in err.splitlines() if "config_invalid" in line]
    assert lines and len(lines[0]) > 80  # the whole diagnostic on one line
    assert "\x1b[" not in err  # and no colour codes


def test_quiet_prints_only_errors(
    released: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli(["-q", "check", str(released["project"])], capsys)
    assert code == 0 and out == "" and err == ""
    code, out, err = run_cli(["-q", "check", str(released["root"] / "nowhere")], capsys)
    assert code == 1 and "config_invalid" in err


def test_verbose_shows_the_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from lineup_sdk.errors import LineupError

    with pytest.raises(LineupError) as raised:  # re-raised past the exit path
        main(["-v", "verify", str(tmp_path / "x.lineup")])
    assert raised.value.code == "usage_invalid"
    assert "error usage_invalid" in capsys.readouterr().err


def test_verify_source_says_it_checked_the_source(
    released: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["verify", str(released["bundle"]), "--trust", str(released["store"])]
    code, out, _ = run_cli([*args, "--source", str(released["project"])], capsys)
    assert code == 0 and f"and matches the source {released['project']}" in out
    code, out, _ = run_cli(args, capsys)
    assert code == 0 and "matches the source" not in out


def test_shell_completion_is_on(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(["--help"], capsys)
    assert code == 0 and "--install-completion" in out


# --- the verify fast path ----------------------------------------------------------------


def test_the_verify_path_imports_no_typer_rich_jsonschema_or_pydantic(
    released: dict[str, Path],
) -> None:
    script = (
        "import sys\n"
        "from lineup_build.cli import main\n"
        "try:\n"
        f"    main(['verify', {str(released['bundle'])!r}, '--trust', {str(released['store'])!r}])\n"
        "except SystemExit as exc:\n"
        "    assert exc.code == 0, exc.code\n"
        "heavy = ('typer', 'click', 'rich', 'jsonschema', 'pydantic', 'pydantic_core')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "verified" in done.stdout
    assert done.stdout.splitlines()[-1] == "[]"


def test_the_fast_path_leaves_other_spellings_to_typer(capsys: pytest.CaptureFixture[str]) -> None:
    from lineup_build.cli._fast import parse_verify

    assert parse_verify(["verify", "b.lineup", "--trust", "t.toml"]) is not None
    assert parse_verify(["-q", "verify", "b.lineup", "--json", "--trust=t.toml"]) is not None
    for args in (
        ["verify", "--help"],
        ["verify"],
        ["verify", "a", "b"],
        ["verify", "b", "--trust"],
        ["verify", "b", "--bogus"],
        ["verify", "b", "--json", "--json"],
        ["check", "b"],
    ):
        assert parse_verify(args) is None, args
    code, out, _ = run_cli(["verify", "--help"], capsys)
    assert code == 0 and "--trust" in out and "--source" in out
