"""Where `lineup diff` and `lineup docs` get a manifest: a bundle file or a project folder.

A bundle is read with the safe reader and every check of `lineup inspect` (without a trust
store the signature is parsed, not checked; with one, every check of `lineup verify`); a
bundle with any problem is refused, so a tampered or hostile file is never compared or
documented. A folder is checked and its
manifest generated exactly as `lineup build` would sign it, with nothing written.

Either way the manifest handed on matches the manifest schema (verify checks it before
its typed model is made; a project's checks hold its config and declarations to the
schema's bounds), so it is handed on as the typed `Manifest`, read once.
"""

from __future__ import annotations

import contextlib
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from lineup_build.model import Manifest
from lineup_sdk.errors import LineupError

if TYPE_CHECKING:
    from lineup_build.trust import TrustStore

__all__ = ["ManifestSource", "load_manifest", "shown_path"]

_PATH_HINT = "pass a .lineup bundle or a MiniApp project folder (with lineup.toml)"


@dataclass(frozen=True)
class ManifestSource:
    """A manifest and where it came from.

    Attributes:
        path: The bundle file or project folder.
        kind: `bundle` or `project`.
        manifest: The manifest as the typed model.
        declared: Where each tool and UI Action is declared (`method` or name ->
            `(file, line)`, the file
            relative to the working folder when inside it): known for a project folder,
            empty for a bundle (a manifest records no source locations).
        home: The file to point at for anything else: the bundle, or the project's
            config file (relative to the working folder when inside it).
    """

    path: Path
    kind: str
    manifest: Manifest
    declared: dict[str, tuple[str, int]] = field(default_factory=dict)
    home: str = ""

    def where(self, method: str | None) -> tuple[str, int] | None:
        """`(file, line)` of `method`'s declaration when known, else None."""
        return self.declared.get(method) if method else None


def shown_path(path: Path, cwd: Path | None = None) -> str:
    """`path` relative to the working folder when it lies inside it, else absolute."""
    here = (cwd or Path.cwd()).resolve()
    full = path.resolve()
    with contextlib.suppress(ValueError):
        return full.relative_to(here).as_posix()
    return full.as_posix()


def _from_bundle(path: Path, role: str, trust: TrustStore | None) -> ManifestSource:
    from lineup_build.verify import check_bundle

    report = check_bundle(path, trust)
    if report.problems or report.model is None or (trust is not None and not report.ok):
        first = report.problems[0] if report.problems else None
        code = first.code if first else "bundle_unreadable"
        message = first.message if first else "the manifest could not be read"
        raise LineupError(
            code,
            f"{role} {path}: {message}",
            hint=first.hint if first else None,
            details={"path": str(path), "problems": [p.to_dict() for p in report.problems]},
            # verified against a trust store and refused: rejected, as `lineup verify` says
            exit_code=1 if trust is not None else 2,
        )
    return ManifestSource(path, "bundle", report.model, home=shown_path(path))


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
    declared: dict[str, tuple[str, int]] = {}
    for tool in [*check.tools, *check.actions]:  # one namespace (SPEC 17)
        loc = tool.get("location") or {}
        if loc.get("file") and loc.get("line"):
            declared[tool["method"]] = (shown_path(path / loc["file"]), int(loc["line"]))
    config = check.config.source if check.config is not None else "lineup.toml"
    return ManifestSource(
        path,
        "project",
        Manifest.from_json(manifest),
        declared=declared,
        home=shown_path(path / config),
    )


def load_manifest(
    path: Path, *, role: str = "input", trust: TrustStore | None = None
) -> ManifestSource:
    """The manifest of a bundle file or a project folder.

    Args:
        path: A `.lineup` bundle or a MiniApp project folder (with `lineup.toml`).
        role: How error messages name the input (`OLD`, `NEW`, ...).
        trust: Verify a bundle against this store first (a project is not signed).

    Raises:
        LineupError: `usage_invalid`, the bundle's first problem (`bundle_unreadable`,
            `manifest_invalid`, ...) or the project's first build error, exit status 2;
            with `trust`, a bundle that does not verify: its verify code, exit status 1.
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
    return _from_bundle(path, role, trust)
