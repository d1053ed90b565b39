"""Read one tool schema for people: types in words, constraints, and rows of fields.

Local `$ref`s are followed; a model met again inside itself is named, not unrolled.
"""

from __future__ import annotations

from typing import Any

from lineup_build.docs._text import DASH, code, json_text
from lineup_build.schema_refs import json_type, resolve_schema

__all__ = ["SchemaReader"]

_MAX_DEPTH = 4


class SchemaReader:
    """Read one tool schema for people: types, constraints and nested fields."""

    def __init__(self, root: Any) -> None:
        self.root = root

    def resolve(self, node: Any) -> tuple[Any, str | None]:
        node, ref = resolve_schema(node, self.root)
        if node is True or not isinstance(node, dict | bool):
            return {}, ref
        return node, ref

    def branches(self, node: Any, depth: int = 0) -> list[tuple[Any, str | None]]:
        node, ref = self.resolve(node)
        if node is False:
            return []
        for key in ("anyOf", "oneOf"):
            items = node.get(key)
            if isinstance(items, list) and items and depth < 8:
                return [b for sub in items for b in self.branches(sub, depth + 1)]
        return [(node, ref)]

    def type_text(self, node: Any, seen: frozenset[str] = frozenset()) -> str:
        parts: list[str] = []
        for branch, ref in self.branches(node):
            parts.append(self._one_type(branch, ref, seen))
        if not parts:
            return "nothing (no value is valid)"
        parts = list(dict.fromkeys(parts))
        parts.sort(key=lambda p: p == "null")
        return " or ".join(parts)

    def _one_type(self, node: Any, ref: str | None, seen: frozenset[str]) -> str:
        name = ref.rsplit("/", 1)[-1] if ref else None
        types = node.get("type")
        if isinstance(types, list) and types:
            return " or ".join(dict.fromkeys(str(t) for t in types))
        if "const" in node:
            return f"{json_text(node['const'])} (constant)"
        if types == "array" or (types is None and "items" in node):
            items = node.get("items")
            if isinstance(items, dict | bool) and items is not True and items != {}:
                _, item_ref = self.resolve(items)
                if item_ref is not None and item_ref in seen:
                    return f"array of {item_ref.rsplit('/', 1)[-1]}"
                return f"array of {self.type_text(items, seen)}"
            return "array"
        if types == "object" or (types is None and "properties" in node):
            return f"object ({name})" if name else "object"
        if isinstance(types, str):
            return types
        if isinstance(node.get("enum"), list) and node["enum"]:
            kinds = dict.fromkeys(json_type(v) for v in node["enum"])
            return " or ".join(kinds)
        return "any JSON value"

    def constraints(self, node: Any) -> str:
        phrases: list[str] = []
        for branch, _ in self.branches(node):
            for p in _constraints(branch):
                if p not in phrases:
                    phrases.append(p)
        return "; ".join(phrases)

    def rows(
        self,
        node: Any,
        prefix: str = "",
        seen: frozenset[str] = frozenset(),
        depth: int = 0,
    ) -> list[dict[str, str]]:
        """One row per field of the object `node` (nested objects as `a.b`, arrays `a[]`)."""
        objects = [
            (b, r) for b, r in self.branches(node) if b.get("type") == "object" or "properties" in b
        ]
        if len(objects) != 1:
            return []
        obj, ref = objects[0]
        if ref is not None:
            seen = seen | {ref}
        props = obj.get("properties") if isinstance(obj.get("properties"), dict) else {}
        required = obj.get("required") if isinstance(obj.get("required"), list) else []
        names = sorted(props, key=lambda n: (n not in required, n))
        out: list[dict[str, str]] = []
        for name in names:
            schema = props[name]
            resolved, sub_ref = self.resolve(schema)
            description = self.description(resolved)
            full = f"{prefix}{name}"
            items = self.array_items(schema)
            item_ref = self.resolve(items)[1] if items is not None else None
            recursive = sub_ref in seen or item_ref in seen
            type_text = self.type_text(schema, seen)
            if recursive:
                type_text += " (recursive, see above)"
            out.append(
                {
                    "name": full,
                    "type": type_text,
                    "required": "yes" if name in required else "no",
                    "constraints": self.constraints(schema),
                    "default": _default(resolved),
                    "description": str(description),
                }
            )
            if recursive or depth >= _MAX_DEPTH:
                continue
            out.extend(self.rows(schema, f"{full}.", seen, depth + 1))
            if items is not None:
                out.extend(self.rows(items, f"{full}[].", seen, depth + 1))
        return out

    def description(self, node: Any) -> str:
        """A field's own description, else that of the one model an `X | None` names."""
        if not isinstance(node, dict):
            return ""
        if isinstance(node.get("description"), str):
            return str(node["description"])
        values = [b for b, _ in self.branches(node) if b.get("type") != "null"]
        if len(values) == 1 and values[0] is not node:
            text = values[0].get("description")
            return text if isinstance(text, str) else ""
        return ""

    def array_items(self, node: Any) -> Any:
        arrays = [b for b, _ in self.branches(node) if b.get("type") == "array"]
        if len(arrays) == 1 and isinstance(arrays[0].get("items"), dict):
            return arrays[0]["items"]
        return None

    def closed(self, node: Any) -> bool:
        resolved, _ = self.resolve(node)
        return isinstance(resolved, dict) and resolved.get("additionalProperties") is False


def _range(low: Any, high: Any, unit: str) -> str | None:
    def units(n: Any) -> str:
        return f"{unit}" if n == 1 else f"{unit}s"

    if low is not None and high is not None:
        return f"{low}–{high} {units(high)}"
    if low is not None:
        return f"at least {low} {units(low)}"
    if high is not None:
        return f"at most {high} {units(high)}"
    return None


def _constraints(node: dict[str, Any]) -> list[str]:
    out: list[str] = []
    text = _range(node.get("minLength"), node.get("maxLength"), "character")
    if text:
        out.append(text)
    low, high = node.get("minimum"), node.get("maximum")
    if low is not None and high is not None:
        out.append(f"{low}–{high}")
    else:
        if low is not None:
            out.append(f"≥ {low}")
        if high is not None:
            out.append(f"≤ {high}")
    if node.get("exclusiveMinimum") is not None:
        out.append(f"> {node['exclusiveMinimum']}")
    if node.get("exclusiveMaximum") is not None:
        out.append(f"< {node['exclusiveMaximum']}")
    if node.get("multipleOf") is not None:
        out.append(f"multiple of {node['multipleOf']}")
    text = _range(node.get("minItems"), node.get("maxItems"), "item")
    if text:
        out.append(text)
    if node.get("uniqueItems") is True:
        out.append("unique items")
    if isinstance(node.get("pattern"), str):
        out.append(f"matches {code(node['pattern'])}")
    if isinstance(node.get("format"), str):
        out.append(f"format {code(node['format'])}")
    if isinstance(node.get("enum"), list):
        out.append("one of " + ", ".join(code(json_text(v)) for v in node["enum"]))
    return out


def _default(node: Any) -> str:
    if isinstance(node, dict) and "default" in node:
        return code(json_text(node["default"]))
    return DASH
