"""An example call for each tool: the author's `examples` where the schema has them, else
params generated from the schema, deterministically (same schema, same example).

The generated params satisfy the schema's common constraints (types, required fields,
`enum`/`const`, lengths, ranges, item counts, the usual formats); a `pattern` is not
solved, so a field constrained by one gets a placeholder and the page says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from lineup_build.schema_refs import resolve_schema

__all__ = ["Example", "example_params"]

_MAX_DEPTH = 6
_FORMATS = {
    "date-time": "2026-01-01T09:00:00Z",
    "date": "2026-01-01",
    "time": "09:00:00Z",
    "email": "user@example.com",
    "uri": "https://example.com/",
    "url": "https://example.com/",
    "uuid": "00000000-0000-4000-8000-000000000000",
    "hostname": "example.com",
    "ipv4": "192.0.2.1",
    "ipv6": "2001:db8::1",
}


@dataclass(frozen=True)
class Example:
    """Example params of one tool.

    Attributes:
        params: The params object.
        source: `author` (the schema's own `examples`), `mixed` (some fields' examples or
            defaults, the rest generated) or `generated`.
        unsolved: JSON pointers of fields whose `pattern` the generator did not satisfy.
    """

    params: Any
    source: str
    unsolved: tuple[str, ...] = ()


class _Maker:
    def __init__(self, root: Any) -> None:
        self.root = root
        self.used_author = False
        self.generated = False
        self.unsolved: list[str] = []

    def resolve(self, node: Any) -> dict[str, Any]:
        node, _ = resolve_schema(node, self.root)
        return node if isinstance(node, dict) else {}

    def value(self, node: Any, where: str, depth: int) -> Any:
        node = self.resolve(node)
        examples = node.get("examples")
        if isinstance(examples, list) and examples:
            self.used_author = True
            return examples[0]
        if "const" in node:
            return node["const"]
        if "default" in node:
            self.used_author = True
            return node["default"]
        if isinstance(node.get("enum"), list) and node["enum"]:
            self.generated = True
            return node["enum"][0]
        for key in ("anyOf", "oneOf"):
            branches = node.get(key)
            if isinstance(branches, list) and branches:
                pick = next(
                    (b for b in branches if self.resolve(b).get("type") != "null"), branches[0]
                )
                return self.value(pick, where, depth)
        all_of = node.get("allOf")
        if isinstance(all_of, list) and len(all_of) == 1:
            return self.value(all_of[0], where, depth)
        kind = node.get("type")
        if isinstance(kind, list):
            kind = next((t for t in kind if t != "null"), "null")
        if kind is None:
            kind = "object" if "properties" in node else "array" if "items" in node else None
        if kind == "object":
            return self.obj(node, where, depth)
        if kind == "array":
            return self.array(node, where, depth)
        self.generated = True
        if kind == "string":
            return self.string(node, where)
        if kind in ("integer", "number"):
            return _number(node, integer=kind == "integer")
        if kind == "boolean":
            return True
        if kind == "null":
            return None
        return "value"

    def obj(self, node: dict[str, Any], where: str, depth: int) -> dict[str, Any]:
        if depth >= _MAX_DEPTH:
            return {}
        found, listed = node.get("properties"), node.get("required")
        props: dict[str, Any] = found if isinstance(found, dict) else {}
        required: list[Any] = listed if isinstance(listed, list) else []
        out: dict[str, Any] = {}
        for name in sorted(props):
            sub = self.resolve(props[name])
            wanted = name in required or (
                isinstance(sub.get("examples"), list) and bool(sub["examples"])
            )
            if wanted:
                out[name] = self.value(props[name], f"{where}/{_escape(name)}", depth + 1)
        return out

    def array(self, node: dict[str, Any], where: str, depth: int) -> list[Any]:
        items = node.get("items")
        if depth >= _MAX_DEPTH or not isinstance(items, dict) or node.get("maxItems") == 0:
            return []
        count = max(int(node.get("minItems") or 1), 1)
        first = self.value(items, f"{where}/0", depth + 1)
        if node.get("uniqueItems") is True and count > 1 and isinstance(first, int | float):
            return [first + i for i in range(count)]
        return [first] * count

    def string(self, node: dict[str, Any], where: str) -> str:
        fmt = node.get("format")
        text = _FORMATS.get(fmt, "text") if isinstance(fmt, str) else "text"
        if isinstance(node.get("pattern"), str):
            self.unsolved.append(where or "/")
        low = node.get("minLength")
        high = node.get("maxLength")
        if isinstance(low, int) and len(text) < low:
            text += "x" * (low - len(text))
        if isinstance(high, int) and len(text) > high:
            text = text[:high]
        return text


def _number(node: dict[str, Any], *, integer: bool) -> int | float:
    low = node.get("minimum")
    high = node.get("maximum")
    if node.get("exclusiveMinimum") is not None:
        ex = node["exclusiveMinimum"]
        low = math.floor(ex) + 1 if integer else ex + 1
    if node.get("exclusiveMaximum") is not None:
        ex = node["exclusiveMaximum"]
        high = math.ceil(ex) - 1 if integer else ex - 1
    value: int | float = low if low is not None else min(1, high) if high is not None else 1
    step = node.get("multipleOf")
    if isinstance(step, int | float) and step > 0 and not isinstance(step, bool):
        value = math.ceil(value / step) * step
    if integer:
        return math.ceil(value)
    return value


def _escape(name: str) -> str:
    return name.replace("~", "~0").replace("/", "~1")


def example_params(input_schema: Any) -> Example:
    """Example params for a tool with `input_schema` (see the module docstring)."""
    root = input_schema if isinstance(input_schema, dict) else {}
    whole = root.get("examples")
    if isinstance(whole, list) and whole and isinstance(whole[0], dict):
        return Example(whole[0], "author")
    maker = _Maker(root)
    params = maker.obj(root, "", 0) if root else {}
    source = ("mixed" if maker.generated else "author") if maker.used_author else "generated"
    return Example(params, source, tuple(maker.unsolved))
