"""Checks on tool JSON Schemas: 2020-12 validity, local refs only, forbidden keywords,
linear-time patterns. Shared by build, verify and the runtime's validators."""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DRAFT_2020_12",
    "FORBIDDEN_KEYWORDS",
    "SchemaProblem",
    "canonical_json",
    "check_schema",
    "compile_pattern",
]

DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"
FORBIDDEN_KEYWORDS = frozenset(
    {"$id", "$dynamicRef", "$dynamicAnchor", "$recursiveRef", "$recursiveAnchor", "$vocabulary"}
)

# keyword -> how its value holds subschemas
_MAP_OF_SCHEMAS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_ONE_SCHEMA = (
    "additionalProperties",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
    "unevaluatedItems",
    "unevaluatedProperties",
    "contentSchema",
)
_LIST_OF_SCHEMAS = ("allOf", "anyOf", "oneOf", "prefixItems")
_TYPES = frozenset({"null", "boolean", "object", "array", "number", "string", "integer"})

_NON_NEG_INT = (
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "minContains",
    "maxContains",
)
_NUMBER = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
_STRING = (
    "title",
    "description",
    "format",
    "$comment",
    "$anchor",
    "contentEncoding",
    "contentMediaType",
)
_BOOL = ("uniqueItems", "deprecated", "readOnly", "writeOnly")
_ANY = ("default", "const", "examples", "discriminator")


