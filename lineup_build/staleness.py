"""`verify --source`: is the bundle's manifest exactly what a fresh build of the source gives?

The source is checked and its manifest generated as `lineup build` would (the entry is
imported from a temporary staging folder in a subprocess; nothing is written to the
source), then the manifest bytes are compared. A difference is `stale_bundle` with a
short summary of what changed.
"""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Any

from lineup_build.manifest import serialize_manifest
from lineup_build.model import Manifest
from lineup_sdk.errors import LineupError

__all__ = ["manifest_diff", "staleness_problem"]

_SHOWN = 5


def _changed(old: Any, new: Any) -> list[str]:
    """The names of the fields (of two model objects of one kind) that differ, sorted."""
    return sorted(f.name for f in fields(old) if getattr(old, f.name) != getattr(new, f.name))


def manifest_diff(bundle: Manifest, fresh: Manifest) -> dict[str, list[str]]:
    """What changed from the bundle's manifest to a fresh build's, as lists of names.

    Keys (each present only when non-empty): `app` (changed app fields), `sdk`,
    `tools_added`, `tools_removed`, `tools_changed` (`method: field, ...`),
    `files_added`, `files_removed`, `files_changed`.
    """
    out: dict[str, list[str]] = {}
    app = _changed(bundle.app, fresh.app)
    if app:
        out["app"] = app
    if bundle.sdk != fresh.sdk:
        out["sdk"] = [f"{ {'version': bundle.sdk.version} } -> { {'version': fresh.sdk.version} }"]
    tools = ({t.method: t for t in bundle.tools}, {t.method: t for t in fresh.tools})
    files = ({f.path: f for f in bundle.files}, {f.path: f for f in fresh.files})
    for kind, (old, new) in (("tools", tools), ("files", files)):
        added = sorted(set(new) - set(old))
        removed = sorted(set(old) - set(new))
        changed = []
        for name in sorted(set(old) & set(new)):
            if old[name] != new[name]:
                what = _changed(old[name], new[name])
                changed.append(f"{name}: {', '.join(what)}" if kind == "tools" else name)
        for label, values in (("added", added), ("removed", removed), ("changed", changed)):
            if values:
                out[f"{kind}_{label}"] = values
    return out


def _summary(diff: dict[str, list[str]]) -> str:
    parts = []
    for key, values in diff.items():
        shown = "; ".join(values[:_SHOWN])
        more = f" (+{len(values) - _SHOWN} more)" if len(values) > _SHOWN else ""
        parts.append(f"{key.replace('_', ' ')}: {shown}{more}")
    return " | ".join(parts) or "the manifest bytes differ"


def staleness_problem(
    bundle_manifest: Manifest,
    bundle_bytes: bytes,
    source: Path,
    *,
    sandbox: str = "best_effort",
) -> LineupError | None:
    """`stale_bundle` unless a fresh build of `source` gives the same manifest bytes (its
    import sandboxed as `sandbox` says; `sandbox_unavailable` when `required` cannot be)."""
    from lineup_build.build import source_manifest

    fresh, check = source_manifest(source, sandbox=sandbox)
    refused = next((d for d in check.diagnostics if d.code == "sandbox_unavailable"), None)
    if refused is not None:
        return LineupError("sandbox_unavailable", refused.message, hint=refused.hint)
    if fresh is None:
        errors = [d.to_dict() for d in check.diagnostics if d.severity == "error"]
        return LineupError(
            "stale_bundle",
            f"{source} does not build ({len(errors)} problem(s)), so the bundle cannot match it",
            hint="run `lineup check` on the source and fix it first",
            details={"source": str(source), "diagnostics": errors},
        )
    if serialize_manifest(fresh) == bundle_bytes:
        return None
    diff = manifest_diff(bundle_manifest, Manifest.from_json(fresh))
    return LineupError(
        "stale_bundle",
        f"the bundle is stale against {source}: {_summary(diff)}",
        details={"source": str(source), "diff": diff},
    )
