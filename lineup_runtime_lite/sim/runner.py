"""`lineup test` as library functions: collect scenario files, play each in a fresh embedded
runtime on the virtual clock, and report as data, JUnit XML or CI annotations (SPEC 9)."""

from __future__ import annotations

import contextlib
import fnmatch
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol
from xml.etree import ElementTree as ET

from lineup_runtime_lite.api.async_runtime import DEFAULT_ISOLATION
from lineup_runtime_lite.sim.format import load_scenario
from lineup_runtime_lite.sim.simulation import Simulation, StepReport
from lineup_runtime_lite.store.postgres import private_schema
from lineup_sdk.errors import LineupError

__all__ = [
    "Case",
    "CaseResult",
    "SuiteReport",
    "collect_cases",
    "find_project",
    "github_annotations",
    "junit_xml",
    "play_suite",
]

CONFIG = "lineup.toml"


class Built(Protocol):
    """A project's bundle, ready to install: what the builder `play_suite` is given makes."""

    @property
    def bundle(self) -> Path: ...

    @property
    def trust(self) -> Any: ...

    @property
    def scope(self) -> str: ...


def find_project(start: Path) -> Path | None:
    """The nearest folder at or above `start` that is a MiniApp project: it holds a
    `lineup.toml` or a `pyproject.toml` with a `[tool.lineup]` table."""
    from lineup_build.config import is_project

    here = start.resolve()
    for folder in (here, *here.parents):
        if is_project(folder):
            return folder
    return None


@dataclass(frozen=True)
class Case:
    """One scenario file of one project."""

    project: Path
    path: Path

    @property
    def name(self) -> str:
        """The scenario's path relative to its project, e.g. `scenarios/happy.toml`."""
        try:
            return self.path.relative_to(self.project).as_posix()
        except ValueError:
            return self.path.as_posix()


def _no_project(path: Path) -> LineupError:
    return LineupError(
        "usage_invalid",
        f"{path} is not inside a MiniApp project (no {CONFIG}, nor a pyproject.toml with "
        "[tool.lineup], here or above)",
        hint="run `lineup test` in a project, or name a project folder or scenario file",
        exit_code=2,
    )


def collect_cases(paths: list[Path], *, cwd: Path, pattern: str | None = None) -> list[Case]:
    """The scenarios to play: a project folder gives every `scenarios/**/*.toml`, another
    folder every `*.toml` below it, a file itself; no path means the project containing
    `cwd`. Each file once, in order; `pattern` keeps names containing it (or matching it
    as a glob).

    Raises:
        LineupError: `usage_invalid` for a path that does not exist or is outside a project.
    """
    cases: list[Case] = []
    seen: set[Path] = set()

    def add(project: Path, files: list[Path]) -> None:
        for file in files:
            resolved = file.resolve()
            if resolved not in seen:
                seen.add(resolved)
                cases.append(Case(project, resolved))

    for given in paths or [cwd]:
        target = given if given.is_absolute() else cwd / given
        if not target.exists():
            raise LineupError("usage_invalid", f"{given} does not exist", exit_code=2)
        if target.is_dir():
            project = find_project(target)
            if project is None:
                raise _no_project(given)
            base = target / "scenarios" if target.resolve() == project else target
            add(project, sorted(base.rglob("*.toml")) if base.is_dir() else [])
        else:
            project = find_project(target.parent)
            if project is None:
                raise _no_project(given)
            add(project, [target])
    if pattern:
        glob = any(c in pattern for c in "*?[")
        cases = [
            c for c in cases if (fnmatch.fnmatch(c.name, pattern) if glob else pattern in c.name)
        ]
    return cases


@dataclass
class CaseResult:
    """How one scenario went: its steps, or the error that kept it from playing."""

    case: Case
    ok: bool
    seconds: float
    steps: list[StepReport] = field(default_factory=list)
    error: LineupError | None = None

    @property
    def failed_step(self) -> StepReport | None:
        return next((s for s in self.steps if not s.ok), None)

    def message(self) -> str:
        """One line saying why it failed (empty when it passed)."""
        if self.error is not None:
            return f"{self.error.code}: {self.error.message}"
        step = self.failed_step
        if step is None:
            return ""
        return f"step {step.index} ({step.description}): {step.problem}"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.case.name,
            "project": str(self.case.project),
            "path": str(self.case.path),
            "ok": self.ok,
            "seconds": round(self.seconds, 3),
            "steps": len(self.steps),
        }
        if not self.ok:
            out["message"] = self.message()
            if self.error is not None:
                out["error"] = self.error.to_dict()
            out["failed"] = [s.to_dict() for s in self.steps if not s.ok]
        return out


