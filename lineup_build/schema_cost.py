"""What validating a value against a tool schema can cost, decided from the schema alone.

The cost of JSON Schema validation is set by the schema's shape, not the value's size: a
`$ref` used twice inside an `anyOf` makes every level apply the level below twice to the
same value, so 16 such levels of a 1 KB schema apply 2^16 subschemas to one string. This
module measures that statically, once per schema, in time linear in the schema:

- `expansion`: how many subschemas validation may apply to one value, `$ref`s followed
  and a shared `$defs` entry counted each time it is reached (a reference cycle counted
  once: a recursive model descends into the value each round);
- `nesting`: how deep subschemas nest, `$ref`s followed;
- `plain`: the schema uses only keywords whose cost is linear in the value, has no
  reference cycle and a bounded expansion. Such a schema is validated where the value
  is (the runtime checks it on the calling thread); any other schema goes to the
  killable validator process with a time budget per value (SPEC 13.3).

Build warns past `EXPENSIVE_*` (`schema_expensive`) and build, verify and install refuse
past `MAX_*` (`schema_too_complex`). Pure; no imports beyond the standard library.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lineup_build.schemas import _LIST_OF_SCHEMAS, _ONE_SCHEMA

__all__ = [
    "EXPENSIVE_EXPANSION",
    "EXPENSIVE_NESTING",
    "MAX_EXPANSION",
    "MAX_NESTING",
    "PLAIN_EXPANSION",
    "SchemaCost",
    "schema_cost",
]

#: A plain schema applies at most this many subschemas to one value.
PLAIN_EXPANSION = 1024
#: Past these, `check`/`build` warn `schema_expensive` (validation may take milliseconds
#: per value and runs under the validation budget).
EXPENSIVE_EXPANSION = 10_000
EXPENSIVE_NESTING = 32
#: Past these, `build`, `verify` and `install` refuse the schema (`schema_too_complex`):
#: about 20 levels of two-way `anyOf`/`oneOf`/`allOf` of one `$ref`, or nesting deeper than
#: the 64 levels an Agent's params may have (the validation depth `lineup diff` follows).
MAX_EXPANSION = 1_000_000
MAX_NESTING = 64

#: Keywords whose work is linear in the value (each applies its subschemas to the value
#: once, or to each of its children once); annotations cost nothing.
_PLAIN_KEYWORDS = frozenset(
    {
        "$schema",
        "$comment",
        "$defs",
        "definitions",
        "$ref",
        "title",
        "description",
        "default",
        "examples",
        "deprecated",
        "readOnly",
        "writeOnly",
        "discriminator",
        "type",
        "const",
        "enum",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "prefixItems",
        "minLength",
        "maxLength",
        "minItems",
        "maxItems",
        "minProperties",
        "maxProperties",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "pattern",
        "format",
        "anyOf",
        "oneOf",
        "allOf",
        "not",
    }
)
# where subschemas sit: the keyword lists of `schemas` (one schema, a list, a map)
_ONE = ("items", *_ONE_SCHEMA)
_LIST = _LIST_OF_SCHEMAS
_MAP = ("properties", "patternProperties", "dependentSchemas")
#: The walk stops counting here: every bound above is far below it.
_CAP = 10**12


@dataclass(frozen=True, slots=True)
class SchemaCost:
    """The static cost of one schema (see the module docstring)."""

    expansion: int
    nesting: int
    recursive: bool
    plain: bool

    @property
    def too_complex(self) -> bool:
        """Past the hard bound: refused by build, verify and install."""
        return self.expansion > MAX_EXPANSION or self.nesting > MAX_NESTING

    @property
    def expensive(self) -> bool:
        """Past the warning bound (`schema_expensive`)."""
        return self.expansion > EXPENSIVE_EXPANSION or self.nesting > EXPENSIVE_NESTING


def _children(node: dict[str, Any]) -> list[Any]:
    out: list[Any] = []
    for key in _ONE:
        if key in node:
            out.append(node[key])
    for key in _LIST:
        value = node.get(key)
        if isinstance(value, list):
            out.extend(value)
    for key in _MAP:
        value = node.get(key)
        if isinstance(value, dict):
            out.extend(value.values())
    return out


def _target(ref: Any, root: Any) -> Any:
    """The local node `ref` names in `root`, or None (remote or missing: checked elsewhere)."""
    if not isinstance(ref, str) or not ref.startswith("#"):
        return None
    node = root
    if ref in ("#", "#/"):
        return root
    if not ref.startswith("#/"):
        return None
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict):
            node = node.get(part)
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


class _Walk:
    def __init__(self, root: Any) -> None:
        self.root = root
        self.done: dict[int, tuple[int, int]] = {}
        self.stack: set[int] = set()
        self.recursive = False
        self.plain_keywords = True

    def cost(self, node: Any) -> tuple[int, int]:
        """`(expansion, nesting)` of `node`, iteratively (no nesting can overflow)."""
        # a post-order walk with an explicit stack: (node, children left, sums)
        if not isinstance(node, dict):
            return (1, 1)
        result: tuple[int, int] = (1, 1)
        frames: list[tuple[dict[str, Any], list[Any], list[int]]] = []
        self._enter(node, frames)
        while frames:
            current, todo, acc = frames[-1]
            if todo:
                child = todo.pop()
                if not isinstance(child, dict):
                    acc[0] = min(_CAP, acc[0] + 1)
                    acc[1] = max(acc[1], 2)
                    continue
                known = self.done.get(id(child))
                if known is not None:
                    acc[0] = min(_CAP, acc[0] + known[0])
                    acc[1] = max(acc[1], known[1] + 1)
                    continue
                if id(child) in self.stack:  # a reference cycle: counted once
                    self.recursive = True
                    acc[0] = min(_CAP, acc[0] + 1)
                    continue
                self._enter(child, frames)
                continue
            frames.pop()
            self.stack.discard(id(current))
            result = (acc[0], acc[1])
            self.done[id(current)] = result
            if frames:
                parent = frames[-1][2]
                parent[0] = min(_CAP, parent[0] + result[0])
                parent[1] = max(parent[1], result[1] + 1)
        return result

    def _enter(self, node: dict[str, Any], frames: list[Any]) -> None:
        if not set(node) <= _PLAIN_KEYWORDS:
            self.plain_keywords = False
        children = _children(node)
        if "$ref" in node:
            target = _target(node["$ref"], self.root)
            if isinstance(target, dict):
                children.append(target)
        self.stack.add(id(node))
        frames.append((node, children, [1, 1]))


def schema_cost(schema: Any) -> SchemaCost:
    """The static cost of validating values against `schema` (a 2020-12 tool schema)."""
    if not isinstance(schema, dict):
        return SchemaCost(1, 1, False, True)
    walk = _Walk(schema)
    expansion, nesting = walk.cost(schema)
    plain = walk.plain_keywords and not walk.recursive and expansion <= PLAIN_EXPANSION
    return SchemaCost(expansion, nesting, walk.recursive, plain)
