"""A fast, sufficient test that an instance plainly satisfies a simple JSON Schema.

The generic validator spends about 0.25 ms on each tool entry of a manifest (a `oneOf` of
two closed definitions behind `$ref`s), which dominates `verify`, `inspect` and
`lineup diff` of a large app. `compile_plain` turns a schema that uses only a small set of
keywords into a predicate with the same meaning on the instances it accepts, and stricter
elsewhere: it says True only when the instance plainly satisfies the schema, so anything
else can still go to the JSON Schema validator, which stays the authority (and writes the
messages). A schema that uses any other keyword gives None: no fast path.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sized
from typing import Any, cast

__all__ = ["Check", "compile_plain"]

Check = Callable[[Any], bool]

_ANNOTATIONS = frozenset({"title", "description", "$comment"})
_SIZES: dict[str, type] = {
    "minLength": str,
    "maxLength": str,
    "minItems": list,
    "maxItems": list,
    "minProperties": dict,
    "maxProperties": dict,
}
_BOUNDS: dict[str, Callable[[Any, Any], bool]] = {
    "minimum": lambda x, b: x >= b,
    "maximum": lambda x, b: x <= b,
    "exclusiveMinimum": lambda x, b: x > b,
    "exclusiveMaximum": lambda x, b: x < b,
}


def _is_type(value: Any, name: str) -> bool:
    if name == "object":
        return type(value) is dict
    if name == "array":
        return type(value) is list
    if name == "string":
        return type(value) is str
    if name == "boolean":
        return type(value) is bool
    if name == "null":
        return value is None
    if name == "integer":
        return type(value) is int
    if name == "number":
        return type(value) in (int, float)
    return False


def _scalar(value: Any) -> bool:
    return value is None or type(value) in (str, int, float, bool)


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON Schema means it, for scalars only (`1` is not `true`)."""
    return _scalar(a) and _scalar(b) and type(a) is type(b) and a == b


def compile_plain(schema: Any, root: Any = None, _depth: int = 0) -> Check | None:
    """A predicate for `schema` (its `$ref`s resolved in `root`), or None if unsupported.

    Supported: `type`, `const`, `enum` (scalars), `properties`, `required`,
    `additionalProperties: false`, `items`, the `min`/`max` `Length`, `Items` and
    `Properties` sizes, `pattern`, the four numeric bounds, `oneOf`, and local `$ref`s into
    `$defs`; annotations are ignored.
    """
    root = schema if root is None else root
    if _depth > 16 or not isinstance(schema, dict):
        return None
    checks: list[Check] = []
    for key, value in schema.items():
        check = _keyword(key, value, schema, root, _depth)
        if check is None:
            return None
        checks.append(check)
    return lambda x: all(c(x) for c in checks)


def _ref(value: Any, root: Any, depth: int) -> Check | None:
    if not isinstance(value, str) or not value.startswith("#/$defs/"):
        return None
    name = value[len("#/$defs/") :]
    defs = root.get("$defs") if isinstance(root, dict) else None
    if not isinstance(defs, dict) or name not in defs or "/" in name or "~" in name:
        return None
    return compile_plain(defs[name], root, depth + 1)


def _keyword(key: str, value: Any, schema: dict[str, Any], root: Any, depth: int) -> Check | None:
    if key in _ANNOTATIONS or key == "$defs" or key == "$schema":
        return lambda x: True
    if key == "$ref":
        return _ref(value, root, depth)
    if key == "type":
        names = [value] if isinstance(value, str) else value
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            return None
        return lambda x: any(_is_type(x, n) for n in names)
    if key == "const":
        return (lambda x: _same(x, value)) if _scalar(value) else None
    if key == "enum":
        if not isinstance(value, list) or not all(_scalar(v) for v in value):
            return None
        return lambda x: any(_same(x, v) for v in value)
    if key == "pattern":
        if not isinstance(value, str):
            return None
        try:
            search = re.compile(value).search
        except re.error:
            return None
        return lambda x: type(x) is not str or search(x) is not None
    if key in _SIZES:
        if type(value) is not int:
            return None
        kind, low = _SIZES[key], key.startswith("min")

        def size(x: Any) -> bool:
            if type(x) is not kind:
                return True
            n = len(cast(Sized, x))
            return n >= value if low else n <= value

        return size
    if key in _BOUNDS:
        if type(value) not in (int, float):
            return None
        test = _BOUNDS[key]
        return lambda x: type(x) not in (int, float) or test(x, value)
    if key == "required":
        if not isinstance(value, list) or not all(isinstance(n, str) for n in value):
            return None
        return lambda x: type(x) is not dict or all(n in x for n in value)
    if key == "additionalProperties":
        if value is not False:
            return None
        allowed = frozenset(schema.get("properties", {}))
        return lambda x: type(x) is not dict or x.keys() <= allowed
    if key == "properties":
        return _properties(value, root, depth)
    if key == "items":
        item = compile_plain(value, root, depth + 1)
        if item is None:
            return None
        return lambda x: type(x) is not list or all(item(v) for v in x)
    if key == "oneOf":
        return _one_of(value, root, depth)
    return None


def _properties(value: Any, root: Any, depth: int) -> Check | None:
    if not isinstance(value, dict):
        return None
    props: dict[str, Check] = {}
    for name, sub in value.items():
        check = compile_plain(sub, root, depth + 1)
        if check is None:
            return None
        props[name] = check
    return lambda x: type(x) is not dict or all(c(x[n]) for n, c in props.items() if n in x)


def _one_of(value: Any, root: Any, depth: int) -> Check | None:
    if not isinstance(value, list) or not value:
        return None
    options = [compile_plain(sub, root, depth + 1) for sub in value]
    if any(o is None for o in options):
        return None
    checks = [o for o in options if o is not None]
    return lambda x: sum(1 for c in checks if c(x)) == 1
