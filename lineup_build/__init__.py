"""LineUp build: check declarations, generate the signed manifest and the bundle."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

# Loaded on first use, so the console script (`lineup_build.cli`) starts without the
# build machinery and `lineup --version` stays fast.
_LAZY = {
    "BuildResult": "lineup_build.build",
    "CheckResult": "lineup_build.build",
    "build_project": "lineup_build.build",
    "check_project": "lineup_build.build",
    "Diagnostic": "lineup_build.diagnostics",
    "Where": "lineup_build.diagnostics",
    "init_project": "lineup_build.init",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'lineup_build' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
