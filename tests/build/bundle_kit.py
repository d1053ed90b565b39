"""Test helpers: signed bundles from a fixed seed, and a raw zip writer for hostile ones.

Everything is generated in code; no binary fixtures. `raw_zip` can produce any header
field, so it builds the archives `lineup build` never would.
"""

from __future__ import annotations

import json
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lineup_build.bundle import BundleEntry, bundle_bytes, dos_timestamp
from lineup_build.manifest import serialize_manifest
from lineup_build.signing import ALGORITHM, SIGNATURE_DOMAIN, b64encode, key_from_seed
from lineup_build.trust import TrustedKey, TrustStore
from lineup_sdk import __version__ as SDK_VERSION

KEY = key_from_seed(b"\x01" * 32)
OTHER = key_from_seed(b"\x02" * 32)
EPOCH = 1_700_000_000
SCOPE = "todo"
FILES: dict[str, bytes] = {
    "surface/index.html": b"<!doctype html><p>todo</p>\n",
    "todo_app/__init__.py": b"",
    "todo_app/tools.py": b"from lineup_sdk import define_agent_tools\n" * 20,
}


def sdk_tool(method: str = "todo.add", **over: Any) -> dict[str, Any]:
    """A well-formed `miniapp_sdk` tool entry."""
    tool = {
        "method": method,
        "description": "Add one item.",
        "delivery": "miniapp_sdk",
        "activation": "app_ready",
        "long_running": False,
        "timeout_s": 30,
        "input_schema": {
            "type": "object",
            "properties": {"title": {"type": "string", "description": "The item."}},
            "required": ["title"],
            "additionalProperties": False,
        },
        "result_schema": {"type": "object"},
    }
    tool.update(over)
    return tool


def ui_action(name: str = "todo.toggle", **over: Any) -> dict[str, Any]:
    """A well-formed `ui_actions` entry (SPEC 17)."""
    action = {
        "name": name,
        "description": "Tick or untick one item.",
        "timeout_s": 30,
        "input_schema": {
            "type": "object",
            "properties": {"id": {"type": "string", "description": "The item."}},
            "required": ["id"],
            "additionalProperties": False,
        },
        "result_schema": {"type": "null"},
    }
    action.update(over)
    return action


def runtime_tool(method: str, catalog_key: str, **over: Any) -> dict[str, Any]:
    """A runtime-delivered tool entry copied from the catalog."""
    from lineup_sdk.catalog import CATALOG

    entry = CATALOG[catalog_key]
    tool = {
        "method": method,
        "description": entry.description,
        "delivery": "runtime",
        "activation": entry.activation,
        "long_running": entry.long_running,
        "handler_key": catalog_key,
        "input_schema": entry.input_schema,
        "result_schema": entry.result_schema,
    }
    tool.update(over)
    return tool


