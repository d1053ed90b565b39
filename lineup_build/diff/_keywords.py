"""Keyword-level changes of two branches of the same JSON type: enums and constraints.

Each function yields `(pointer, kind, message, old, new)`; the schema walk decides whether
a kind breaks on its side.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from fractions import Fraction
from typing import Any

from lineup_build.diff._rules import LOWER, UPPER

__all__ = ["Found", "bound_changes", "canon", "enum_changes", "show"]

Found = tuple[str, str, str, Any, Any]


def found(pointer: str, kind: str, message: str, old: Any = None, new: Any = None) -> Found:
    """One change as the walk records it."""
    return (pointer, kind, message, old, new)


def canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def show(value: Any, limit: int = 80) -> str:
    text = canon(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _values(items: Iterable[Any]) -> str:
    return ", ".join(show(v) for v in items)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _enum_values(node: dict[str, Any]) -> dict[str, Any] | None:
    if isinstance(node.get("enum"), list):
        values = node["enum"]
    elif "const" in node:
        values = [node["const"]]
    else:
        return None
    return {canon(v): v for v in values}


def enum_changes(o: dict[str, Any], n: dict[str, Any], ptr: str) -> Iterator[Found]:
    """Values added to or removed from `enum`/`const`, or the limit added or dropped."""
    ov, nv = _enum_values(o), _enum_values(n)
    key = "enum" if "enum" in n or ("const" not in n and "enum" in o) else "const"
    where = f"{ptr}/{key}"
    if ov is None and nv is None:
        return
    if ov is None:
        assert nv is not None
        yield found(
            where,
            "enum_added",
            f"now limited to {_values(nv.values())}",
            None,
            list(nv.values()),
        )
        return
    if nv is None:
        yield found(
            where,
            "enum_removed",
            f"no longer limited to {_values(ov.values())}",
            list(ov.values()),
        )
        return
    removed = [ov[k] for k in ov if k not in nv]
    added = [nv[k] for k in nv if k not in ov]
    if removed:
        yield found(
            where, "enum_value_removed", f"value(s) removed: {_values(removed)}", removed, None
        )
    if added:
        yield found(where, "enum_value_added", f"value(s) added: {_values(added)}", None, added)


def bound_changes(
    o: dict[str, Any], n: dict[str, Any], ptr: str, kinds: frozenset[str]
) -> Iterator[Found]:
    """Bounds, `multipleOf`, `pattern`, `format` and `uniqueItems` among `kinds`."""
    for key in (*LOWER, *UPPER):
        if key not in kinds:
            continue
        a, b = o.get(key), n.get(key)
        if a == b:
            continue
        where = f"{ptr}/{key}"
        if (a is not None and not _number(a)) or (b is not None and not _number(b)):
            yield found(where, "constraint_changed", f"{key} {show(a)} -> {show(b)}", a, b)
        elif a is None:
            yield found(where, "constraint_tightened", f"{key} {show(b)} added", None, b)
        elif b is None:
            yield found(where, "constraint_loosened", f"{key} {show(a)} removed", a, None)
        elif (b > a) == (key in LOWER):
            verb = "raised" if b > a else "lowered"
            yield found(where, "constraint_tightened", f"{key} {verb} from {a} to {b}", a, b)
        else:
            verb = "raised" if b > a else "lowered"
            yield found(where, "constraint_loosened", f"{key} {verb} from {a} to {b}", a, b)
    if "multipleOf" in kinds:
        yield from multiple_of_changes(
            o.get("multipleOf"), n.get("multipleOf"), f"{ptr}/multipleOf"
        )
    for key in ("pattern", "format"):
        if key not in kinds:
            continue
        a, b = o.get(key), n.get(key)
        if a == b:
            continue
        where = f"{ptr}/{key}"
        if a is None:
            yield found(where, "constraint_tightened", f"{key} {show(b)} added", None, b)
        elif b is None:
            yield found(where, "constraint_loosened", f"{key} {show(a)} removed", a, None)
        else:
            yield found(where, "constraint_changed", f"{key} {show(a)} -> {show(b)}", a, b)
    if "uniqueItems" in kinds:
        a, b = o.get("uniqueItems") is True, n.get("uniqueItems") is True
        if a != b:
            kind = "constraint_tightened" if b else "constraint_loosened"
            yield found(f"{ptr}/uniqueItems", kind, f"uniqueItems {a} -> {b}", a, b)


def multiple_of_changes(a: Any, b: Any, where: str) -> Iterator[Found]:
    if a == b:
        return
    if a is None:
        yield found(where, "constraint_tightened", f"multipleOf {show(b)} added", None, b)
    elif b is None:
        yield found(where, "constraint_loosened", f"multipleOf {show(a)} removed", a, None)
    elif _number(a) and _number(b) and a > 0 and b > 0:
        ratio = Fraction(str(b)) / Fraction(str(a))
        if ratio.denominator == 1:
            yield found(where, "constraint_tightened", f"multipleOf {a} -> {b}", a, b)
        elif ratio.numerator == 1:
            yield found(where, "constraint_loosened", f"multipleOf {a} -> {b}", a, b)
        else:
            yield found(where, "constraint_changed", f"multipleOf {a} -> {b}", a, b)
    else:
        yield found(where, "constraint_changed", f"multipleOf {show(a)} -> {show(b)}", a, b)
