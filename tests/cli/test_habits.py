"""Habits of ruff/uv users (issue 18): `-h`, global flags after the command, `test --json`,
`[tool.lineup]` in pyproject.toml, completion of `--template`, file/line in annotations,
relative JUnit paths, the pre-commit hook, `diff --trust`, idempotent `init`, and the
README's commands as written."""

from __future__ import annotations

import json
import re
import subprocess
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


# --- 4. [tool.lineup] in pyproject.toml --------------------------------------------------


def _to_pyproject(project: Path) -> str:
    """Move `project`'s `lineup.toml` into a `pyproject.toml` as `[tool.lineup.app]`; the
    pyproject's text (a `[project]` table first, so the lines move)."""
    config = (project / "lineup.toml").read_text("utf-8")
    (project / "lineup.toml").unlink()
    text = '[project]\nname = "demo"\nversion = "0"\n\n' + config.replace(
        "[app", "[tool.lineup.app"
    )
    (project / "pyproject.toml").write_text(text, "utf-8")
    return text


@pytest.fixture()
def py_project(tmp_path: Path) -> Path:
    project = tmp_path / "my-todo"
    init_project(project, template="todo")
    _to_pyproject(project)
    return project


def test_check_and_build_find_tool_lineup_upward(
    py_project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(py_project / "surface")  # found upward, as lineup.toml is
    code, out, err = run_cli(["check", "--strict", "--json"], capsys)
    doc = json.loads(out)
    assert code == 0, out + err
    assert [p["path"] for p in doc["projects"]] == [str(py_project)]
    code, out, err = run_cli(["build", "--dev-key", "--json"], capsys)
    assert code == 0, out + err
    assert Path(json.loads(out)["bundle"]).name == "my_todo-1.0.0.lineup"


def test_a_pyproject_without_tool_lineup_is_not_a_project(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "my-todo"
    init_project(project, template="todo")
    (project / "pkg").mkdir()
    (project / "pkg" / "pyproject.toml").write_text('[project]\nname = "x"\n[tool.ruff]\n')
    monkeypatch.chdir(project / "pkg")  # passes the plain pyproject.toml, finds lineup.toml
    code, out, _ = run_cli(["check", "--json"], capsys)
    assert code == 0 and json.loads(out)["projects"][0]["path"] == str(project)


def test_errors_in_tool_lineup_point_at_pyproject_lines(
    py_project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (py_project / "pyproject.toml").read_text("utf-8")
    text = text.replace('version = "1.0.0"', 'version = "one"')
    (py_project / "pyproject.toml").write_text(text, "utf-8")
    line = text.splitlines().index('version = "one"') + 1
    assert line > 4  # below the [project] table: a lineup.toml line would differ
    code, out, _ = run_cli(["check", str(py_project), "--json"], capsys)
    (diag,) = json.loads(out)["diagnostics"]
    assert code == 1 and diag["code"] == "config_invalid"
    assert (diag["file"], diag["line"]) == ("pyproject.toml", line)
    assert "tool.lineup.app.version" in diag["message"]
    (py_project / "pyproject.toml").write_text(text + "\n[tool.lineup.app\n", "utf-8")
    code, out, _ = run_cli(["check", str(py_project), "--json"], capsys)
    (diag,) = json.loads(out)["diagnostics"]
    assert code == 1 and diag["code"] == "config_invalid" and diag["file"] == "pyproject.toml"
    assert diag["line"] == len(text.splitlines()) + 2


def test_lineup_toml_wins_over_tool_lineup_with_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "my-todo"
    init_project(project, template="todo")
    config = (project / "lineup.toml").read_text("utf-8")
    shadowed = config.replace("[app", "[tool.lineup.app").replace('"1.0.0"', '"9.0.0"')
    (project / "pyproject.toml").write_text(shadowed, "utf-8")
    code, out, _ = run_cli(["check", str(project), "--json"], capsys)
    doc = json.loads(out)
    assert code == 0 and [d["code"] for d in doc["diagnostics"]] == ["config_shadowed"]
    (warning,) = doc["diagnostics"]
    assert warning["severity"] == "warning" and warning["file"] == "pyproject.toml"
    code, out, _ = run_cli(["build", str(project), "--dev-key", "--json"], capsys)
    assert code == 0 and Path(json.loads(out)["bundle"]).name == "my_todo-1.0.0.lineup"
    code, _, err = run_cli(["check", str(project)], capsys)
    assert code == 0 and "config_shadowed" in err + _


def test_config_shadowed_is_a_documented_code() -> None:
    import re

    from lineup_sdk.codes import CODES

    assert "config_shadowed" in CODES
    errors = (REPO / "docs" / "reference" / "errors.md").read_text("utf-8")
    assert re.search(r"^\| `config_shadowed` \| .+ \| .+ \|$", errors, re.MULTILINE)


def test_test_and_verify_source_read_tool_lineup(
    py_project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(py_project)
    code, out, err = run_cli(["test", "--json"], capsys)
    assert code == 0 and json.loads(out)["scenarios"], out + err
    code, out, _ = run_cli(["build", "--dev-key", "--json"], capsys)
    bundle = json.loads(out)["bundle"]
    assert (
        run_cli(["trust", "add", ".lineup/dev-key.pub.pem", "--scope", "my_todo"], capsys)[0] == 0
    )
    code, out, err = run_cli(["verify", bundle, "--source", ".", "--json"], capsys)
    assert code == 0 and json.loads(out)["ok"], out + err
    tools = py_project / "my_todo_app" / "tools.py"
    tools.write_text(tools.read_text("utf-8") + "\n# changed\n", "utf-8")
    code, out, _ = run_cli(["verify", bundle, "--source", ".", "--json"], capsys)
    assert code == 1 and "stale_bundle" in out


# --- 5. completion of --template ---------------------------------------------------------


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        ("lineup init demo --template ", ["blank", "pomodoro", "todo"]),
        ("lineup init demo -t po", ["pomodoro"]),
        ("lineup init demo --template t", ["todo"]),
    ],
    ids=["all", "short-option-prefix", "prefix"],
)
def test_template_values_complete_in_bash(tmp_path: Path, words: str, expected: list[str]) -> None:
    """As bash asks (the script `lineup --install-completion` installs sets these)."""
    import os
    import subprocess
    import sys

    env = {
        **os.environ,
        "_LINEUP_COMPLETE": "complete_bash",
        "COMP_WORDS": words,
        "COMP_CWORD": str(len(words.split(" ")) - 1),
    }
    done = subprocess.run(
        [sys.executable, "-c", "from lineup_build.cli import main; main()"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == expected


# --- 7. JUnit file attributes ------------------------------------------------------------


def test_junit_files_are_relative_to_the_working_folder(
    focus: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from xml.etree import ElementTree as ET

    monkeypatch.chdir(focus.parent)
    code, _, _ = run_cli(["test", "focus", "-k", "happy", "--junit", "report.xml"], capsys)
    assert code == 0
    (case,) = ET.parse(focus.parent / "report.xml").getroot().iter("testcase")
    assert case.get("file") == "focus/scenarios/happy.toml"
    monkeypatch.chdir(tmp_path)  # the project lies outside the working folder: absolute
    code, _, _ = run_cli(["test", str(focus), "-k", "happy", "--junit", "out.xml"], capsys)
    assert code == 0
    (case,) = ET.parse(tmp_path / "out.xml").getroot().iter("testcase")
    assert case.get("file") == (focus / "scenarios" / "happy.toml").resolve().as_posix()


# --- 10. init run again ------------------------------------------------------------------


def _readme_main_job() -> str:
    """The README's main-job command chain from `lineup init` on (the venv and install
    steps before it are what this test process already is)."""
    from tests.users.readme_blocks import newcomer_commands

    chain = newcomer_commands((REPO / "README.md").read_text("utf-8"))[0]
    assert " && lineup init " in chain
    return "lineup init " + chain.split(" && lineup init ", 1)[1]


def _shell(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`command` in bash, with this interpreter's `lineup` first on PATH."""
    import os
    import sys

    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    env.pop("LINEUP_TRUST_STORE", None)
    return subprocess.run(
        ["bash", "-c", f"set -euo pipefail; {command}"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


def test_the_main_job_runs_twice(tmp_path: Path) -> None:
    chain = _readme_main_job()
    first = _shell(chain, tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    second = _shell(chain, tmp_path)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "already initialised, nothing written" in second.stderr
    assert second.stdout.count("\n") >= 1  # the scenario played again


def test_init_still_refuses_a_changed_or_foreign_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["init", str(tmp_path / "focus"), "--template", "pomodoro"]
    assert run_cli(args, capsys)[0] == 0
    code, out, err = run_cli(args, capsys)
    assert code == 0 and out == "" and "already initialised, nothing written" in err
    code, out, _ = run_cli([*args, "--json"], capsys)
    assert code == 0 and json.loads(out)["written"] is False
    readme = tmp_path / "focus" / "README.md"
    readme.write_text(readme.read_text("utf-8") + "my notes\n", "utf-8")  # changed
    code, out, _ = run_cli([*args, "--json"], capsys)
    assert code == 1 and json.loads(out)["error"]["code"] == "init_target_not_empty"
    other = ["init", str(tmp_path / "focus"), "--template", "todo", "--json"]
    code, out, _ = run_cli(other, capsys)  # another template's output is not this one's
    assert code == 1 and json.loads(out)["error"]["code"] == "init_target_not_empty"
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("x")
    code, out, _ = run_cli(["init", str(tmp_path / "mine"), "--json"], capsys)
    assert code == 1 and json.loads(out)["error"]["code"] == "init_target_not_empty"


# --- 6. diff --format github: file= and line= --------------------------------------------


def _tighter(project: Path, to: Path, version: str) -> Path:
    """A copy of the todo project `project` with `todo.add`'s title limit lowered."""
    import shutil

    shutil.copytree(project, to)
    toml = to / "lineup.toml"
    toml.write_text(toml.read_text().replace('version = "1.0.0"', f'version = "{version}"'))
    tools = to / "my_todo_app" / "tools.py"
    tools.write_text(tools.read_text().replace("max_length=200", "max_length=100"))
    return to


def _annotations(out: str) -> list[dict[str, str]]:
    """The `::level file=...,line=...,title=...::` commands of `out`, as their properties."""
    found = []
    for line in out.splitlines():
        if line.startswith("::"):
            level, _, rest = line[2:].partition(" ")
            props = rest.split("::", 1)[0]
            found.append({"level": level, **dict(p.split("=", 1) for p in props.split(","))})
    return found


def test_diff_github_annotations_point_at_the_declaration(
    todo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    shutil.copytree(todo, tmp_path / "old")
    _tighter(todo, tmp_path / "new", "1.1.0")
    tools = (tmp_path / "new" / "my_todo_app" / "tools.py").read_text().splitlines()
    declared = next(i for i, text in enumerate(tools, 1) if "max_length=100" in text)
    monkeypatch.chdir(tmp_path)
    code, out, _ = run_cli(["diff", "old", "new", "--format", "github"], capsys)
    assert code == 1
    first, *_, verdict = _annotations(out)
    assert first["file"] == "new/my_todo_app/tools.py"
    assert 1 <= int(first["line"]) <= declared  # the tool's decorator, above its parameter
    assert "def add" in "\n".join(tools[int(first["line"]) - 1 : declared + 3])
    assert (verdict["level"], verdict["file"], verdict["line"]) == ("error", "new/lineup.toml", "1")


def test_diff_github_annotations_of_bundles_name_the_bundle_at_line_1(
    todo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    new = _tighter(todo, tmp_path / "new", "1.1.0")
    monkeypatch.chdir(tmp_path)
    for folder in (todo, new):
        assert (
            run_cli(["build", str(folder), "--dev-key", "--out", "dist", "--json"], capsys)[0] == 0
        )
    code, out, _ = run_cli(
        ["diff", str(todo), "dist/my_todo-1.1.0.lineup", "--format", "github"], capsys
    )
    assert code == 1
    found = _annotations(out)
    assert found and all(
        (a["file"], a["line"]) == ("dist/my_todo-1.1.0.lineup", "1") for a in found
    )


# --- 9. diff --trust ---------------------------------------------------------------------


@pytest.fixture()
def signed(todo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Path]:
    """Bundles 1.0.0 and 1.1.0 signed by one release key; a store trusting it, another not."""
    from lineup_build.signing import write_keypair

    new = _tighter(todo, tmp_path / "new", "2.0.0")
    priv, pub, _ = write_keypair(tmp_path / "keys")
    _, other_pub, _ = write_keypair(tmp_path / "other")
    out: dict[str, Path] = {}
    for name, folder in (("old", todo), ("new", new)):
        args = ["build", str(folder), "--key", str(priv), "--out", str(tmp_path / name), "--json"]
        code, doc, _ = run_cli(args, capsys)
        assert code == 0
        out[name] = Path(json.loads(doc)["bundle"])
    for name, key in (("trusted", pub), ("untrusted", other_pub)):
        store = tmp_path / f"{name}.toml"
        args = ["trust", "add", str(key), "--scope", "my_todo", "--trust", str(store)]
        assert run_cli(args, capsys)[0] == 0
        out[name] = store
    return out


def test_diff_verifies_bundles_against_the_trust_store(
    signed: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bundles = [str(signed["old"]), str(signed["new"])]
    code, out, _ = run_cli(["diff", *bundles, "--trust", str(signed["trusted"]), "--json"], capsys)
    assert code == 0 and json.loads(out)["ok"]
    code, out, _ = run_cli(
        ["diff", *bundles, "--trust", str(signed["untrusted"]), "--json"], capsys
    )
    error = json.loads(out)["error"]
    assert code == 1 and error["code"] == "untrusted_key" and "OLD" in error["message"]
    code, verified, _ = run_cli(
        ["verify", bundles[0], "--trust", str(signed["untrusted"]), "--json"], capsys
    )
    assert code == 1 and json.loads(verified)["diagnostics"][0]["code"] == error["code"]
    # the default store, as every command has it: $LINEUP_TRUST_STORE, else ./trust.toml
    monkeypatch.setenv("LINEUP_TRUST_STORE", str(signed["untrusted"]))
    code, out, _ = run_cli(["diff", *bundles, "--json"], capsys)
    assert code == 1 and json.loads(out)["error"]["code"] == "untrusted_key"
    monkeypatch.delenv("LINEUP_TRUST_STORE")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "trust.toml").write_bytes(signed["untrusted"].read_bytes())
    code, out, _ = run_cli(["diff", *bundles, "--json"], capsys)
    assert code == 1 and json.loads(out)["error"]["code"] == "untrusted_key"
    (tmp_path / "trust.toml").unlink()  # no store at all: compared unverified, as before
    code, out, _ = run_cli(["diff", *bundles, "--json"], capsys)
    assert code == 0


# --- 8. the pre-commit hook --------------------------------------------------------------


def _hook() -> dict[str, str]:
    """The `lineup-check` hook of `.pre-commit-hooks.yaml` (a list of flat mappings)."""
    import yaml

    hooks = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text("utf-8"))
    (hook,) = (h for h in hooks if h["id"] == "lineup-check")
    return {k: str(v).lower() if isinstance(v, bool) else v for k, v in hook.items()}


def test_the_pre_commit_hook_prints_each_problem_once(tmp_path: Path) -> None:
    """As pre-commit runs a hook: the matching files split over parallel processes (as
    many as CPUs, at least 2 here) unless `require_serial` — then one process gets all."""
    import re
    import shlex
    import sys

    hook = _hook()
    assert hook["require_serial"] == "true"
    project = tmp_path / "demo"
    init_project(project, template="todo")
    tools = project / "demo_app" / "tools.py"
    tools.write_text(tools.read_text().replace('    """Mark one item as done."""\n', ""))
    pattern = re.compile(hook["files"])
    files = sorted(
        p.relative_to(tmp_path).as_posix()
        for p in project.rglob("*")
        if p.is_file() and pattern.search(p.relative_to(tmp_path).as_posix())
    )
    assert len(files) >= 3
    jobs = 1 if hook.get("require_serial") == "true" else 2
    command = [sys.executable, "-c", "from lineup_build.cli import main; main()"]
    command += shlex.split(hook["entry"])[1:]
    printed = ""
    for part in range(jobs):
        chunk = files[part::jobs]
        done = subprocess.run(
            [*command, *chunk], cwd=tmp_path, capture_output=True, text=True, check=False
        )
        printed += done.stdout + done.stderr
    problems = [line for line in printed.splitlines() if "missing_description" in line]
    assert len(problems) == 1, printed


def test_the_generated_pre_commit_config_says_it_needs_lineup_on_path(tmp_path: Path) -> None:
    for template in ("blank", "todo", "pomodoro"):
        project = tmp_path / template
        init_project(project, template=template)
        config = (project / ".pre-commit-config.yaml").read_text("utf-8")
        assert "language: system" in config and "`lineup` from\n# PATH" in config
        readme = (project / "README.md").read_text("utf-8")
        assert "runs the `lineup` on PATH" in readme


# --- 11. the READMEs' install and verify lines -------------------------------------------


def _bash_blocks(text: str) -> list[str]:
    import re

    return re.findall(r"```bash\n(.*?)```", text, re.DOTALL)


def test_the_template_readme_install_line_installs_pytest(tmp_path: Path) -> None:
    for template in ("blank", "todo", "pomodoro"):
        project = tmp_path / template
        init_project(project, template=template)
        blocks = _bash_blocks((project / "README.md").read_text("utf-8"))
        installs = [b for b in blocks if "pip install" in b]
        runs_pytest = [b for b in blocks if re.search(r"^pytest\b", b, re.MULTILINE)]
        assert installs and runs_pytest, template
        (install,) = installs
        assert re.search(r"pip install \"lineup-sdk==[^\"]+\" pytest$", install.strip()), install
        assert blocks.index(install) < blocks.index(runs_pytest[0])


def test_the_docs_verify_a_dev_key_build_beside_the_release_as_written(tmp_path: Path) -> None:
    """The signing guide's release block, then its dev-key block: the dev build verifies,
    in its own folder against its own trust file; the release bundle and the release trust
    store are as the release block left them (issue 35)."""
    page = (REPO / "docs" / "guides" / "signing-and-trust.md").read_text("utf-8")
    (release,) = (b for b in _bash_blocks(page) if "lineup keygen" in b)
    (dev,) = (b for b in _bash_blocks(page) if "dev-key.pub.pem" in b)
    done = _shell(release, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    bundle = tmp_path / "my-todo" / "dist" / "my_todo-1.0.0.lineup"
    signed, trusted = bundle.read_bytes(), (tmp_path / "trust.toml").read_text("utf-8")
    done = _shell(dev, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "verified" in done.stdout
    assert (tmp_path / "my-todo" / "dev-dist" / "my_todo-1.0.0.lineup").is_file()
    assert bundle.read_bytes() == signed, "the dev build overwrote the release bundle"
    assert (tmp_path / "trust.toml").read_text("utf-8") == trusted, "dev key in the release store"
    assert "my_todo" in (tmp_path / "dev-trust.toml").read_text("utf-8")


# --- 12. .ci/run says what it installs ---------------------------------------------------


def test_ci_run_echoes_before_each_install_step() -> None:
    lines = [
        line.strip()
        for line in (REPO / ".ci" / "run").read_text("utf-8").splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    installs = [
        i
        for i, line in enumerate(lines)
        if not line.startswith("echo ") and re.search(r"\b(pip|npm) install\b|-m venv\b", line)
    ]
    assert len(installs) >= 3
    for i in installs:
        assert lines[i - 1].startswith("echo "), lines[i]
