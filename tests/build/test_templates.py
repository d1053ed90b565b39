"""Templates as products: `lineup init` renders the expected tree, which builds cleanly
through the real CLI entry point (in-process and as the installed console script)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from lineup_build.init import template_names, templates_root
from tests.cli_kit import run_cli

COMMON_FILES = [
    ".github/workflows/lineup.yml",
    ".gitignore",
    ".pre-commit-config.yaml",
    "README.md",
    "conftest.py",
    "lineup.toml",
    "my_app_app/__init__.py",
    "my_app_app/tools.py",
    "surface/index.html",
    "tests/test_tools.py",
]
SCENARIOS = {
    "blank": ["scenarios/hello.toml"],
    "todo": [
        "scenarios/add_list_complete.toml",
        "scenarios/complete_unknown_item.toml",
        "scenarios/tick_rename_delete.toml",
    ],
}
#: The Surface's browser test (the `lineup_dev` fixture) of the templates with a live Surface.
BROWSER_TESTS = {"blank": [], "todo": ["tests/test_surface.py"]}
#: The module of the templates with UI Actions (SPEC 17: the todo Surface's tick, rename, delete).
ACTION_FILES = {"blank": [], "todo": ["my_app_app/actions.py"]}
PROJECT_FILES = {
    t: sorted([*COMMON_FILES, *SCENARIOS[t], *BROWSER_TESTS[t], *ACTION_FILES[t]])
    for t in SCENARIOS
}
METHODS = {
    "blank": ["my_app.hello"],
    "todo": ["my_app.add", "my_app.complete", "my_app.list"],
}
ACTIONS = {"blank": [], "todo": ["my_app.delete", "my_app.rename", "my_app.toggle"]}


def tree(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def console_script() -> str:
    script = Path(sys.executable).with_name("lineup")
    assert script.exists(), f"the console script is not installed next to {sys.executable}"
    return str(script)


def test_templates_on_offer() -> None:
    assert {"blank", "todo"} <= set(template_names())


@pytest.mark.parametrize("template", ["blank", "todo"])
def test_init_then_build_through_the_cli(
    template: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "my-app"

    code, out, _ = run_cli(["init", str(target), "--template", template, "--json"], capsys)
    assert code == 0
    created = json.loads(out)
    assert created["ok"] and created["scope"] == "my_app" and created["template"] == template
    files = PROJECT_FILES[template]
    assert created["files"] == files
    assert tree(target) == files

    rendered = "\n".join(
        (target / f).read_text() for f in files if f != ".github/workflows/lineup.yml"
    )
    assert "{{" not in rendered and "{%" not in rendered and "{#" not in rendered
    assert 'scope = "my_app"' in (target / "lineup.toml").read_text()

    code, out, err = run_cli(["build", str(target), "--dev-key", "--json"], capsys)
    assert code == 0, err
    built = json.loads(out)
    assert built["ok"] is True and built["diagnostics"] == []
    bundle = Path(built["bundle"])
    assert bundle == target / "dist" / "my_app-1.0.0.lineup"
    assert tree(target) == sorted(
        [
            *files,
            ".lineup/.gitignore",
            ".lineup/dev-key.pem",
            ".lineup/dev-key.pub.pem",
            "dist/my_app-1.0.0.lineup",
        ]
    )
    with zipfile.ZipFile(bundle) as zf:
        names = zf.namelist()
        manifest = json.loads(zf.read("manifest.json"))
    assert names == [
        "manifest.json",
        "manifest.sig",
        "app/_lineup/surface.html",  # the Surface as one document (SPEC 18.2)
        "app/my_app_app/__init__.py",
        *(["app/my_app_app/actions.py"] if ACTIONS[template] else []),
        "app/my_app_app/tools.py",
        "app/surface/index.html",
    ]
    assert [t["method"] for t in manifest["tools"]] == METHODS[template]
    assert all(t["description"] for t in manifest["tools"])
    assert [a["name"] for a in manifest.get("ui_actions", [])] == ACTIONS[template]

    code, _, err = run_cli(["check", str(target), "--strict"], capsys)
    assert code == 0, err  # the templates carry no warnings either


@pytest.mark.parametrize("template", ["blank", "todo", "pomodoro"])
def test_workflow_is_rendered_with_the_pinned_toolchain(template: str, tmp_path: Path) -> None:
    from lineup_build.init import init_project
    from lineup_sdk import __version__

    init_project(tmp_path / "app", template=template)
    workflow = (tmp_path / "app/.github/workflows/lineup.yml").read_text()
    # GitHub's own expressions survive rendering; the jinja ones are gone
    assert "${{ secrets.LINEUP_SIGNING_KEY }}" in workflow
    assert "{%" not in workflow and "{#" not in workflow
    assert [e for e in workflow.split("${{")[1:] if "secrets." not in e.split("}}")[0]] == []
    # the install source is one line, pinned to the toolchain that generated the project
    pins = [line.strip() for line in workflow.splitlines() if "lineup-sdk==" in line]
    assert pins == [f"LINEUP_SDK: lineup-sdk=={__version__}"]
    assert workflow.count('pip install "$LINEUP_SDK"') == 3  # check, release, gate
    assert "pip install lineup-sdk" not in workflow


def test_gitignore_keeps_private_keys_and_dist_out_and_public_keys_in(tmp_path: Path) -> None:
    from lineup_build.init import init_project

    repo = tmp_path / "app"
    init_project(repo, template="todo")
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    paths = {
        ".lineup/dev-key.pem": True,
        ".lineup/dev-key.pub.pem": True,  # the whole dev-key folder stays local
        "keys/lineup-signing.pem": True,
        "lineup-signing.pem": True,
        "dist/app-1.0.0.lineup": True,
        "keys/lineup-signing.pub.pem": False,
        "trust.toml": False,
        "scenarios/a.toml": False,
        "tests/test_tools.py": False,
    }
    for rel in paths:
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).touch()
    proc = subprocess.run(
        ["git", "check-ignore", "--no-index", *paths],
        cwd=repo,
        capture_output=True,
        text=True,
        check=False,
    )
    assert set(proc.stdout.split()) == {rel for rel, ignored in paths.items() if ignored}


def test_dev_key_is_created_once_private_and_ignored(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "app"
    run_cli(["init", str(target), "--template", "blank"], capsys)
    key_ids = []
    for _ in range(2):
        code, out, _ = run_cli(["build", str(target), "--dev-key", "--json"], capsys)
        assert code == 0
        key_ids.append(json.loads(out)["key_id"])
        if len(key_ids) == 1:
            key = target / ".lineup/dev-key.pem"
            first_bytes, first_stat = key.read_bytes(), key.stat()

    assert key_ids[0] == key_ids[1]
    assert key.read_bytes() == first_bytes
    assert key.stat().st_ino == first_stat.st_ino
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert b"BEGIN PRIVATE KEY" in first_bytes
    assert (target / ".lineup/.gitignore").read_text().splitlines()[-1] == "*"


def test_init_refuses_a_non_empty_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "busy"
    target.mkdir()
    (target / "notes.txt").write_text("mine")

    code, _, err = run_cli(["init", str(target), "--template", "todo"], capsys)
    assert code == 1
    assert "init_target_not_empty" in err
    assert (target / "notes.txt").read_text() == "mine" and tree(target) == ["notes.txt"]

    code, out, _ = run_cli(["init", str(target), "--json"], capsys)
    assert code == 1
    assert json.loads(out)["error"]["code"] == "init_target_not_empty"


def test_init_accepts_an_existing_empty_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "empty").mkdir()
    code, _, _ = run_cli(["init", str(tmp_path / "empty"), "--template", "blank"], capsys)
    assert code == 0 and (tmp_path / "empty/lineup.toml").exists()


@pytest.mark.parametrize(
    ("args", "code", "exit_code", "hint"),
    [
        (["--template", "nope"], "template_unknown", 2, "todo"),
        ([], "scope_invalid", 2, "--scope"),
        (["--scope", "Not-Valid"], "scope_invalid", 2, "--scope"),
    ],
    ids=["unknown_template", "underivable_scope", "invalid_scope_option"],
)
def test_init_usage_errors(
    args: list[str],
    code: str,
    exit_code: int,
    hint: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    target = tmp_path / "123-go"  # no scope can be derived from a leading digit
    status, out, _ = run_cli(["init", str(target), *args, "--json"], capsys)
    assert status == exit_code
    error = json.loads(out)["error"]
    assert error["code"] == code
    assert hint in error["hint"]
    assert not target.exists()


def test_init_with_an_explicit_scope(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "123-go"
    code, out, _ = run_cli(["init", str(target), "--scope", "go", "--json"], capsys)
    assert code == 0
    assert json.loads(out)["scope"] == "go"
    assert (target / "go_app/tools.py").exists()


def test_console_script_init_and_build(tmp_path: Path) -> None:
    """The installed `lineup` script, run from a folder outside the checkout."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LINEUP_", "PYTHON"))}
    lineup = console_script()

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [lineup, *args], cwd=tmp_path, env=env, capture_output=True, text=True, check=False
        )

    init = run("init", "demo", "--template", "todo")
    assert init.returncode == 0, init.stderr
    assert "created" in init.stdout

    build = run("build", "demo", "--dev-key", "--json")
    assert build.returncode == 0, build.stderr
    doc = json.loads(build.stdout)
    assert doc["ok"] is True
    assert Path(doc["bundle"]).resolve() == (tmp_path / "demo/dist/demo-1.0.0.lineup").resolve()
    assert len(doc["manifest_sha256"]) == 64

    rejected = run("build", "demo")  # no key at all
    assert rejected.returncode == 1
    assert "signing_key_missing" in rejected.stderr


