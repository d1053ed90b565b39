"""Schemas as alternatives: one branch per JSON type, matched between OLD and NEW.

Unions (`anyOf`/`oneOf`, `type` lists, an `enum` of several JSON types) are split into one
branch per JSON type and branches are matched by type (then model name, then order),
which is how a pydantic `X | None` field compares with a plain `X`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lineup_build.diff._rules import ANY, INERT, JSON_TYPES
from lineup_build.schema_cost import MAX_NESTING
from lineup_build.schema_refs import json_type, resolve_schema

__all__ = ["Branch", "match_branches", "split"]


@dataclass
class Branch:
    """One alternative of a schema: a single JSON type (or any) and its keywords."""

    type: str
    node: dict[str, Any]
    suffix: str  # where its keywords live, relative to the node's pointer
    name: str | None  # the model it came from ($ref target or title), for matching
    ref: str | None  # the reference it was reached through, if any
    cut: bool = False  # a union nested past the validation depth, left unsplit


def split(node: Any, root: Any, suffix: str = "", depth: int = 0) -> list[Branch]:
    """The alternatives of `node`: one branch per JSON type, unions flattened."""
    node, ref = resolve_schema(node, root)
    if node is False:
        return []
    if not isinstance(node, dict):
        node = {}  # `true`
    name = ref.rsplit("/", 1)[-1] if ref else node.get("title")
    name = name if isinstance(name, str) else None
    for key in ("anyOf", "oneOf"):
        union = node.get(key)
        others = set(node) - INERT - {key}
        if isinstance(union, list) and union and not others:
            if depth >= MAX_NESTING:  # past the validation depth: compared as text only
                return [Branch(ANY, node, suffix, name, ref, cut=True)]
            out: list[Branch] = []
            for i, sub in enumerate(union):
                out.extend(split(sub, root, f"{suffix}/{key}/{i}", depth + 1))
            return out
    types = node.get("type")
    if isinstance(types, str):
        types = [types]
    if not isinstance(types, list) and isinstance(node.get("enum"), list) and node["enum"]:
        types = sorted({json_type(v) for v in node["enum"]})
    elif not isinstance(types, list) and "const" in node:
        types = [json_type(node["const"])]
    if not isinstance(types, list) or not all(t in JSON_TYPES for t in types) or not types:
        return [Branch(ANY, node, suffix, name, ref)]
    return [Branch(t, only_type(node, t), suffix, name, ref) for t in dict.fromkeys(types)]


def only_type(node: dict[str, Any], t: str) -> dict[str, Any]:
    """`node` restricted to instances of type `t` (its enum filtered to that type)."""
    out = dict(node)
    out["type"] = t
    if isinstance(node.get("enum"), list):
        out["enum"] = [v for v in node["enum"] if fits(v, t)]
    if "const" in node and not fits(node["const"], t):
        out["enum"] = []
        del out["const"]
    return out


def fits(value: Any, t: str) -> bool:
    actual = json_type(value)
    return actual == t or (t == "number" and actual == "integer")


def match_branches(
    old: list[Branch], new: list[Branch]
) -> tuple[list[tuple[Branch, Branch]], list[Branch], list[Branch]]:
    """Pair branches by type (then model name, then order); return pairs, lost, gained."""
    pairs: list[tuple[Branch, Branch]] = []
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
    if len(left) == 1 and left[0].type == ANY and right:
        pairs.extend((left[0], nb) for nb in right)
        left, right = [], []
    elif len(right) == 1 and right[0].type == ANY and left:
        pairs.extend((ob, right[0]) for ob in left)
        left, right = [], []
    pairs.sort(key=lambda p: (p[1].suffix, p[0].suffix, p[1].type))
    return pairs, left, right
