"""The manifest v1 as typed, immutable data: one model for build, verify and the runtime.

`Manifest.from_json` reads a manifest that already passed the schema check (verify's
`schema_problems`, or the build's own generation); `Manifest.to_json` gives the same data
back, so `serialize_manifest(m.to_json())` is the signed bytes again. Plain frozen
dataclasses, standard library only: the verify path imports this and nothing heavy.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "MINIAPP_SDK",
    "RUNTIME",
    "AppInfo",
    "FileEntry",
    "Manifest",
    "SdkInfo",
    "SurfaceInfo",
    "Tool",
    "UiAction",
]

#: The delivery of a tool served by the Runtime's own handler catalog.
RUNTIME = "runtime"
#: The delivery of a tool served by the MiniApp's handler through the SDK.
MINIAPP_SDK = "miniapp_sdk"


@dataclass(frozen=True, slots=True)
class AppInfo:
    """The `app` object: who the MiniApp is and what it asks for.

    Attributes:
        scope: The app scope (first segment of every method).
        name: The display name.
        version: The semantic version.
        entry: The bundle-relative module that defines the registry.
        dependencies: Requirement specifiers (`name>=x`), as written.
        permissions: The granted permission names, sorted (`network`).
    """

    scope: str
    name: str
    version: str
    entry: str
    dependencies: tuple[str, ...] = ()
    permissions: tuple[str, ...] = ()

    @property
    def network(self) -> bool:
        """Whether the app asks for the network permission."""
        return "network" in self.permissions

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> AppInfo:
        """The `app` object of a schema-valid manifest."""
        perms = obj.get("permissions") or {}
        return cls(
            scope=obj["scope"],
            name=obj["name"],
            version=obj["version"],
            entry=obj["entry"],
            dependencies=tuple(obj.get("dependencies") or ()),
            permissions=tuple(sorted(k for k, v in perms.items() if v)),
        )

    def to_json(self) -> dict[str, Any]:
        """The `app` object; optional fields only when non-empty (older bundles unchanged)."""
        out: dict[str, Any] = {
            "scope": self.scope,
            "name": self.name,
            "version": self.version,
            "entry": self.entry,
        }
        if self.dependencies:
            out["dependencies"] = list(self.dependencies)
        if self.permissions:
            out["permissions"] = dict.fromkeys(self.permissions, True)
        return out


@dataclass(frozen=True, slots=True)
class SdkInfo:
    """The `sdk` object: the SDK version that built the bundle."""

    version: str

    @property
    def major(self) -> str:
        """The major version, as text (`0` for `0.2.0`)."""
        return self.version.split(".")[0]


@dataclass(frozen=True, slots=True)
class Tool:
    """One `tools` entry: a name, schemas and flags, never a function.

    Attributes:
        method: `<app_scope>.<verb>`.
        description: The tool description (may be empty).
        delivery: `miniapp_sdk` or `runtime`.
        activation: `app_ready`, `foreground_required` or `activation_not_required`.
        long_running: Whether the call spans receipts before its result.
        input_schema: The closed JSON Schema of the parameters.
        result_schema: The JSON Schema of the result (an object or a boolean).
        timeout_s: The handler timeout of a `miniapp_sdk` tool (None for runtime tools);
            kept as written (`30` stays an int, so the bytes do not change).
        handler_key: The catalog key of a `runtime` tool (None otherwise).
        hints: The author's behaviour hints as sorted `(name, value)` pairs.
    """

    method: str
    description: str
    delivery: str
    activation: str
    long_running: bool
    input_schema: dict[str, Any]
    result_schema: Any
    timeout_s: float | None = None
    handler_key: str | None = None
    hints: tuple[tuple[str, bool], ...] = ()

    @property
    def is_runtime(self) -> bool:
        """Served by the Runtime's handler catalog (no MiniApp code runs)."""
        return self.delivery == RUNTIME

    @property
    def hint_map(self) -> dict[str, bool]:
        """The hints as a dict (empty when the author set none)."""
        return dict(self.hints)

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Tool:
        """One `tools` entry of a schema-valid manifest (or an extracted declaration: keys
        the manifest does not carry are ignored)."""
        runtime = obj["delivery"] == RUNTIME
        return cls(
            method=obj["method"],
            description=obj["description"],
            delivery=obj["delivery"],
            activation=obj["activation"],
            long_running=obj["long_running"],
            input_schema=obj["input_schema"],
            result_schema=obj["result_schema"],
            timeout_s=None if runtime else obj["timeout_s"],
            handler_key=obj["handler_key"] if runtime else None,
            hints=tuple(sorted((obj.get("hints") or {}).items())),
        )

    def to_json(self) -> dict[str, Any]:
        """The `tools` entry: `timeout_s` for SDK tools, `handler_key` for runtime tools,
        `hints` only when set."""
        out: dict[str, Any] = {
            "method": self.method,
            "description": self.description,
            "delivery": self.delivery,
            "activation": self.activation,
            "long_running": self.long_running,
        }
        if self.is_runtime:
            out["handler_key"] = self.handler_key
        else:
            out["timeout_s"] = self.timeout_s
        out["input_schema"] = self.input_schema
        out["result_schema"] = self.result_schema
        if self.hints:
            out["hints"] = dict(self.hints)
        return out


