"""Compare two JSON Schemas of one tool as an Agent written against OLD meets NEW.

Pure functions over data. Local `$ref`s are followed (siblings of a `$ref` merge over its
target); a pair of references already being or having been compared is not expanded
again, so recursive models end and shared models are reported once per place they are
first met. Unions (`anyOf`/`oneOf`, `type` lists, an `enum` of several JSON types) are
split into one branch per JSON type and branches are matched by type, which is how a
pydantic `X | None` field compares with a plain `X`.

Every difference becomes a `SchemaChange` whose kind names the rule; whether it breaks
depends on the side (SPEC 11): an input schema is what Agents send (NEW must accept what
OLD accepted), a result schema is what they receive (NEW must not promise less or return
more).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

__all__ = [
    "INPUT",
    "RESULT",
    "RULES",
    "SchemaChange",
    "compare_schemas",
    "escape_pointer",
    "resolve_schema",
]

INPUT = "input"
RESULT = "result"

#: kind -> (breaking in an input schema, breaking in a result schema).
RULES: dict[str, tuple[bool, bool]] = {
    "property_added": (False, False),
    "required_property_added": (True, False),
    "property_removed": (True, True),
    "property_required": (True, False),
    "property_optional": (False, True),
    "additional_properties_closed": (True, False),
    "additional_properties_opened": (False, True),
    "type_narrowed": (True, False),
    "type_widened": (False, True),
    "type_changed": (True, True),
    "enum_added": (True, False),
    "enum_removed": (False, True),
    "enum_value_added": (False, True),
    "enum_value_removed": (True, False),
    "constraint_tightened": (True, False),
    "constraint_loosened": (False, True),
    "constraint_changed": (True, True),
    "keyword_changed": (True, True),
    "too_complex": (True, True),
    "description_changed": (False, False),
    "default_changed": (False, False),
    "annotation_changed": (False, False),
}

_ANNOTATIONS = frozenset(
    {
        "title",
        "examples",
        "deprecated",
        "readOnly",
        "writeOnly",
        "$comment",
        "contentMediaType",
        "contentEncoding",
        "discriminator",
    }
)
# Keys that assert nothing about an instance and are never compared as assertions.
_INERT = _ANNOTATIONS | {"description", "default", "$defs", "definitions", "$schema", "$anchor"}
_LOWER = ("minLength", "minimum", "exclusiveMinimum", "minItems", "minProperties", "minContains")
_UPPER = ("maxLength", "maximum", "exclusiveMaximum", "maxItems", "maxProperties", "maxContains")
_BY_TYPE: dict[str, frozenset[str]] = {
    "string": frozenset({"minLength", "maxLength", "pattern", "format"}),
    "number": frozenset(
        {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "format"}
    ),
    "array": frozenset(
        {
            "items",
            "prefixItems",
            "minItems",
            "maxItems",
            "uniqueItems",
            "contains",
            "minContains",
            "maxContains",
            "unevaluatedItems",
        }
    ),
    "object": frozenset(
        {
            "properties",
            "required",
            "additionalProperties",
            "patternProperties",
            "propertyNames",
            "minProperties",
            "maxProperties",
            "dependentRequired",
            "dependentSchemas",
            "unevaluatedProperties",
        }
    ),
}
_BY_TYPE["integer"] = _BY_TYPE["number"]
_TYPED = frozenset().union(*_BY_TYPE.values())
# Handled one by one below; anything else that asserts is compared as a whole.
_HANDLED = frozenset(
    {
        *_LOWER,
        *_UPPER,
        "type",
        "enum",
        "const",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "prefixItems",
        "pattern",
        "format",
        "multipleOf",
        "uniqueItems",
        "$ref",
        "allOf",
    }
)
_JSON_TYPES = ("null", "boolean", "object", "array", "number", "string", "integer")
_MAX_DEPTH = 100  # nested schemas; each level costs a few Python frames
_MAX_NODES = 200_000
_ANY = "any"


@dataclass(frozen=True)
class SchemaChange:
    """One difference between two schemas.

    Attributes:
        pointer: JSON pointer into the resolved schema (references followed), "" = root.
        kind: The rule, a key of `RULES`.
        breaking: Whether an Agent written against OLD can fail against NEW.
        message: What changed, in words.
        old: The old value of the keyword, where there is one to show.
        new: The new value.
    """

    pointer: str
    kind: str
    breaking: bool
    message: str
    old: Any = None
    new: Any = None


def escape_pointer(token: str) -> str:
    """One JSON pointer reference token (RFC 6901)."""
    return token.replace("~", "~0").replace("/", "~1")


def _canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _json_type(value: Any) -> str:
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


def _show(value: Any, limit: int = 80) -> str:
    text = _canon(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _values(items: Iterable[Any]) -> str:
    return ", ".join(_show(v) for v in items)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@dataclass
class _Branch:
    """One alternative of a schema: a single JSON type (or any) and its keywords."""

    type: str
    node: dict[str, Any]
    suffix: str  # where its keywords live, relative to the node's pointer
    name: str | None  # the model it came from ($ref target or title), for matching
    ref: str | None  # the reference it was reached through, if any


class _Walk:
    def __init__(self, old_root: Any, new_root: Any, side: str) -> None:
        self.roots = (old_root, new_root)
        self.side = side
        self.out: list[SchemaChange] = []
        self.pairs: set[tuple[str, str, str, str]] = set()
        self.notes: set[tuple[str, str, str, str]] = set()
        self.nodes = 0

    # --- reporting ---------------------------------------------------------------------

    def add(self, pointer: str, kind: str, message: str, old: Any = None, new: Any = None) -> None:
        breaking = RULES[kind][0 if self.side == INPUT else 1]
        self.out.append(SchemaChange(pointer, kind, breaking, message, old, new))

    # --- references ----------------------------------------------------------------------

    def resolve(self, node: Any, which: int) -> tuple[Any, str | None]:
        return resolve_schema(node, self.roots[which])

    # --- branches ------------------------------------------------------------------------

    def branches(self, node: Any, which: int, suffix: str, depth: int = 0) -> list[_Branch]:
        node, ref = self.resolve(node, which)
        if node is False:
            return []
        if not isinstance(node, dict):
            node = {}  # `true`
        name = ref.rsplit("/", 1)[-1] if ref else node.get("title")
        name = name if isinstance(name, str) else None
        for key in ("anyOf", "oneOf"):
            union = node.get(key)
            others = set(node) - _INERT - {key}
            if isinstance(union, list) and union and not others and depth < 16:
                out: list[_Branch] = []
                for i, sub in enumerate(union):
                    out.extend(self.branches(sub, which, f"{suffix}/{key}/{i}", depth + 1))
                return out
        types = node.get("type")
        if isinstance(types, str):
            types = [types]
        if not isinstance(types, list) and isinstance(node.get("enum"), list) and node["enum"]:
            types = sorted({_json_type(v) for v in node["enum"]})
        elif not isinstance(types, list) and "const" in node:
            types = [_json_type(node["const"])]
        if not isinstance(types, list) or not all(t in _JSON_TYPES for t in types) or not types:
            return [_Branch(_ANY, node, suffix, name, ref)]
        return [_Branch(t, _only_type(node, t), suffix, name, ref) for t in dict.fromkeys(types)]

    # --- comparison ----------------------------------------------------------------------

    def node(self, old: Any, new: Any, ptr: str, depth: int = 0) -> None:
        """Compare two schemas at `ptr` (annotations of the node, then its branches)."""
        self.nodes += 1
        if _canon(old) == _canon(new) and not _has_ref(old):
            return  # equal text without references is equal meaning
        if depth > _MAX_DEPTH or self.nodes > _MAX_NODES:
            self.add(ptr, "too_complex", "schema too deep or too large to compare; it differs")
            return
        if not isinstance(old, dict | bool) or not isinstance(new, dict | bool):
            self.add(ptr, "keyword_changed", "not a schema; its text changed", old, new)
            return
        o, oref = self.resolve(old, 0)
        n, nref = self.resolve(new, 1)
        if isinstance(o, dict) and isinstance(n, dict) and self.first_notes(o, n, oref, nref):
            # A field that became `X | None` (or stopped being one) keeps its notes on the
            # union wrapper or on the model it points to; a note missing on the wrapper is
            # not a change.
            wrapper = _is_union(o) != _is_union(n)
            self.annotations(o, n, ptr, wrapper=wrapper)
        self.union(old, new, ptr, depth)

    def first_notes(
        self, o: dict[str, Any], n: dict[str, Any], oref: str | None, nref: str | None
    ) -> bool:
        """False when the same pair of models with the same notes was met before, so a
        changed model description is reported where it is first met, not at every use."""
        if oref is None or nref is None:
            return True
        key = (oref, nref, _canon(_notes(o)), _canon(_notes(n)))
        if key in self.notes:
            return False
        self.notes.add(key)
        return True

    def annotations(
        self, o: dict[str, Any], n: dict[str, Any], ptr: str, *, wrapper: bool = False
    ) -> None:
        if wrapper:
            o, n = _common_notes(o, n)
        if o.get("description") != n.get("description"):
            self.add(
                f"{ptr}/description",
                "description_changed",
                "description changed",
                o.get("description"),
                n.get("description"),
            )
        if "default" in o or "default" in n:
            od, nd = o.get("default", _MISSING), n.get("default", _MISSING)
            if _canon_or(od) != _canon_or(nd):
                self.add(
                    f"{ptr}/default",
                    "default_changed",
                    f"default {_word(od)} -> {_word(nd)}",
                    None if od is _MISSING else od,
                    None if nd is _MISSING else nd,
                )
        for key in sorted(_ANNOTATIONS):
            if _canon_or(o.get(key, _MISSING)) != _canon_or(n.get(key, _MISSING)):
                self.add(
                    f"{ptr}/{key}", "annotation_changed", f"{key} changed", o.get(key), n.get(key)
                )

    def union(self, old: Any, new: Any, ptr: str, depth: int) -> None:
        obs, nbs = self.branches(old, 0, ""), self.branches(new, 1, "")
        pairs, lost, gained = _match(obs, nbs)
        for ob, nb in pairs:
            where = ptr + (nb.suffix or ob.suffix)
            if ob.type != nb.type:
                if nb.type == _ANY or (ob.type, nb.type) == ("integer", "number"):
                    self.add(
                        f"{where}/type",
                        "type_widened",
                        f"type {ob.type} -> {nb.type}",
                        ob.type,
                        nb.type,
                    )
                else:
                    self.add(
                        f"{where}/type",
                        "type_narrowed",
                        f"type {ob.type} -> {nb.type}",
                        ob.type,
                        nb.type,
                    )
            if ob.ref is not None and nb.ref is not None:
                pair = (ob.ref, nb.ref, ob.type, nb.type)
                if pair in self.pairs:
                    continue  # compared by reference: a recursive or shared model
                self.pairs.add(pair)
            if ob.suffix and nb.suffix:  # alternatives of a union carry their own notes
                self.annotations(ob.node, nb.node, where)
            self.branch(ob, nb, where, depth)
        old_types = [b.type for b in obs]
        new_types = [b.type for b in nbs]
        lost_t = [b.type for b in lost]
        gained_t = [b.type for b in gained]
        shown_old, shown_new = _types(old_types), _types(new_types)
        if lost and gained:
            self.add(
                f"{ptr}/type",
                "type_changed",
                f"type {shown_old} -> {shown_new}",
                old_types,
                new_types,
            )
        elif lost:
            self.add(
                f"{ptr}/type",
                "type_narrowed",
                f"type {shown_old} -> {shown_new} (no longer {_types(lost_t)})",
                old_types,
                new_types,
            )
        elif gained:
            self.add(
                f"{ptr}/type",
                "type_widened",
                f"type {shown_old} -> {shown_new} (now also {_types(gained_t)})",
                old_types,
                new_types,
            )

    def branch(self, ob: _Branch, nb: _Branch, ptr: str, depth: int) -> None:
        o, n = ob.node, nb.node
        kinds = _keywords_for(nb.type if nb.type != _ANY else ob.type)
        self.enum(o, n, ptr)
        self.bounds(o, n, ptr, kinds)
        if "object" in (ob.type, nb.type) or _ANY in (ob.type, nb.type):
            self.object(o, n, ptr, depth)
        if "array" in (ob.type, nb.type) or _ANY in (ob.type, nb.type):
            self.array(o, n, ptr, depth)
        self.all_of(o, n, ptr, depth)
        for key in sorted((set(o) | set(n)) - _HANDLED - _INERT):
            if key in _TYPED and key not in kinds:
                continue
            if _canon_or(o.get(key, _MISSING)) != _canon_or(n.get(key, _MISSING)):
                self.add(
                    f"{ptr}/{key}",
                    "keyword_changed",
                    f"{key} changed (not compared in detail)",
                    o.get(key),
                    n.get(key),
                )

    def enum(self, o: dict[str, Any], n: dict[str, Any], ptr: str) -> None:
        ov, nv = _enum_values(o), _enum_values(n)
        key = "enum" if "enum" in n or ("const" not in n and "enum" in o) else "const"
        where = f"{ptr}/{key}"
        if ov is None and nv is None:
            return
        if ov is None:
            assert nv is not None
            self.add(
                where,
                "enum_added",
                f"now limited to {_values(nv.values())}",
                None,
                list(nv.values()),
            )
            return
        if nv is None:
            self.add(
                where,
                "enum_removed",
                f"no longer limited to {_values(ov.values())}",
                list(ov.values()),
            )
            return
        removed = [ov[k] for k in ov if k not in nv]
        added = [nv[k] for k in nv if k not in ov]
        if removed:
            self.add(
                where, "enum_value_removed", f"value(s) removed: {_values(removed)}", removed, None
            )
        if added:
            self.add(where, "enum_value_added", f"value(s) added: {_values(added)}", None, added)

    def bounds(self, o: dict[str, Any], n: dict[str, Any], ptr: str, kinds: frozenset[str]) -> None:
        for key in (*_LOWER, *_UPPER):
            if key not in kinds:
                continue
            a, b = o.get(key), n.get(key)
            if a == b:
                continue
            where = f"{ptr}/{key}"
            if (a is not None and not _number(a)) or (b is not None and not _number(b)):
                self.add(where, "constraint_changed", f"{key} {_show(a)} -> {_show(b)}", a, b)
            elif a is None:
                self.add(where, "constraint_tightened", f"{key} {_show(b)} added", None, b)
            elif b is None:
                self.add(where, "constraint_loosened", f"{key} {_show(a)} removed", a, None)
            elif (b > a) == (key in _LOWER):
                verb = "raised" if b > a else "lowered"
                self.add(where, "constraint_tightened", f"{key} {verb} from {a} to {b}", a, b)
            else:
                verb = "raised" if b > a else "lowered"
                self.add(where, "constraint_loosened", f"{key} {verb} from {a} to {b}", a, b)
        if "multipleOf" in kinds:
            self.multiple_of(o.get("multipleOf"), n.get("multipleOf"), f"{ptr}/multipleOf")
        for key in ("pattern", "format"):
            if key not in kinds:
                continue
            a, b = o.get(key), n.get(key)
            if a == b:
                continue
            where = f"{ptr}/{key}"
            if a is None:
                self.add(where, "constraint_tightened", f"{key} {_show(b)} added", None, b)
            elif b is None:
                self.add(where, "constraint_loosened", f"{key} {_show(a)} removed", a, None)
            else:
                self.add(where, "constraint_changed", f"{key} {_show(a)} -> {_show(b)}", a, b)
        if "uniqueItems" in kinds:
            a, b = o.get("uniqueItems") is True, n.get("uniqueItems") is True
            if a != b:
                kind = "constraint_tightened" if b else "constraint_loosened"
                self.add(f"{ptr}/uniqueItems", kind, f"uniqueItems {a} -> {b}", a, b)

    def multiple_of(self, a: Any, b: Any, where: str) -> None:
        if a == b:
            return
        if a is None:
            self.add(where, "constraint_tightened", f"multipleOf {_show(b)} added", None, b)
        elif b is None:
            self.add(where, "constraint_loosened", f"multipleOf {_show(a)} removed", a, None)
        elif _number(a) and _number(b) and a > 0 and b > 0:
            ratio = Fraction(str(b)) / Fraction(str(a))
            if ratio.denominator == 1:
                self.add(where, "constraint_tightened", f"multipleOf {a} -> {b}", a, b)
            elif ratio.numerator == 1:
                self.add(where, "constraint_loosened", f"multipleOf {a} -> {b}", a, b)
            else:
                self.add(where, "constraint_changed", f"multipleOf {a} -> {b}", a, b)
        else:
            self.add(where, "constraint_changed", f"multipleOf {_show(a)} -> {_show(b)}", a, b)

    def object(self, o: dict[str, Any], n: dict[str, Any], ptr: str, depth: int) -> None:
        op, np_ = _mapping(o.get("properties")), _mapping(n.get("properties"))
        oreq, nreq = _names(o.get("required")), _names(n.get("required"))
        oap, nap = o.get("additionalProperties", True), n.get("additionalProperties", True)
        for name in sorted(set(op) | set(np_)):
            where = f"{ptr}/properties/{escape_pointer(name)}"
            if name in op and name in np_:
                self.node(op[name], np_[name], where, depth + 1)
            elif name in op:
                self.add_property_removed(where, name, still_accepted=nap is True or nap == {})
            elif name in nreq:
                self.add(where, "required_property_added", f"new required property {name!r}")
            else:
                self.add(where, "property_added", f"new optional property {name!r}")
        for name in sorted(nreq - oreq):
            if name in op or name not in np_:
                self.add(
                    f"{ptr}/required", "property_required", f"{name!r} is now required", None, name
                )
        for name in sorted(oreq - nreq):
            if name in np_ or name not in op:
                self.add(
                    f"{ptr}/required", "property_optional", f"{name!r} is no longer required", name
                )
        if oap is nap or _canon_or(oap) == _canon_or(nap):
            return
        where = f"{ptr}/additionalProperties"
        if nap is False:
            self.add(
                where,
                "additional_properties_closed",
                "unknown properties are now refused",
                oap,
                False,
            )
        elif oap is False:
            self.add(
                where,
                "additional_properties_opened",
                "unknown properties are now allowed",
                False,
                nap,
            )
        else:
            self.node(oap, nap, where, depth + 1)

    def add_property_removed(self, where: str, name: str, *, still_accepted: bool) -> None:
        message = f"property {name!r} removed"
        if self.side == INPUT and still_accepted:
            message += " (the schema is open, so Agents may still send it)"
            self.out.append(SchemaChange(where, "property_removed", False, message))
            return
        self.add(where, "property_removed", message)

    def array(self, o: dict[str, Any], n: dict[str, Any], ptr: str, depth: int) -> None:
        if "items" in o or "items" in n:
            self.node(o.get("items", True), n.get("items", True), f"{ptr}/items", depth + 1)
        a, b = o.get("prefixItems"), n.get("prefixItems")
        if (a is None and b is None) or (_canon(a) == _canon(b) and not _has_ref(a)):
            return
        if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
            for i, (x, y) in enumerate(zip(a, b, strict=True)):
                self.node(x, y, f"{ptr}/prefixItems/{i}", depth + 1)
        else:
            self.add(f"{ptr}/prefixItems", "keyword_changed", "prefixItems changed", a, b)

    def all_of(self, o: dict[str, Any], n: dict[str, Any], ptr: str, depth: int) -> None:
        a, b = o.get("allOf"), n.get("allOf")
        if (a is None and b is None) or (_canon(a) == _canon(b) and not _has_ref(a)):
            return
        if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
            for i, (x, y) in enumerate(zip(a, b, strict=True)):
                self.node(x, y, f"{ptr}/allOf/{i}", depth + 1)
        else:
            self.add(
                f"{ptr}/allOf", "keyword_changed", "allOf changed (not compared in detail)", a, b
            )


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


_MISSING: Any = _Missing()


def _canon_or(value: Any) -> str:
    return "\x00missing" if value is _MISSING else _canon(value)


def _word(value: Any) -> str:
    return "(none)" if value is _MISSING else _show(value)


def _lookup(root: Any, ref: str) -> tuple[bool, Any]:
    from urllib.parse import unquote

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


def _notes(node: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in node.items() if k in _ANNOTATIONS or k in ("description", "default")}


def _is_union(node: dict[str, Any]) -> bool:
    return any(
        isinstance(node.get(k), list) and not (set(node) - _INERT - {k}) for k in ("anyOf", "oneOf")
    )


def _common_notes(o: dict[str, Any], n: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Drop the notes that only one side carries, when one side is a union wrapper."""
    keys = (_ANNOTATIONS | {"description"}) - (set(o) & set(n))
    return (
        {k: v for k, v in o.items() if k not in keys},
        {k: v for k, v in n.items() if k not in keys},
    )


