"""LineUp build: check declarations, generate the signed manifest and the bundle."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lineup_build.build import BuildResult, CheckResult, build_project, check_project
    from lineup_build.diagnostics import Diagnostic, Where
    from lineup_build.diff import Change, DiffReport, diff_manifests
    from lineup_build.docs import docs_html, docs_markdown
    from lineup_build.init import init_project
    from lineup_build.trust import TrustedKey, TrustStore
    from lineup_build.verify import (
        Limits,
        VerifiedBundle,
        VerifyError,
        VerifyReport,
        check_bundle,
        verify_bundle,
    )

__all__ = [
    "BuildResult",
    "Change",
    "CheckResult",
    "Diagnostic",
    "DiffReport",
    "Limits",
    "TrustStore",
    "TrustedKey",
    "VerifiedBundle",
    "VerifyError",
    "VerifyReport",
    "Where",
    "build_project",
    "check_bundle",
    "check_project",
    "diff_manifests",
    "docs_html",
    "docs_markdown",
    "init_project",
    "verify_bundle",
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
    "Change": "lineup_build.diff",
    "DiffReport": "lineup_build.diff",
    "diff_manifests": "lineup_build.diff",
    "docs_html": "lineup_build.docs",
    "docs_markdown": "lineup_build.docs",
    "init_project": "lineup_build.init",
    "Limits": "lineup_build.verify",
    "TrustStore": "lineup_build.trust",
    "TrustedKey": "lineup_build.trust",
    "VerifiedBundle": "lineup_build.verify",
    "VerifyError": "lineup_build.verify",
    "VerifyReport": "lineup_build.verify",
    "check_bundle": "lineup_build.verify",
    "verify_bundle": "lineup_build.verify",
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
