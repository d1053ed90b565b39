"""Local JSON Schema references: JSON pointers, `$ref` lookup and resolution.

Shared by `lineup diff` and `lineup docs`, which both read schemas with their local
references followed. Only references inside the schema (`#...`) are ever followed.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

__all__ = ["escape_pointer", "has_ref", "json_type", "resolve_schema"]


def json_type(value: Any) -> str:
    """The JSON Schema type of a JSON value: `null`, `boolean`, `integer`, `number`,
    `string`, `array` or `object`.

    A number with a zero fractional part is an `integer` (`2.0` as `2`): JSON Schema's
    data model has one number value space, and its `integer` is any number whose
    fractional part is zero (JSON Schema core 2020-12, 4.2.1) — so `{"type": "integer"}`
    accepts `2.0`, as the `jsonschema` validator the build and runtime use does. Shared by
    `lineup diff` and `lineup docs` so they cannot disagree.
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if value.is_integer() else "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def escape_pointer(token: str) -> str:
    """One JSON pointer reference token (RFC 6901)."""
    return token.replace("~", "~0").replace("/", "~1")


def _lookup(root: Any, ref: str) -> tuple[bool, Any]:
    node = root
    if ref == "#":
        return isinstance(node, dict | bool), node
    if not ref.startswith("#/"):
        return False, None
    for raw in ref[2:].split("/"):
        token = unquote(raw).replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            return False, None
    return isinstance(node, dict | bool), node


def resolve_schema(node: Any, root: Any) -> tuple[Any, str | None]:
    """Follow local `$ref`s (and a one-element `allOf`) from `node` to the effective schema.

    Siblings of a `$ref` are merged over its target. Returns the schema (a dict, or
    `False`) and the last reference followed. A remote, unresolvable or purely cyclic
    reference is returned as written.
    """
    ref: str | None = None
    seen: set[str] = set()
    while isinstance(node, dict):
        target: Any
        if isinstance(node.get("$ref"), str):
            key = node["$ref"]
            if key in seen or not key.startswith("#"):
                return node, ref
            seen.add(key)
            found, target = _lookup(root, key)
            if not found:
                return node, ref
            ref = key
            rest = {k: v for k, v in node.items() if k != "$ref"}
        elif (
            isinstance(node.get("allOf"), list)
            and len(node["allOf"]) == 1
            and isinstance(node["allOf"][0], dict | bool)
        ):
            target = node["allOf"][0]
            rest = {k: v for k, v in node.items() if k != "allOf"}
        else:
            return node, ref
        if target is False:
            return False, ref
        node = {**(target if isinstance(target, dict) else {}), **rest}
    return node, ref


def has_ref(node: Any) -> bool:
    if isinstance(node, dict):
        return "$ref" in node or any(has_ref(v) for v in node.values())
    if isinstance(node, list):
        return any(has_ref(v) for v in node)
    return False