@pytest.mark.parametrize("template", ["blank", "todo", "pomodoro"])
def test_generated_scenarios_and_tests_pass(
    template: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """What the generated CI runs besides `check`: `lineup test` plays every shipped scenario
    (JUnit read back: one passing testcase per file) and `pytest` runs the shipped tests."""
    import xml.etree.ElementTree as ET

    from lineup_build.init import init_project

    target = tmp_path / "my-app"
    init_project(target, template=template)
    scenarios = sorted((target / "scenarios").glob("*.toml"))
    assert scenarios, "every template ships scenarios"

    report = tmp_path / "report.xml"
    code, out, err = run_cli(["test", str(target), "--junit", str(report)], capsys)
    assert code == 0, out + err
    cases = ET.parse(report).getroot().iter("testcase")
    outcomes = {c.get("name"): [child.tag for child in c] for c in cases}
    assert len(outcomes) == len(scenarios)
    assert all(tags == [] or tags == ["system-out"] for tags in outcomes.values()), outcomes

    env = {k: v for k, v in os.environ.items() if not k.startswith(("LINEUP_", "PYTEST_"))}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=target,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert " passed" in proc.stdout and "failed" not in proc.stdout and "skipped" not in proc.stdout


@pytest.mark.parametrize(
    "name",
    [
        ".github/workflows/lineup.yml.jinja",
        ".pre-commit-config.yaml.jinja",
        ".gitignore",
        "conftest.py",
    ],
)
def test_every_template_ships_the_same_project_plumbing(name: str) -> None:
    """One workflow, hook config, ignore list and conftest for all: they cannot drift apart."""
    sources = {(templates_root() / t / name).read_bytes() for t in template_names()}
    assert len(sources) == 1
