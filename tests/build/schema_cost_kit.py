"""Schemas past the cost bounds, for the build and runtime tests of schema cost: a chain of
`anyOf`s of one `$ref` twice, and a signed bundle whose result schema is too complex."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.build import bundle_kit as kit


def chain(levels: int, kind: str = "anyOf") -> dict[str, Any]:
    """`levels` nested `kind`s of one `$ref` twice: 2^levels applications per value."""
    defs: dict[str, Any] = {f"a{levels}": {"type": "integer"}}
    for i in range(levels - 1, -1, -1):
        ref = {"$ref": f"#/$defs/a{i + 1}"}
        defs[f"a{i}"] = {kind: [ref, dict(ref)]}
    return {"$defs": defs, "$ref": "#/$defs/a0"}


def too_complex_bundle(path: Path) -> Path:
    """A signed bundle whose result schema is past the static bound: made by hand, since
    `lineup build` refuses it (an old bundle, or another tool's)."""
    tool = kit.sdk_tool(result_schema=chain(20))
    path.write_bytes(kit.good_bundle(manifest=kit.make_manifest(tools=[tool])))
    return path