def _has_ref(node: Any) -> bool:
    if isinstance(node, dict):
        return "$ref" in node or any(_has_ref(v) for v in node.values())
    if isinstance(node, list):
        return any(_has_ref(v) for v in node)
    return False


def _only_type(node: dict[str, Any], t: str) -> dict[str, Any]:
    """`node` restricted to instances of type `t` (its enum filtered to that type)."""
    out = dict(node)
    out["type"] = t
    if isinstance(node.get("enum"), list):
        out["enum"] = [v for v in node["enum"] if _fits(v, t)]
    if "const" in node and not _fits(node["const"], t):
        out["enum"] = []
        del out["const"]
    return out


def _fits(value: Any, t: str) -> bool:
    actual = _json_type(value)
    return actual == t or (t == "number" and actual == "integer")


def _keywords_for(t: str) -> frozenset[str]:
    return _TYPED if t == _ANY else _BY_TYPE.get(t, frozenset())


def _enum_values(node: dict[str, Any]) -> dict[str, Any] | None:
    if isinstance(node.get("enum"), list):
        values = node["enum"]
    elif "const" in node:
        values = [node["const"]]
    else:
        return None
    return {_canon(v): v for v in values}


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _names(value: Any) -> set[str]:
    return {v for v in value if isinstance(v, str)} if isinstance(value, list) else set()


