"""Resources for every client (SPEC 18.1): each served app version with a Surface as
`ui://lineup/<scope>/<version>/surface.html`, its signed document on `resources/read`,
no templates, the revision's "resource not found" error for any other URI."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
from mcp.shared.exceptions import MCPError

from lineup_sdk.errors import LineupError

if TYPE_CHECKING:
    from collections.abc import Callable

    from lineup_runtime_lite.api.runtime import Runtime

__all__ = [
    "CACHE_TTL_MS",
    "MIME_TYPE",
    "RESOURCE_NOT_FOUND_LEGACY",
    "Resources",
    "not_found_code",
    "surface_uri",
]

#: JSON-RPC "internal error": what a LineUp error reading the documents answers.
INTERNAL_ERROR = -32603
#: The MCP Apps resource type (extension `io.modelcontextprotocol/ui`, SEP-1865).
MIME_TYPE = "text/html;profile=mcp-app"
#: "Resource not found" up to 2025-11-25; 2026-07-28 retired it for -32602.
RESOURCE_NOT_FOUND_LEGACY = -32002
#: How long a 2026-07-28 client may keep the list and a document (the served apps are fixed
#: for the server's life; a restart may serve others).
CACHE_TTL_MS = 60_000
#: What `_meta.ui` says of every document besides its `csp` (the manifest's): a border
#: around the View.
UI_META: dict[str, Any] = {"prefersBorder": True}


def surface_uri(scope: str, version: str) -> str:
    """The resource URI of a served app version's Surface document."""
    return f"ui://lineup/{scope}/{version}/surface.html"


def not_found_code(protocol_version: str | None) -> int:
    """The revision's code for an unknown resource: -32002 up to 2025-11-25 (as those
    revisions say), -32602 from 2026-07-28 (which retired -32002)."""
    if protocol_version is not None and protocol_version >= "2026-07-28":
        return -32602
    return RESOURCE_NOT_FOUND_LEGACY


@dataclass(frozen=True)
class _Document:
    entry: dict[str, Any]
    data: bytes


class Resources:
    """The Surface documents a bridge serves, kept with their list entries and read again
    when a served app's current version changes (`lineup dev` re-installs on each edit)."""

    def __init__(self, rt: Runtime, serves_scope: Callable[[str], bool]) -> None:
        self._rt = rt
        self._serves_scope = serves_scope
        self._documents: dict[str, _Document] = {}
        self._versions: tuple[tuple[str, str], ...] | None = None
        self._lock = anyio.Lock()

    async def documents(self) -> dict[str, _Document]:
        """Every served Surface document by URI.

        Raises:
            MCPError: -32603 carrying the LineUp error (e.g. `install_tampered` for an
                installed page that is not the signed one), never a raw exception.
        """
        async with self._lock:
            try:
                self._documents = await anyio.to_thread.run_sync(self._load)
            except LineupError as exc:
                raise MCPError(
                    INTERNAL_ERROR, f"{exc.code}: {exc.message}", exc.to_dict()
                ) from None
            return self._documents

    def _load(self) -> dict[str, _Document]:
        rt = self._rt
        served = tuple(
            sorted((a["scope"], a["version"]) for a in rt.apps() if self._serves_scope(a["scope"]))
        )
        if served == self._versions:
            return self._documents
        out: dict[str, _Document] = {}
        for scope, version in served:
            data = rt.surface_document(scope, version)
            if data is None:
                continue
            uri = surface_uri(scope, version)
            out[uri] = _Document(
                {
                    "uri": uri,
                    "name": f"{scope}-surface",
                    "title": f"{scope} {version} Surface",
                    "description": (
                        f"The Surface of the MiniApp {scope} {version}: its signed HTML "
                        "document, which MCP Apps hosts render beside its tools' answers"
                    ),
                    "mimeType": MIME_TYPE,
                    "size": len(data),
                    "_meta": {"ui": {"csp": rt.surface_csp(scope, version) or {}, **UI_META}},
                },
                data,
            )
        self._versions = served
        return out

    async def list(self, protocol_version: str | None) -> dict[str, Any]:
        docs = await self.documents()
        return {
            "resources": [dict(d.entry) for d in docs.values()],
            "ttlMs": CACHE_TTL_MS,
            "cacheScope": "private",
            "resultType": "complete",
        }

    async def read(self, uri: str, protocol_version: str | None) -> dict[str, Any]:
        """The document at `uri`.

        Raises:
            MCPError: the revision's "resource not found" (data: the uri) for any other.
        """
        doc = (await self.documents()).get(uri)
        if doc is None:
            raise MCPError(not_found_code(protocol_version), "Resource not found", {"uri": uri})
        return {
            "contents": [
                {
                    "uri": uri,
                    "mimeType": MIME_TYPE,
                    "text": doc.data.decode("utf-8", "replace"),
                    "_meta": {"ui": dict(doc.entry["_meta"]["ui"])},
                }
            ],
            "ttlMs": CACHE_TTL_MS,
            "cacheScope": "private",
            "resultType": "complete",
        }

    @staticmethod
    def templates() -> dict[str, Any]:
        return {
            "resourceTemplates": [],
            "ttlMs": CACHE_TTL_MS,
            "cacheScope": "private",
            "resultType": "complete",
        }
