"""Where `lineup diff` and `lineup docs` get a manifest: a bundle file or a project folder.

A bundle is read with the safe reader and every check of `lineup inspect` (no trust store:
the signature is parsed, not checked); a bundle with any problem is refused, so a
tampered or hostile file is never compared or documented. A folder is checked and its
manifest generated exactly as `lineup build` would sign it, with nothing written.
"""

from __future__ import annotations

import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lineup_sdk.errors import LineupError

__all__ = ["ManifestSource", "load_manifest"]

_PATH_HINT = "pass a .lineup bundle or a MiniApp project folder (with lineup.toml)"


@dataclass(frozen=True)
class ManifestSource:
    """A manifest and where it came from.

    Attributes:
        path: The bundle file or project folder.
        kind: `bundle` or `project`.
        manifest: The manifest as data.
    """

    path: Path
    kind: str
    manifest: dict[str, Any]


def _from_bundle(path: Path, role: str) -> ManifestSource:
    from lineup_build.verify import check_bundle

    report = check_bundle(path, None)
    if report.problems or report.manifest is None:
        first = report.problems[0] if report.problems else None
        code = first.code if first else "bundle_unreadable"
        message = first.message if first else "the manifest could not be read"
        raise LineupError(
            code,
            f"{role} {path}: {message}",
            hint=first.hint if first else None,
            details={"path": str(path), "problems": [p.to_dict() for p in report.problems]},
            exit_code=2,
        )
    return ManifestSource(path, "bundle", report.manifest)


def _from_project(path: Path, role: str) -> ManifestSource:
    from lineup_build.build import source_manifest

    manifest, check = source_manifest(path)
    if manifest is None:
        errors = [d for d in check.diagnostics if d.severity == "error"]
        first = errors[0] if errors else None
        code = first.code if first else "config_invalid"
        where = f"{first.where}: " if first and first.where else ""
        summary = f"{where}{first.message}" if first else "it does not build"
        raise LineupError(
            code,
            f"{role} {path} does not build ({len(errors)} problem(s)); first: {summary}",
            hint=f"run `lineup check {path}` and fix it first",
            details={"path": str(path), "diagnostics": [d.to_dict() for d in errors]},
            exit_code=2,
        )
    return ManifestSource(path, "project", manifest)


def load_manifest(path: Path, *, role: str = "input") -> ManifestSource:
    """The manifest of a bundle file or a project folder.

    Args:
        path: A `.lineup` bundle or a MiniApp project folder (with `lineup.toml`).
        role: How error messages name the input (`OLD`, `NEW`, ...).

    Raises:
        LineupError: `usage_invalid`, the bundle's first problem (`bundle_unreadable`,
            `manifest_invalid`, ...) or the project's first build error; exit status 2.
    """
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        raise LineupError(
            "usage_invalid",
            f"{role} {path}: {exc.strerror or 'cannot be read'}",
            hint=_PATH_HINT,
            details={"path": str(path)},
            exit_code=2,
        ) from None
    if stat.S_ISDIR(mode):
        return _from_project(path, role)
    if not stat.S_ISREG(mode):
        raise LineupError(
            "usage_invalid",
            f"{role} {path} is neither a regular file nor a folder",
            hint=_PATH_HINT,
            details={"path": str(path)},
            exit_code=2,
        )
    return _from_bundle(path, role)
