"""Properties of the schema comparison over generated schemas: it never raises, a schema
compared with itself has no changes, every change follows `RULES` for its side, and
`lineup docs` renders any of them."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from lineup_build.diff import INPUT, RESULT, RULES, compare_schemas
from lineup_build.docs import docs_markdown

_NAMES = st.sampled_from(["a", "b", "c~/d", ""])
_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 300), st.sampled_from([0.5, 2.0]), st.text(max_size=3)
)
_REFS = st.sampled_from(["#", "#/$defs/A", "#/$defs/B", "#/$defs/missing", "#/x~1y", "http://x/y"])


def _schema(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    keyword = st.one_of(
        st.tuples(
            st.just("type"),
            st.one_of(
                st.sampled_from(["string", "integer", "number", "object", "array", "null", "x"]),
                st.lists(st.sampled_from(["string", "null", "integer"]), max_size=3),
            ),
        ),
        st.tuples(st.just("properties"), st.dictionaries(_NAMES, children, max_size=3)),
        st.tuples(st.just("required"), st.lists(_NAMES, max_size=3)),
        st.tuples(st.just("additionalProperties"), st.one_of(st.booleans(), children)),
        st.tuples(st.just("items"), children),
        st.tuples(st.just("prefixItems"), st.lists(children, max_size=2)),
        st.tuples(st.sampled_from(["anyOf", "oneOf", "allOf"]), st.lists(children, max_size=3)),
        st.tuples(st.just("enum"), st.lists(_SCALARS, max_size=3)),
        st.tuples(st.just("const"), _SCALARS),
        st.tuples(
            st.sampled_from(
                ["minLength", "maxLength", "minimum", "maximum", "maxItems", "multipleOf"]
            ),
            _SCALARS,
        ),
        st.tuples(st.sampled_from(["pattern", "format", "description", "title"]), _SCALARS),
        st.tuples(st.just("$ref"), _REFS),
        st.tuples(
            st.sampled_from(["not", "default", "uniqueItems"]), st.one_of(children, _SCALARS)
        ),
    )
    return st.one_of(st.booleans(), st.lists(keyword, max_size=5).map(dict))


SCHEMAS: st.SearchStrategy[Any] = st.recursive(st.just({}), _schema, max_leaves=12)
ROOTS = st.builds(
    lambda body, a, b: {**body, "$defs": {"A": a, "B": b}} if isinstance(body, dict) else body,
    SCHEMAS,
    SCHEMAS,
    SCHEMAS,
)


@settings(max_examples=300, deadline=None)
@given(ROOTS)
def test_a_schema_equals_itself(schema: Any) -> None:
    for side in (INPUT, RESULT):
        assert compare_schemas(schema, copy.deepcopy(schema), side) == []


@settings(max_examples=300, deadline=None)
@given(ROOTS, ROOTS)
def test_every_change_follows_the_rules_of_its_side(old: Any, new: Any) -> None:
    for side, index in ((INPUT, 0), (RESULT, 1)):
        for change in compare_schemas(old, new, side, "/s"):
            assert change.kind in RULES
            assert change.pointer.startswith("/s")
            if change.kind == "property_removed" and side == INPUT:
                continue  # not breaking when the schema still accepts unknown properties
            assert change.breaking is RULES[change.kind][index], change


@settings(max_examples=150, deadline=None)
@given(ROOTS, ROOTS)
def test_docs_render_any_schema(params: Any, result: Any) -> None:
    manifest = {
        "app": {"scope": "x", "name": "X", "version": "1.0.0", "entry": "x"},
        "tools": [
            {
                "method": "x.y",
                "description": "d",
                "delivery": "miniapp_sdk",
                "activation": "app_ready",
                "long_running": False,
                "timeout_s": 30,
                "input_schema": params,
                "result_schema": result,
            }
        ],
    }
    text = docs_markdown(manifest)
    assert text.endswith("\n") and "## `x.y`" in text
    assert text == docs_markdown(copy.deepcopy(manifest))


_VALUES = st.one_of(_SCALARS, SCHEMAS, st.lists(_SCALARS, max_size=2))
TOOLS = st.lists(
    st.fixed_dictionaries(
        {"method": st.sampled_from(["x.a", "x.b"])},
        optional={
            k: _VALUES
            for k in (
                "description",
                "delivery",
                "activation",
                "long_running",
                "timeout_s",
                "handler_key",
                "hints",
                "input_schema",
                "result_schema",
                "other",
            )
        },
    ),
    max_size=3,
)
APPS = st.fixed_dictionaries(
    {"version": st.sampled_from(["1.0.0", "2.0.0-rc.1", "0.0.1"])},
    optional={"scope": _VALUES, "permissions": _VALUES, "dependencies": _VALUES},
)


@settings(max_examples=200, deadline=None)
@given(APPS, TOOLS, APPS, TOOLS)
def test_diff_never_raises_on_odd_manifests(
    old_app: Any, old_tools: Any, new_app: Any, new_tools: Any
) -> None:
    from lineup_build.diff import diff_manifests

    report = diff_manifests(
        {"app": old_app, "tools": old_tools}, {"app": new_app, "tools": new_tools}
    )
    assert isinstance(report.to_dict(), dict)
    text = docs_markdown({"app": new_app, "tools": new_tools})
    assert text.endswith("\n")