@dataclass(frozen=True, slots=True)
class UiAction:
    """One `ui_actions` entry (SPEC 17): a Surface's named business operation, shaped as
    a `miniapp_sdk` tool without activation, delivery or hints.

    Attributes:
        name: `<app_scope>.<verb>`, unique across the app's tools and actions.
        description: The action description (may be empty).
        input_schema: The closed JSON Schema of the parameters.
        result_schema: The JSON Schema of the result (an object or a boolean).
        timeout_s: The handler timeout, kept as written.
    """

    name: str
    description: str
    input_schema: dict[str, Any]
    result_schema: Any
    timeout_s: float

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> UiAction:
        """One `ui_actions` entry of a schema-valid manifest (or an extracted action:
        keys the manifest does not carry are ignored)."""
        return cls(
            name=obj["name"],
            description=obj["description"],
            input_schema=obj["input_schema"],
            result_schema=obj["result_schema"],
            timeout_s=obj["timeout_s"],
        )

    def to_json(self) -> dict[str, Any]:
        """The `ui_actions` entry."""
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema,
            "result_schema": self.result_schema,
            "timeout_s": self.timeout_s,
        }


@dataclass(frozen=True, slots=True)
class FileEntry:
    """One `files` entry: a bundle-relative POSIX path, its SHA-256 and size."""

    path: str
    sha256: str
    size: int


@dataclass(frozen=True, slots=True)
class SurfaceInfo:
    """The manifest's optional `surface` object (SPEC 18.2): the built Surface document's
    path in `app/`, its sha256, and the `csp` from `[app.surface]` (keys with domains only).
    """

    document: str
    sha256: str
    size: int
    csp: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> SurfaceInfo:
        csp = tuple(sorted((k, tuple(v)) for k, v in obj.get("csp", {}).items()))
        return cls(obj["document"], obj["sha256"], obj["size"], csp)

    def to_json(self) -> dict[str, Any]:
        return {
            "document": self.document,
            "sha256": self.sha256,
            "size": self.size,
            "csp": {k: list(v) for k, v in self.csp},
        }

    def csp_json(self) -> dict[str, list[str]]:
        """The `csp` as MCP Apps' `_meta.ui.csp` spells it (`connectDomains`, ...)."""
        camel = {"connect_domains": "connectDomains", "resource_domains": "resourceDomains"}
        return {camel.get(k, k): list(v) for k, v in self.csp}


@dataclass(frozen=True, slots=True)
class Manifest:
    """A manifest v1 document as typed data (tools sorted by method, files by path, as
    the build writes them; the order read is kept).

    Attributes:
        manifest_version: Always 1.
        app: The `app` object.
        sdk: The `sdk` object.
        tools: Every tool.
        files: Every included file.
        surface: The Surface document, when the app has a Surface.
        ui_actions: The app's UI Actions, sorted by name (SPEC 17; `ui_actions` is written
            only when there are some, so a bundle without them is unchanged).
    """

    manifest_version: int
    app: AppInfo
    sdk: SdkInfo
    tools: tuple[Tool, ...]
    files: tuple[FileEntry, ...]
    #: The Surface document, when the app has a Surface (absent in older bundles).
    surface: SurfaceInfo | None = None
    ui_actions: tuple[UiAction, ...] = ()

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Manifest:
        """The model of a manifest that matches the shipped manifest schema.

        Call it after the schema check (`manifest_checks.schema_problems`): it reads the
        fields, it does not validate them again.

        Raises:
            ValueError: `obj` is not shaped like a manifest (a missing or mistyped field).
        """
        try:
            return cls(
                manifest_version=obj["manifest_version"],
                app=AppInfo.from_json(obj["app"]),
                sdk=SdkInfo(obj["sdk"]["version"]),
                tools=tuple(Tool.from_json(t) for t in obj["tools"]),
                files=tuple(FileEntry(f["path"], f["sha256"], f["size"]) for f in obj["files"]),
                surface=SurfaceInfo.from_json(obj["surface"]) if "surface" in obj else None,
                ui_actions=tuple(UiAction.from_json(a) for a in obj.get("ui_actions") or ()),
            )
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"not a manifest v1 document: {exc!r}") from None

    def to_json(self) -> dict[str, Any]:
        """The manifest as JSON data (the inverse of `from_json`)."""
        out: dict[str, Any] = {
            "manifest_version": self.manifest_version,
            "app": self.app.to_json(),
            "sdk": {"version": self.sdk.version},
            "tools": [t.to_json() for t in self.tools],
            "files": [{"path": f.path, "sha256": f.sha256, "size": f.size} for f in self.files],
        }
        if self.surface is not None:
            out["surface"] = self.surface.to_json()
        if self.ui_actions:
            out["ui_actions"] = [a.to_json() for a in self.ui_actions]
        return out

    def tool(self, method: str) -> Tool | None:
        """The tool declared for `method`, if any."""
        return next((t for t in self.tools if t.method == method), None)

    def ui_action(self, name: str) -> UiAction | None:
        """The UI Action declared as `name`, if any."""
        return next((a for a in self.ui_actions if a.name == name), None)
