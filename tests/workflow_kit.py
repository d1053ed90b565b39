"""The generated GitHub workflow as data, and a small local runner that plays its jobs.

`render_workflow` renders a template as `lineup init` does and parses its workflow with PyYAML.
`WorkflowRunner` plays the jobs an event would start, the way a GitHub-hosted runner does:
each job gets a fresh checkout of the pushed commit (a shallow clone unless the step asks for
`fetch-depth: 0`, so only committed files exist), `actions/setup-python` puts the given
interpreter's folder first on `PATH`, every `run:` step is written to a file and run with
`bash --noprofile --norc -eo pipefail` (GitHub's default shell) under the workflow's, the
job's and the step's `env`, and `actions/upload-artifact` collects its `path` glob. The only
expressions understood are `${{ secrets.NAME }}` (from the faked secrets) and the job
condition `startsWith(github.ref, 'refs/tags/v')`; anything else fails the test, so a change
to the workflow cannot be silently skipped by the runner.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from lineup_build.init import init_project

TAG_CONDITION = "startsWith(github.ref, 'refs/tags/v')"
_SECRET = re.compile(r"\$\{\{\s*secrets\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
_KNOWN_ACTIONS = ("actions/checkout@", "actions/setup-python@", "actions/upload-artifact@")


def load_workflow(path: Path) -> dict[str, Any]:
    """The workflow file as data (PyYAML reads the key `on` as True; it is put back)."""
    doc = yaml.safe_load(path.read_text())
    assert isinstance(doc, dict)
    if True in doc:
        doc["on"] = doc.pop(True)
    return doc


def render_workflow(template: str) -> dict[str, Any]:
    """The workflow of a project freshly rendered from `template`."""
    with tempfile.TemporaryDirectory() as tmp:
        init_project(Path(tmp) / "app", template=template)
        return load_workflow(Path(tmp) / "app/.github/workflows/lineup.yml")


def step_named(workflow: dict[str, Any], job: str, name: str) -> dict[str, Any]:
    steps = workflow["jobs"][job]["steps"]
    (step,) = [s for s in steps if s.get("name") == name]
    assert isinstance(step, dict)
    return step


def jobs_for(workflow: dict[str, Any], ref: str) -> list[str]:
    """The jobs a push of `ref` starts, in an order that honours `needs`."""
    chosen: list[str] = []
    for name, job in workflow["jobs"].items():
        condition = job.get("if")
        assert condition in (None, TAG_CONDITION), f"job {name}: unknown condition {condition!r}"
        if condition is None or ref.startswith("refs/tags/v"):
            chosen.append(name)
    ordered: list[str] = []
    while len(ordered) < len(chosen):
        for name in chosen:
            needs = workflow["jobs"][name].get("needs", [])
            needs = [needs] if isinstance(needs, str) else needs
            if name not in ordered and all(n in ordered for n in needs):
                assert all(n in chosen for n in needs), f"{name} needs a job that does not run"
                ordered.append(name)
    return ordered


@dataclass
class StepRun:
    job: str
    name: str
    returncode: int
    stdout: str
    stderr: str


@dataclass
class JobRun:
    name: str
    steps: list[StepRun] = field(default_factory=list)
    artifacts: dict[str, list[Path]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(s.returncode == 0 for s in self.steps)

    @property
    def output(self) -> str:
        return "\n".join(f"--- {s.name}\n{s.stdout}{s.stderr}" for s in self.steps)


@dataclass
class WorkflowRunner:
    """Plays a workflow's jobs for one pushed ref of `origin` (a git repository)."""

    origin: Path
    work: Path
    python_bin: Path
    secrets: dict[str, str]
    base_env: dict[str, str]

    def _expand(self, value: Any) -> str:
        text = str(value)
        text = _SECRET.sub(lambda m: self.secrets.get(m.group(1), ""), text)
        assert "${{" not in text, f"the runner does not understand {value!r}"
        return text

    def _checkout(self, workspace: Path, ref: str, with_: dict[str, Any]) -> None:
        branch = ref.removeprefix("refs/tags/").removeprefix("refs/heads/")
        depth = [] if str(with_.get("fetch-depth", 1)) == "0" else ["--depth", "1"]
        subprocess.run(
            [
                "git",
                "clone",
                "-q",
                *depth,
                "--branch",
                branch,
                self.origin.as_uri(),
                str(workspace),
            ],
            check=True,
            capture_output=True,
        )

    def run_job(self, workflow: dict[str, Any], name: str, ref: str) -> JobRun:
        job = workflow["jobs"][name]
        root = self.work / name
        workspace, runner_temp = root / "workspace", root / "runner-temp"
        runner_temp.mkdir(parents=True)
        env = dict(self.base_env)
        env.update(
            CI="true",
            GITHUB_ACTIONS="true",
            GITHUB_EVENT_NAME="push",
            GITHUB_REF=ref,
            GITHUB_REF_NAME=ref.removeprefix("refs/tags/").removeprefix("refs/heads/"),
            GITHUB_REF_TYPE="tag" if ref.startswith("refs/tags/") else "branch",
            GITHUB_WORKSPACE=str(workspace),
            RUNNER_TEMP=str(runner_temp),
        )
        for scope in (workflow.get("env", {}), job.get("env", {})):
            env.update({k: self._expand(v) for k, v in scope.items()})
        result = JobRun(name)
        for index, step in enumerate(job["steps"]):
            assert "if" not in step, f"{name} step {index}: step conditions are not replayed"
            label = step.get("name") or step.get("uses") or f"step {index}"
            uses = step.get("uses")
            if uses is not None:
                assert uses.startswith(_KNOWN_ACTIONS), f"the runner does not know {uses}"
                with_ = step.get("with", {})
                if uses.startswith("actions/checkout@"):
                    self._checkout(workspace, ref, with_)
                elif uses.startswith("actions/setup-python@"):
                    assert with_.get("python-version"), "setup-python without a version"
                    env["PATH"] = f"{self.python_bin}{os.pathsep}{env['PATH']}"
                else:
                    found = sorted(workspace.glob(with_["path"]))
                    assert with_.get("if-no-files-found") == "error"
                    if not found:
                        result.steps.append(StepRun(name, label, 1, "", "no files found"))
                        return result
                    result.artifacts[self._expand(with_["name"])] = found
                continue
            step_env = {**env, **{k: self._expand(v) for k, v in step.get("env", {}).items()}}
            script = runner_temp / f"step-{index}.sh"
            script.write_text(step["run"])
            proc = subprocess.run(
                ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
                cwd=workspace,
                env=step_env,
                capture_output=True,
                text=True,
                check=False,
                timeout=600,
            )
            result.steps.append(StepRun(name, label, proc.returncode, proc.stdout, proc.stderr))
            if proc.returncode != 0:
                break  # a failing step ends the job
        return result

    def play(
        self, workflow: dict[str, Any], ref: str, *, only: list[str] | None = None
    ) -> dict[str, JobRun]:
        """Every job `ref` starts (or those in `only`); a job whose `needs` failed is skipped."""
        runs: dict[str, JobRun] = {}
        for name in jobs_for(workflow, ref):
            if only is not None and name not in only:
                continue
            needs = workflow["jobs"][name].get("needs", [])
            needs = [needs] if isinstance(needs, str) else needs
            if any(n in runs and not runs[n].ok for n in needs):
                continue
            runs[name] = self.run_job(workflow, name, ref)
        return runs


def clean_path() -> str:
    """`PATH` without this interpreter's folder, so only the runner's toolchain is found."""
    here = str(Path(sys.executable).parent)
    return os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep) if p != here)
