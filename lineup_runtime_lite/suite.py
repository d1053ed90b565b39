"""The suite runner's stable import path: `collect_cases`, `play_suite` with a builder,
`junit_xml` and `github_annotations` (their home is `lineup_runtime_lite.sim.runner`)."""

from __future__ import annotations

from lineup_runtime_lite.sim.runner import (
    Case,
    CaseResult,
    SuiteReport,
    collect_cases,
    find_project,
    github_annotations,
    junit_xml,
    play_suite,
)

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
