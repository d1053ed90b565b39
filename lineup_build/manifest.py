"""Manifest v1: generate it from checked declarations, serialize it deterministically,
and validate it against the JSON Schema shipped in this package."""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import TYPE_CHECKING, Any

from lineup_build.schemas import canonical_json
from lineup_sdk import __version__ as SDK_VERSION

if TYPE_CHECKING:  # the verify path reads the schema and never builds
    from lineup_build.config import ProjectConfig
    from lineup_build.files import IncludedFile

__all__ = [
    "MANIFEST_VERSION",
    "build_manifest",
    "manifest_schema",
    "manifest_schema_errors",
    "serialize_manifest",
]

MANIFEST_VERSION = 1
_SDK_TOOL_KEYS = (
    "method",
    "description",
    "delivery",
    "activation",
    "long_running",
    "timeout_s",
    "input_schema",
    "result_schema",
)
_RUNTIME_TOOL_KEYS = (
    "method",
    "description",
    "delivery",
    "activation",
    "long_running",
    "handler_key",
    "input_schema",
    "result_schema",
)


def build_manifest(
    config: ProjectConfig, tools: list[dict[str, Any]], files: list[IncludedFile]
) -> dict[str, Any]:
    """The manifest as data: tools sorted by method, files sorted by path."""
    app: dict[str, Any] = {
        "scope": config.scope,
        "name": config.name,
        "version": config.version,
        "entry": config.entry,
    }
    if config.dependencies:
        app["dependencies"] = list(config.dependencies)
    if config.permissions:  # written only when something is granted: older bundles unchanged
        app["permissions"] = dict.fromkeys(config.permissions, True)
    out_tools = []
    for tool in sorted(tools, key=lambda t: t["method"]):
        keys = _RUNTIME_TOOL_KEYS if tool["delivery"] == "runtime" else _SDK_TOOL_KEYS
        entry = {k: tool[k] for k in keys}
        if tool.get("hints"):
            entry["hints"] = dict(tool["hints"])
        out_tools.append(entry)
    return {
        "manifest_version": MANIFEST_VERSION,
        "app": app,
        "sdk": {"version": SDK_VERSION},
        "tools": out_tools,
        "files": [{"path": f.path, "sha256": f.sha256, "size": f.size} for f in files],
    }


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
