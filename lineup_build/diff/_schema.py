"""Compare two JSON Schemas of one tool as an Agent written against OLD meets NEW.

Pure functions over data. Local `$ref`s are followed (siblings of a `$ref` merge over its
target); a pair of references already being or having been compared is not expanded
again, so recursive models end and shared models are reported once, where they are first
met. Each node is split into per-type branches (`_branches`), matched branches are
compared keyword by keyword (`_keywords`) and property by property.

Every difference becomes a `SchemaChange` whose kind names the rule; whether it breaks
depends on the side (SPEC 11): an input schema is what Agents send (NEW must accept what
OLD accepted), a result schema is what they receive (NEW must not promise less or return
more).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lineup_build.diff._branches import Branch, match_branches, split
from lineup_build.diff._keywords import bound_changes, canon, enum_changes, show
from lineup_build.diff._rules import (
    ANNOTATIONS,
    ANY,
    HANDLED,
    INERT,
    INPUT,
    RULES,
    TYPED,
    keywords_for,
)
from lineup_build.schema_cost import MAX_NESTING
from lineup_build.schema_refs import escape_pointer, has_ref, resolve_schema

__all__ = ["SchemaChange", "compare_schemas"]

_MAX_DEPTH = 100  # nested schemas; each level costs a few Python frames

_MAX_NODES = 200_000


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

    # --- comparison ----------------------------------------------------------------------

    def node(self, old: Any, new: Any, ptr: str, depth: int = 0) -> None:
        """Compare two schemas at `ptr` (annotations of the node, then its branches)."""
        self.nodes += 1
        if canon(old) == canon(new) and not has_ref(old):
            return  # equal text without references is equal meaning
        if depth > _MAX_DEPTH or self.nodes > _MAX_NODES:
            self.add(
                ptr,
                "schema_not_compared",
                "schema too deep or too large to compare; it differs (counted as breaking)",
            )
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
        key = (oref, nref, canon(_notes(o)), canon(_notes(n)))
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
        for key in sorted(ANNOTATIONS):
            if _canon_or(o.get(key, _MISSING)) != _canon_or(n.get(key, _MISSING)):
                self.add(
                    f"{ptr}/{key}", "annotation_changed", f"{key} changed", o.get(key), n.get(key)
                )

    def union(self, old: Any, new: Any, ptr: str, depth: int) -> None:
        obs, nbs = split(old, self.roots[0]), split(new, self.roots[1])
        pairs, lost, gained = match_branches(obs, nbs)
        for ob, nb in pairs:
            where = ptr + (nb.suffix or ob.suffix)
            if (ob.cut or nb.cut) and (canon(ob.node) != canon(nb.node) or has_ref(ob.node)):
                self.add(
                    where,
                    "schema_not_compared",
                    f"unions nested past {MAX_NESTING} levels could not be compared; they "
                    "differ (counted as breaking)",
                )
                continue
            if ob.type != nb.type:
                if nb.type == ANY or (ob.type, nb.type) == ("integer", "number"):
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

    def branch(self, ob: Branch, nb: Branch, ptr: str, depth: int) -> None:
        o, n = ob.node, nb.node
        kinds = keywords_for(nb.type if nb.type != ANY else ob.type)
        for found in (*enum_changes(o, n, ptr), *bound_changes(o, n, ptr, kinds)):
            self.add(*found)
        if "object" in (ob.type, nb.type) or ANY in (ob.type, nb.type):
            self.object(o, n, ptr, depth)
        if "array" in (ob.type, nb.type) or ANY in (ob.type, nb.type):
            self.array(o, n, ptr, depth)
        self.all_of(o, n, ptr, depth)
        for key in sorted((set(o) | set(n)) - HANDLED - INERT):
            if key in TYPED and key not in kinds:
                continue
            if _canon_or(o.get(key, _MISSING)) != _canon_or(n.get(key, _MISSING)):
                self.add(
                    f"{ptr}/{key}",
                    "keyword_changed",
                    f"{key} changed (not compared in detail)",
                    o.get(key),
                    n.get(key),
                )

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
        if (a is None and b is None) or (canon(a) == canon(b) and not has_ref(a)):
            return
        if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
            for i, (x, y) in enumerate(zip(a, b, strict=True)):
                self.node(x, y, f"{ptr}/prefixItems/{i}", depth + 1)
        else:
            self.add(f"{ptr}/prefixItems", "keyword_changed", "prefixItems changed", a, b)

    def all_of(self, o: dict[str, Any], n: dict[str, Any], ptr: str, depth: int) -> None:
        a, b = o.get("allOf"), n.get("allOf")
        if (a is None and b is None) or (canon(a) == canon(b) and not has_ref(a)):
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
    return "\x00missing" if value is _MISSING else canon(value)


def _word(value: Any) -> str:
    return "(none)" if value is _MISSING else show(value)


def _notes(node: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in node.items() if k in ANNOTATIONS or k in ("description", "default")}


def _is_union(node: dict[str, Any]) -> bool:
    return any(
        isinstance(node.get(k), list) and not (set(node) - INERT - {k}) for k in ("anyOf", "oneOf")
    )


def _common_notes(o: dict[str, Any], n: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Drop the notes that only one side carries, when one side is a union wrapper."""
    keys = (ANNOTATIONS | {"description"}) - (set(o) & set(n))
    return (
        {k: v for k, v in o.items() if k not in keys},
        {k: v for k, v in n.items() if k not in keys},
    )


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _names(value: Any) -> set[str]:
    return {v for v in value if isinstance(v, str)} if isinstance(value, list) else set()


def _types(types: list[str]) -> str:
    return " | ".join(dict.fromkeys(types)) or "nothing"


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