def make_manifest(
    files: dict[str, bytes] | None = None,
    tools: list[dict[str, Any]] | None = None,
    scope: str = SCOPE,
    ui_actions: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The manifest `lineup build` would write for these files, tools and UI Actions."""
    import hashlib

    files = FILES if files is None else files
    out: dict[str, Any] = {
        "manifest_version": 1,
        "app": {"scope": scope, "name": "To-do", "version": "1.0.0", "entry": f"{scope}_app.tools"},
        "sdk": {"version": SDK_VERSION},
        "tools": sorted(tools if tools is not None else [sdk_tool()], key=lambda t: t["method"]),
        "files": [
            {"path": p, "sha256": hashlib.sha256(d).hexdigest(), "size": len(d)}
            for p, d in sorted(files.items())
        ],
    }
    if ui_actions:
        out["ui_actions"] = sorted(ui_actions, key=lambda a: a["name"])
    return out


def sign(manifest_bytes: bytes, key: Any = KEY, *, key_id: str | None = None) -> bytes:
    """`manifest.sig` bytes (optionally claiming another key id)."""
    sig = key.private.sign(SIGNATURE_DOMAIN + manifest_bytes)
    doc = {"algorithm": ALGORITHM, "key_id": key_id or key.key_id, "signature": b64encode(sig)}
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode("ascii")


def entries(
    files: dict[str, bytes] | None = None,
    *,
    manifest: dict[str, Any] | None = None,
    manifest_bytes: bytes | None = None,
    key: Any = KEY,
    sig: bytes | None = None,
) -> list[BundleEntry]:
    """Canonical entries: signed manifest, signature, then the app files."""
    files = FILES if files is None else files
    if manifest_bytes is None:
        manifest_bytes = serialize_manifest(manifest or make_manifest(files))
    signature = sig if sig is not None else sign(manifest_bytes, key)
    return [
        BundleEntry("manifest.json", manifest_bytes),
        BundleEntry("manifest.sig", signature),
        *(BundleEntry(f"app/{p}", d) for p, d in sorted(files.items())),
    ]


def canonical(items: list[BundleEntry]) -> bytes:
    """The canonical archive bytes of `items` (in the given order)."""
    return bundle_bytes(items, epoch=EPOCH)


def good_bundle(**kw: Any) -> bytes:
    """A valid bundle, signed by KEY."""
    return canonical(entries(**kw))


def trust(
    *keys: Any, scopes: tuple[str, ...] = ("*",), revoked: tuple[str, ...] = ()
) -> TrustStore:
    """A trust store of `keys` (default: KEY) for `scopes`."""
    chosen = keys or (KEY,)
    return TrustStore.from_keys(
        [TrustedKey(k.key_id, k.public_raw, scopes, "test") for k in chosen], revoked
    )


@dataclass
class Raw:
    """One entry for `raw_zip`, every header field adjustable."""

    name: bytes
    data: bytes
    stored: bytes | None = None  # bytes written as content (default: data)
    method: int = 0
    flags: int = 0x0800
    made_by: int = 0x0314
    version: int = 20
    mode: int = 0o100644
    ext_low: int = 0
    stamp: tuple[int, int] | None = None
    local_extra: bytes = b""
    central_extra: bytes = b""
    local_name: bytes | None = None


def raw_from(items: list[BundleEntry]) -> list[Raw]:
    """Raw copies of canonical entries, to be edited."""
    return [Raw(e.name.encode("utf-8"), e.data) for e in items]


def raw_zip(
    items: list[Raw], *, comment: bytes = b"", stamp: tuple[int, int] | None = None
) -> bytes:
    """A zip archive written field by field (for archives `build` never writes)."""
    base = stamp or dos_timestamp(EPOCH)
    out = bytearray()
    central = bytearray()
    for r in items:
        t, d = r.stamp or base
        content = r.data if r.stored is None else r.stored
        crc = zlib.crc32(r.data)
        lname = r.name if r.local_name is None else r.local_name
        offset = len(out)
        out += struct.pack(
            "<IHHHHHIIIHH", 0x04034B50, r.version, r.flags, r.method, t, d, crc,
            len(content), len(r.data), len(lname), len(r.local_extra),
        )  # fmt: skip
        out += lname + r.local_extra + content
        central += struct.pack(
            "<IHHHHHHIIIHHHHHII", 0x02014B50, r.made_by, r.version, r.flags, r.method, t, d,
            crc, len(content), len(r.data), len(r.name), len(r.central_extra), 0, 0, 0,
            (r.mode << 16) | r.ext_low, offset,
        )  # fmt: skip
        central += r.name + r.central_extra
    cd_offset = len(out)
    out += central
    out += struct.pack(
        "<IHHHHIIH", 0x06054B50, 0, 0, len(items), len(items), len(central), cd_offset,
        len(comment),
    )  # fmt: skip
    return bytes(out + comment)


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """Every file under `root` with its size and mtime (to prove nothing was written)."""
    return {
        p.relative_to(root).as_posix(): (p.lstat().st_size, p.lstat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
    }