def _types(types: list[str]) -> str:
    return " | ".join(dict.fromkeys(types)) or "nothing"


def _match(
    old: list[_Branch], new: list[_Branch]
) -> tuple[list[tuple[_Branch, _Branch]], list[_Branch], list[_Branch]]:
    """Pair branches by type (then model name, then order); return pairs, lost, gained."""
    pairs: list[tuple[_Branch, _Branch]] = []
    left, right = list(old), list(new)

    def take(test: Any) -> None:
        for ob in list(left):
            for nb in right:
                if test(ob, nb):
                    pairs.append((ob, nb))
                    left.remove(ob)
                    right.remove(nb)
                    break

    take(lambda a, b: a.type == b.type and a.name is not None and a.name == b.name)
    for t in dict.fromkeys(b.type for b in left):
        mine = [b for b in left if b.type == t]
        theirs = [b for b in right if b.type == t]
        for ob, nb in zip(mine, theirs, strict=False):
            pairs.append((ob, nb))
            left.remove(ob)
            right.remove(nb)
    take(lambda a, b: {a.type, b.type} == {"integer", "number"})
    if len(left) == 1 and left[0].type == _ANY and right:
        pairs.extend((left[0], nb) for nb in right)
        left, right = [], []
    elif len(right) == 1 and right[0].type == _ANY and left:
        pairs.extend((ob, right[0]) for ob in left)
        left, right = [], []
    pairs.sort(key=lambda p: (p[1].suffix, p[0].suffix, p[1].type))
    return pairs, left, right


def compare_schemas(old: Any, new: Any, side: str, prefix: str = "") -> list[SchemaChange]:
    """Every change from schema `old` to `new` on `side` (`INPUT` or `RESULT`).

    Args:
        old: The old schema (a dict or a boolean schema); anything else compares as text.
        new: The new schema.
        side: `INPUT` (what Agents send) or `RESULT` (what they receive).
        prefix: Prepended to every pointer (e.g. `/input_schema`).

    Returns:
        The changes in a deterministic order (properties sorted by name).
    """
    walk = _Walk(old, new, side)
    walk.node(old, new, prefix)
    return walk.out