@dataclass
class SuiteReport:
    """Every scenario's result, in the order played."""

    results: list[CaseResult]
    seconds: float

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.results)

    def to_dict(self) -> dict[str, Any]:
        failed = sum(1 for r in self.results if not r.ok)
        return {
            "ok": self.ok,
            "passed": len(self.results) - failed,
            "failed": failed,
            "seconds": round(self.seconds, 3),
            "scenarios": [r.to_dict() for r in self.results],
        }


def _play(
    case: Case, built: Built, sandbox: str, isolation: str, database: str | None
) -> list[StepReport]:
    scenario = load_scenario(case.path)
    tmp = Path(tempfile.mkdtemp(prefix="lineup-test-"))
    sim = Simulation(
        database or tmp / "runtime.db",
        built.trust,
        built.bundle,
        built.scope,
        scenario.host_policy or "auto",
        sandbox,
        isolation,
        private_schema("test") if database else None,
        scratch=tmp,
    )
    try:
        sim.start()
        return sim.play(scenario)
    finally:
        sim.close()


def play_suite(
    cases: list[Case],
    build: Callable[[Path], Built],
    *,
    sandbox: str = "best_effort",
    isolation: str = DEFAULT_ISOLATION,
    database: str | None = None,
) -> SuiteReport:
    """Play each case in a fresh runtime; never stops at a failure. `build(project)` makes
    each project's bundle once (the CLI builds it with the project's dev key); a
    `LineupError` it raises fails that project's cases. With a `postgresql://` `database`,
    each case plays in a private schema there, dropped when it ends."""
    started = time.monotonic()
    builds: dict[Path, Built | LineupError] = {}
    results: list[CaseResult] = []
    for case in cases:
        t0 = time.monotonic()
        if case.project not in builds:
            try:
                builds[case.project] = build(case.project)
            except LineupError as exc:
                builds[case.project] = exc
        built = builds[case.project]
        try:
            if isinstance(built, LineupError):
                raise built
            steps = _play(case, built, sandbox, isolation, database)
        except LineupError as exc:
            results.append(CaseResult(case, False, time.monotonic() - t0, error=exc))
            continue
        ok = all(s.ok for s in steps)
        results.append(CaseResult(case, ok, time.monotonic() - t0, steps))
    return SuiteReport(results, time.monotonic() - started)


def _shown(path: Path, root: Path | None) -> Path:
    """`path` relative to `root` (the working folder) when it lies inside it, else as is."""
    if root is not None:
        with contextlib.suppress(ValueError):  # outside the root: keep it absolute
            return path.relative_to(root.resolve())
    return path


def junit_xml(report: SuiteReport, *, root: Path | None = None) -> str:
    """JUnit XML: one testsuite, one testcase per scenario; each `file` relative to `root`
    (the working folder) when it lies inside it, else absolute."""
    failures = sum(1 for r in report.results if not r.ok and r.error is None)
    errors = sum(1 for r in report.results if r.error is not None)
    suite = ET.Element(
        "testsuite",
        name="lineup test",
        tests=str(len(report.results)),
        failures=str(failures),
        errors=str(errors),
        time=f"{report.seconds:.3f}",
    )
    for r in report.results:
        case = ET.SubElement(
            suite,
            "testcase",
            classname=r.case.project.name,
            name=r.case.name,
            file=_shown(r.case.path, root).as_posix(),
            time=f"{r.seconds:.3f}",
        )
        if r.ok:
            continue
        tag = "error" if r.error is not None else "failure"
        code = r.error.code if r.error is not None else "expectation_failed"
        node = ET.SubElement(case, tag, type=code, message=r.message())
        node.text = (
            "\n".join(f"step {s.index} ({s.description}): {s.problem}" for s in r.steps if not s.ok)
            or r.message()
        )
    ET.indent(suite)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suite, "unicode") + "\n"


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def github_annotations(report: SuiteReport, *, root: Path | None = None) -> list[str]:
    """GitHub workflow commands (`::error file=...,line=...::...`), one per failing step, at
    its `[[step]]` line; a malformed scenario at the line of the step named first (else 1)."""
    out = []
    for r in report.results:
        if r.ok:
            continue
        file = _escape_property(_shown(r.case.path, root).as_posix())
        if r.error is not None:
            details = r.error.details if isinstance(r.error.details, list) else []
            first = details[0] if details and isinstance(details[0], dict) else {}
            line = first.get("line", 1)
            out.append(f"::error file={file},line={line}::{_escape_data(r.message())}")
            continue
        for s in r.steps:
            if not s.ok:
                text = f"step {s.index} ({s.description}): {s.problem}"
                out.append(f"::error file={file},line={s.line or 1}::{_escape_data(text)}")
    return out
