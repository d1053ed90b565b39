"""Checks on a bundle's manifest as data: strict JSON, the schema, tools against the catalog.

Pure functions over bytes, dicts and the `Manifest` model; `verify` calls them in SPEC 4
order. The tool rules themselves live in `tool_rules`, shared with the build. Nothing here
imports or runs bundle code: a tool is a name, schemas and flags, never a function.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Callable
from typing import Any

from lineup_build.fsutil import no_duplicate_keys, reject_constant
from lineup_build.manifest import manifest_schema
from lineup_build.model import Manifest, Tool, UiAction
from lineup_build.reader import Limits, raise_hint
from lineup_build.schemas import canonical_json
from lineup_build.tool_rules import (
    SCHEMA_FIELDS,
    ContractFinding,
    contract_findings,
    method_problem,
    schema_findings,
)
from lineup_sdk.errors import LineupError

__all__ = ["json_depth", "parse_manifest", "schema_problems", "tool_problems"]

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_HEX64 = re.compile(r"[0-9a-f]{64}")
_NOT_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")
_MAX_SCHEMA_REPORTS = 20


def json_depth(data: bytes, stop_above: int | None = None) -> int:
    """Deepest nesting of arrays and objects in JSON text, without parsing it.

    Strings are skipped, so brackets inside them do not count. Counting stops early once
    the depth passes `stop_above`; the result is then `stop_above + 1`.
    """
    brackets = _STRING.sub(b"", data).translate(None, _NOT_BRACKET)
    depth = deepest = 0
    for b in brackets:
        if b in (0x5B, 0x7B):
            depth += 1
            if depth > deepest:
                deepest = depth
                if stop_above is not None and deepest > stop_above:
                    return deepest
        else:
            depth -= 1
    return deepest


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text[:40]} is out of range")
    return value


def parse_manifest(data: bytes, limits: Limits) -> Any:
    """Parse manifest bytes strictly: UTF-8, depth limit, no duplicate keys, no NaN/Infinity.

    Raises:
        LineupError: `limits_exceeded` (too large or too deep) or `manifest_invalid`.
    """
    if len(data) > limits.max_manifest_bytes:
        raise LineupError(
            "limits_exceeded",
            f"manifest.json is {len(data)} bytes, over the limit of {limits.max_manifest_bytes}",
            hint=raise_hint("max_manifest_bytes"),
        )
    depth = json_depth(data, stop_above=limits.max_depth)
    if depth > limits.max_depth:
        raise LineupError(
            "limits_exceeded", f"manifest.json nests deeper than {limits.max_depth} levels"
        )
    try:
        doc = json.loads(
            data.decode("utf-8"),
            object_pairs_hook=no_duplicate_keys,
            parse_constant=reject_constant,
            parse_float=_finite,
        )
        canonical_json(doc)  # lone surrogates and the like cannot be re-encoded
    except (UnicodeError, ValueError, RecursionError) as exc:
        raise LineupError("manifest_invalid", f"manifest.json is not strict JSON: {exc}") from None
    return doc


def _clip(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


@functools.lru_cache(maxsize=1)
def _validators() -> tuple[Any, Any]:
    from jsonschema import Draft202012Validator

    schema = manifest_schema()
    one_file = {"$defs": schema["$defs"], "$ref": "#/$defs/file"}
    return Draft202012Validator(schema), Draft202012Validator(one_file)


@functools.lru_cache(maxsize=1)
def _plain_file_check() -> Callable[[Any], bool] | None:
    """A fast, sufficient test for the schema's `file` definition, or None.

    It exists because the generic validator spends far longer on 10,000 file entries than
    hashing them takes. It accepts only entries that plainly satisfy the definition;
    anything else still goes to the JSON Schema validator, so the shipped schema stays the
    authority. If the definition ever changes shape, the fast path switches itself off.
    """
    definition = manifest_schema()["$defs"]["file"]
    max_path = definition["properties"]["path"].get("maxLength")
    expected = {
        "type": "object",
        "additionalProperties": False,
        "required": ["path", "sha256", "size"],
        "properties": {
            "path": {"type": "string", "minLength": 1, "maxLength": max_path},
            "sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
            "size": {"type": "integer", "minimum": 0},
        },
    }
    if definition != expected or not isinstance(max_path, int):
        return None
    keys = frozenset(("path", "sha256", "size"))

    def check(f: Any) -> bool:
        return (
            type(f) is dict
            and f.keys() == keys
            and type(f["path"]) is str
            and 0 < len(f["path"]) <= max_path
            and type(f["sha256"]) is str
            and _HEX64.fullmatch(f["sha256"]) is not None
            and type(f["size"]) is int
            and f["size"] >= 0
        )

    return check


def _errors(validator: Any, instance: Any, prefix: str = "") -> list[str]:
    out = []
    for err in sorted(validator.iter_errors(instance), key=lambda e: list(map(str, e.path))):
        ptr = prefix + "".join(f"/{p}" for p in err.absolute_path)
        out.append(f"{ptr or '/'}: {err.message}")
    return out


@functools.lru_cache(maxsize=1)
def _plain_tool_check() -> Callable[[Any], bool] | None:
    """A fast, sufficient test for one `tools` entry, or None.

    Like the file check, for the same reason (a `oneOf` per tool is most of the time
    verify and `lineup diff` spend on a large app); built from the shipped schema itself
    by `plain_check`, and off when `tools` is anything but an array of items.
    """
    from lineup_build.plain_check import compile_plain

    schema = manifest_schema()
    tools = schema["properties"].get("tools")
    if not isinstance(tools, dict) or set(tools) != {"type", "items"} or tools["type"] != "array":
        return None
    return compile_plain(tools["items"], schema)


@functools.lru_cache(maxsize=1)
def _plain_tools() -> tuple[Callable[[Any], bool], Any] | None:
    """The fast test for one `tools` entry, and the validator for the rest."""
    check = _plain_tool_check()
    if check is None:
        return None
    from jsonschema import Draft202012Validator

    schema = manifest_schema()
    items = schema["properties"]["tools"]["items"]
    return check, Draft202012Validator({"$defs": schema["$defs"], **items})


@functools.lru_cache(maxsize=1)
def _plain_top() -> Callable[[Any], bool] | None:
    """A fast, sufficient test for the whole manifest schema on a manifest whose `files`
    and `tools` are emptied (those two are tested entry by entry), or None."""
    from lineup_build.plain_check import compile_plain

    return compile_plain(manifest_schema())


def plainly_valid(manifest: Any) -> bool:
    """True when the manifest plainly matches the shipped schema, judged without the
    JSON Schema validator: the top level, each tool and each file by the structural
    checks (`plain_check` and the file check), each sufficient for its definition. False
    means "let the validator decide", not "invalid"."""
    top, tool, file = _plain_top(), _plain_tool_check(), _plain_file_check()
    if top is None or tool is None or file is None or type(manifest) is not dict:
        return False
    files, tools = manifest.get("files"), manifest.get("tools")
    return (
        type(files) is list
        and type(tools) is list
        and top({**manifest, "files": [], "tools": []})
        and all(tool(t) for t in tools)
        and all(file(f) for f in files)
    )


def schema_problems(manifest: Any) -> list[LineupError]:
    """The manifest against the closed manifest v1 schema (`manifest_invalid` each).

    A manifest that is `plainly_valid` needs no JSON Schema validator (nor its import):
    the common case of `lineup verify`. Anything else goes to the validator, which stays
    the authority and writes the messages.
    """
    if plainly_valid(manifest):
        return []
    whole, one_file = _validators()
    plain = _plain_file_check()
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if plain is None or not isinstance(files, list):
        errors = _errors(whole, manifest)
    else:
        tools, fast_tools = manifest.get("tools"), _plain_tools()
        if fast_tools is not None and isinstance(tools, list):
            is_plain, one_tool = fast_tools
            errors = _errors(whole, {**manifest, "files": [], "tools": []})
            for i, t in enumerate(tools):
                if not is_plain(t):
                    errors.extend(_errors(one_tool, t, f"/tools/{i}"))
        else:
            errors = _errors(whole, {**manifest, "files": []})
        for i, f in enumerate(files):
            if not plain(f):
                errors.extend(_errors(one_file, f, f"/files/{i}"))
    out = [LineupError("manifest_invalid", f"manifest.json {_clip(e)}") for e in errors[:20]]
    if len(errors) > 20:
        out.append(LineupError("manifest_invalid", f"... and {len(errors) - 20} more"))
    return out


def _schema_checks(tool: Tool | UiAction) -> list[LineupError]:
    method = tool.method if isinstance(tool, Tool) else tool.name
    schemas = {"input_schema": tool.input_schema, "result_schema": tool.result_schema}
    findings = schema_findings(method, schemas)
    out = []
    for field, _, _ in SCHEMA_FIELDS:  # at most so many reports per schema
        for f in [f for f in findings if f.field == field][:_MAX_SCHEMA_REPORTS]:
            out.append(
                LineupError(
                    f.code,
                    f.message,
                    hint=f.hint,
                    details={"method": method, "field": field, "pointer": f.pointer},
                )
            )
    return out


def _contract_text(f: ContractFinding, scope: str) -> str:
    """How verify words a catalog finding (after `<method>: `)."""
    if f.kind == "scope":
        return f"key {f.key!r} belongs to another scope than {scope!r}"
    if f.kind in ("activation", "long_running"):
        return f"{f.kind} {f.actual!r} is not {f.expected!r}"
    return f"{f.kind} differs from the catalog"


def _catalog_checks(tool: Tool, scope: str) -> list[LineupError]:
    key, method = tool.handler_key or "", tool.method
    findings = contract_findings(
        key,
        scope,
        activation=tool.activation,
        long_running=tool.long_running,
        input_schema=tool.input_schema,
        result_schema=tool.result_schema,
    )
    if findings and findings[0].kind == "unknown_key":
        return [
            LineupError(
                "unknown_runtime_handler",
                f"{method}: handler key {key!r} is not in the runtime handler catalog",
                details={"method": method, "handler_key": key},
            )
        ]
    return [
        LineupError(
            f.code,
            f"{method}: {_contract_text(f, scope)}",
            details={"method": method, "handler_key": key},
        )
        for f in findings
    ]


def tool_problems(manifest: Manifest) -> list[LineupError]:
    """Method names, each tool schema, each UI Action's name and schemas (SPEC 17: names
    unique across tools and actions), then runtime tools against the catalog (the rules
    of `tool_rules`, worded as verify reports them).

    `manifest` is the model of a manifest that matched the manifest schema.
    """
    scope = manifest.app.scope
    out: list[LineupError] = []
    seen: dict[str, str] = {}
    entries: list[tuple[str, str, Tool | UiAction]] = [
        *(("tool", t.method, t) for t in manifest.tools),
        *(("UI Action", a.name, a) for a in manifest.ui_actions),
    ]
    for what, method, entry in entries:
        bad = method_problem(method, scope)
        if bad:
            out.append(LineupError(bad[0], bad[1], details={"method": method}))
        first = seen.get(method)
        if first is not None:
            listed = "twice" if first == what else f"as a {first} and as a {what}"
            out.append(
                LineupError(
                    "duplicate_method",
                    f"{method}: listed {listed} in manifest.json",
                    details={"method": method},
                )
            )
        seen.setdefault(method, what)
        out.extend(_schema_checks(entry))
    for tool in manifest.tools:
        if tool.is_runtime:
            out.extend(_catalog_checks(tool, scope))
    return out
