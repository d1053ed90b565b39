"""The generated workflow's breaking-change gate, played in a real git repository.

The step's shell script is taken from the workflow `lineup init` renders and run with
the variables GitHub Actions sets (`GITHUB_REF_NAME`, `RUNNER_TEMP`): the first release
passes and says so; a later release tag is compared with the previous release's source in
a second work tree and fails on a breaking change without a major bump.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from lineup_build.init import init_project
from tests.workflow_kit import render_workflow, step_named

STEP = "Compare with the previous release"


def gate_script(template: str) -> str:
    """The `run:` block of the gate step, from the workflow `lineup init` renders."""
    return str(step_named(render_workflow(template), "breaking-change-gate", STEP)["run"])


@pytest.mark.parametrize("template", ["blank", "todo", "pomodoro"])
def test_every_template_runs_the_gate_on_release_tags(template: str) -> None:
    job = render_workflow(template)["jobs"]["breaking-change-gate"]
    assert job["if"] == "startsWith(github.ref, 'refs/tags/v')"
    checkout = next(s for s in job["steps"] if s.get("uses", "").startswith("actions/checkout@"))
    assert checkout["with"]["fetch-depth"] == 0
    script = gate_script(template)
    assert "git worktree add" in script and "lineup diff" in script
    assert gate_script(template) == gate_script("todo")


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=repo,
        check=True,
        capture_output=True,
    )


def _play(repo: Path, tag: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    runner_temp = tmp / f"runner-{tag}"
    runner_temp.mkdir()
    env = {
        **os.environ,
        "GITHUB_REF_NAME": tag,
        "RUNNER_TEMP": str(runner_temp),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    return subprocess.run(
        ["bash", "-e", "-c", gate_script("todo")],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


def _release(repo: Path, version: str, edit: tuple[str, str] | None = None) -> None:
    toml = repo / "lineup.toml"
    text = toml.read_text()
    toml.write_text(text.replace(text.split('version = "')[1].split('"')[0], version, 1))
    if edit is not None:
        tools = repo / "todo_app" / "tools.py"
        tools.write_text(tools.read_text().replace(*edit))
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", f"release {version}")
    _git(repo, "tag", f"v{version}")


def test_gate_in_a_repository(tmp_path: Path) -> None:
    repo = tmp_path / "todo"
    init_project(repo, template="todo")
    _git(repo, "init", "-q")
    _release(repo, "1.0.0")

    first = _play(repo, "v1.0.0", tmp_path)
    assert first.returncode == 0, first.stderr
    assert "::notice title=lineup diff::first release" in first.stdout

    _release(repo, "1.0.1", ("max_length=200", "max_length=300"))
    compatible = _play(repo, "v1.0.1", tmp_path)
    assert compatible.returncode == 0, compatible.stdout + compatible.stderr
    assert "comparing with the previous release v1.0.0" in compatible.stdout
    # at the tool's declaration in the checked-out release (file=, line=)
    assert "::notice file=todo_app/tools.py,line=" in compatible.stdout
    assert ",title=Change in todo.add::" in compatible.stdout

    _git(repo, "tag", "v2.0.0-rc.1")  # a pre-release is never "the previous release"
    _release(repo, "1.1.0", ("max_length=300", "max_length=100"))
    breaking = _play(repo, "v1.1.0", tmp_path)
    assert breaking.returncode == 1, breaking.stdout + breaking.stderr
    assert "comparing with the previous release v1.0.1" in breaking.stdout
    assert "::error file=todo_app/tools.py,line=" in breaking.stdout
    assert ",title=Breaking change in todo.add::params.title" in breaking.stdout
