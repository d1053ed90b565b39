"""LineUp build: check declarations, generate the signed manifest and the bundle."""

from lineup_build.build import BuildResult, CheckResult, build_project, check_project
from lineup_build.diagnostics import Diagnostic, Where
from lineup_build.init import init_project

__all__ = [
    "BuildResult",
    "CheckResult",
    "Diagnostic",
    "Where",
    "build_project",
    "check_project",
    "init_project",
]
