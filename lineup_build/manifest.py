"""Manifest v1: generate it from checked declarations, serialize it deterministically,
and validate it against the JSON Schema shipped in this package."""

from __future__ import annotations

import functools
import hashlib
import json
from importlib import resources
from typing import TYPE_CHECKING, Any

from lineup_build.model import AppInfo, FileEntry, Manifest, SdkInfo, SurfaceInfo, Tool, UiAction
from lineup_build.schemas import canonical_json
from lineup_sdk import __version__ as SDK_VERSION

if TYPE_CHECKING:  # the verify path reads the schema and never builds
    from lineup_build.config import ProjectConfig
    from lineup_build.files import IncludedFile

__all__ = [
    "MANIFEST_VERSION",
    "build_manifest",
    "build_model",
    "manifest_schema",
    "manifest_schema_errors",
    "serialize_manifest",
]

MANIFEST_VERSION = 1


def build_model(
    config: ProjectConfig,
    tools: list[dict[str, Any]],
    files: list[IncludedFile],
    surface_document: bytes | None = None,
    *,
    actions: list[dict[str, Any]] | None = None,
) -> Manifest:
    """The manifest of checked declarations: tools sorted by method, UI Actions by name,
    files as collected (sorted by path); permissions, hints and `ui_actions` only when
    set, so older bundles are unchanged; the `surface` object only with a Surface
    document (SPEC 18.2)."""
    from lineup_build.surface import SURFACE_DOCUMENT

    surface = None
    if surface_document is not None:
        digest = hashlib.sha256(surface_document).hexdigest()
        surface = SurfaceInfo(SURFACE_DOCUMENT, digest, len(surface_document), config.surface_csp)
    return Manifest(
        manifest_version=MANIFEST_VERSION,
        app=AppInfo(
            scope=config.scope,
            name=config.name,
            version=config.version,
            entry=config.entry,
            dependencies=tuple(config.dependencies),
            permissions=tuple(sorted(config.permissions)),
        ),
        sdk=SdkInfo(SDK_VERSION),
        tools=tuple(Tool.from_json(t) for t in sorted(tools, key=lambda t: t["method"])),
        files=tuple(FileEntry(f.path, f.sha256, f.size) for f in files),
        surface=surface,
        ui_actions=tuple(
            UiAction.from_json({**a, "name": a.get("name", a.get("method"))})
            for a in sorted(actions or (), key=lambda a: a.get("name", a.get("method")))
        ),
    )


def build_manifest(
    config: ProjectConfig,
    tools: list[dict[str, Any]],
    files: list[IncludedFile],
    surface_document: bytes | None = None,
    *,
    actions: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The manifest as data (`build_model(...).to_json()`)."""
    return build_model(config, tools, files, surface_document, actions=actions).to_json()


def serialize_manifest(manifest: dict[str, Any]) -> bytes:
    """Deterministic bytes: UTF-8, sorted keys, no whitespace, no NaN/Infinity."""
    return canonical_json(manifest)


@functools.lru_cache(maxsize=1)
def manifest_schema() -> dict[str, Any]:
    """The JSON Schema of manifest v1 (closed objects everywhere)."""
    text = resources.files("lineup_build").joinpath("manifest.schema.json").read_text("utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


@functools.lru_cache(maxsize=1)
def _validator() -> Any:
    from jsonschema import Draft202012Validator

    return Draft202012Validator(manifest_schema())


def manifest_schema_errors(manifest: Any) -> list[str]:
    """Every way `manifest` breaks the manifest schema, as `pointer: message` strings."""
    out = []
    for err in sorted(_validator().iter_errors(manifest), key=lambda e: list(map(str, e.path))):
        ptr = "".join(f"/{p}" for p in err.absolute_path) or "/"
        out.append(f"{ptr}: {err.message}")
    return out