def canonical_json(value: Any) -> bytes:
    """UTF-8, sorted keys, no insignificant whitespace, no NaN/Infinity."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


@dataclass(frozen=True)
class SchemaProblem:
    """One problem in a schema: `kind` is `invalid`, `remote_ref` or `not_object`."""

    kind: str
    pointer: str
    message: str


@functools.lru_cache(maxsize=4096)
def compile_pattern(pattern: str) -> Any:
    """Compile `pattern` with pydantic-core's linear-time Rust regex engine.

    Returns a validator whose `validate_python(s)` raises when `s` does not match.

    Raises:
        ValueError: the engine cannot compile it (backreferences, lookaround, ...).
    """
    from pydantic_core import SchemaError, SchemaValidator, core_schema

    try:
        return SchemaValidator(core_schema.str_schema(pattern=pattern, regex_engine="rust-regex"))
    except SchemaError as exc:
        detail = str(exc).strip().splitlines()[-1].strip()
        raise ValueError(
            f"pattern {pattern!r} is not supported by the linear-time engine: {detail}"
        ) from None


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _esc(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


class _Walk:
    """One pass over every subschema, collecting problems.

    `structural_ok` stays True while every keyword is one this walk fully type-checks;
    then the 2020-12 metaschema need not be consulted.
    """

    def __init__(self, root: Any) -> None:
        self.root = root
        self.problems: list[SchemaProblem] = []
        self.structural_ok = True

    def bad(self, kind: str, ptr: str, msg: str) -> None:
        self.problems.append(SchemaProblem(kind, ptr or "/", msg))

    def resolves(self, ref: str) -> bool:
        node = self.root
        frag = ref[1:]
        if frag == "":
            return True
        if not frag.startswith("/"):
            return False  # anchors are not used by generated schemas; treat as unresolvable
        for raw in frag[1:].split("/"):
            part = raw.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                return False
        return True

    def walk(self, node: Any, ptr: str) -> None:
        if isinstance(node, bool):
            return
        if not isinstance(node, dict):
            self.bad("invalid", ptr, "a schema must be an object or a boolean")
            return
        for key, value in node.items():
            here = f"{ptr}/{_esc(key)}"
            if key in FORBIDDEN_KEYWORDS:
                self.bad("invalid", here, f"keyword {key!r} is not allowed in tool schemas")
            elif key == "$schema":
                if value != DRAFT_2020_12:
                    self.bad("invalid", here, f"$schema must be {DRAFT_2020_12!r}")
            elif key == "$ref":
                if not isinstance(value, str):
                    self.bad("invalid", here, "$ref must be a string")
                elif not value.startswith("#"):
                    self.bad("remote_ref", here, f"$ref {value!r} is not a local reference")
                elif not self.resolves(value):
                    self.bad("invalid", here, f"$ref {value!r} does not resolve in this schema")
            elif key in _MAP_OF_SCHEMAS:
                if not isinstance(value, dict):
                    self.bad("invalid", here, f"{key} must be an object")
                    continue
                for name, sub in value.items():
                    if key == "patternProperties":
                        self.pattern(name, f"{here}/{_esc(name)}")
                    self.walk(sub, f"{here}/{_esc(name)}")
            elif key in _ONE_SCHEMA:
                self.walk(value, here)
            elif key in _LIST_OF_SCHEMAS:
                if not isinstance(value, list) or not value:
                    self.bad("invalid", here, f"{key} must be a non-empty array")
                    continue
                for i, sub in enumerate(value):
                    self.walk(sub, f"{here}/{i}")
            elif key == "items":
                self.walk(value, here)
            elif key == "pattern":
                if not isinstance(value, str):
                    self.bad("invalid", here, "pattern must be a string")
                else:
                    self.pattern(value, here)
            elif key == "type":
                types = value if isinstance(value, list) else [value]
                if not types or any(not isinstance(t, str) or t not in _TYPES for t in types):
                    self.bad("invalid", here, f"type {value!r} is not a JSON Schema type")
                elif isinstance(value, list) and len(set(value)) != len(value):
                    self.bad("invalid", here, "type names must be unique")
            elif key == "required":
                if (
                    not isinstance(value, list)
                    or any(not isinstance(v, str) for v in value)
                    or len(set(value)) != len(value)
                ):
                    self.bad("invalid", here, "required must be an array of unique strings")
            elif key == "enum":
                if not isinstance(value, list):
                    self.bad("invalid", here, "enum must be an array")
            elif key in _NON_NEG_INT:
                if not _is_int(value) or value < 0:
                    self.bad("invalid", here, f"{key} must be a non-negative integer")
            elif key in _NUMBER:
                if not _is_num(value):
                    self.bad("invalid", here, f"{key} must be a number")
            elif key == "multipleOf":
                if not _is_num(value) or value <= 0:
                    self.bad("invalid", here, "multipleOf must be a number above 0")
            elif key in _STRING:
                if not isinstance(value, str):
                    self.bad("invalid", here, f"{key} must be a string")
            elif key in _BOOL:
                if not isinstance(value, bool):
                    self.bad("invalid", here, f"{key} must be a boolean")
            elif key in _ANY:
                if key == "examples" and not isinstance(value, list):
                    self.bad("invalid", here, "examples must be an array")
            else:
                self.structural_ok = False  # unknown to this walk: let the metaschema judge

    def pattern(self, value: str, ptr: str) -> None:
        try:
            compile_pattern(value)
        except ValueError as exc:
            self.bad("invalid", ptr, str(exc))


@functools.lru_cache(maxsize=1)
def _meta_validator() -> Any:
    from jsonschema import Draft202012Validator

    return Draft202012Validator(Draft202012Validator.META_SCHEMA)


def _metaschema_errors(schema: Any) -> Iterator[SchemaProblem]:
    for err in _meta_validator().iter_errors(schema):
        ptr = "".join(f"/{_esc(str(p))}" for p in err.absolute_path) or "/"
        yield SchemaProblem("invalid", ptr, f"not valid JSON Schema 2020-12: {err.message}")


@functools.lru_cache(maxsize=8192)
def _check_canonical(blob: bytes, require_object: bool) -> tuple[SchemaProblem, ...]:
    schema = json.loads(blob)
    walk = _Walk(schema)
    if isinstance(schema, dict | bool):
        walk.walk(schema, "")
    else:
        walk.bad("invalid", "/", "a schema must be an object")
    problems = list(walk.problems)
    if require_object and not (isinstance(schema, dict) and schema.get("type") == "object"):
        problems.append(
            SchemaProblem("not_object", "/type", 'an input schema must be "type": "object"')
        )
    if not walk.structural_ok and not any(p.kind == "invalid" for p in walk.problems):
        problems.extend(_metaschema_errors(schema))
    return tuple(problems)


def check_schema(schema: Any, *, require_object: bool) -> list[SchemaProblem]:
    """Every problem in one tool schema (empty list when it is fine).

    Schemas are deduplicated by their canonical bytes, so a schema shared by many tools is
    checked once. Schemas built only from keywords the structural walk understands skip
    the (slow) 2020-12 metaschema validation; anything else is validated against it.
    """
    try:
        blob = canonical_json(schema)
    except (TypeError, ValueError) as exc:
        return [SchemaProblem("invalid", "/", f"not JSON-serializable: {exc}")]
    return list(_check_canonical(blob, require_object))


def schema_digest(schema: Any) -> str:
    """SHA-256 of a schema's canonical JSON."""
    return hashlib.sha256(canonical_json(schema)).hexdigest()
