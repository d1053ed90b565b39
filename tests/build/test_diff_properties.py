"""Properties of the schema comparison over generated schemas: it never raises, a schema
compared with itself has no changes, every change follows `RULES` for its side, and
`lineup docs` renders any of them; and over generated schema-valid manifests, the diff and
the docs of the typed `Manifest`."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from lineup_build.diff import INPUT, RESULT, RULES, compare_schemas
from lineup_build.docs import docs_markdown
from lineup_build.model import Manifest

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


def _manifest(app: dict[str, Any], tools: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "manifest_version": 1,
        "app": app,
        "sdk": {"version": "0.2.0"},
        "tools": tools,
        "files": [],
    }


@settings(max_examples=150, deadline=None)
@given(ROOTS, ROOTS)
def test_docs_render_any_schema(params: Any, result: Any) -> None:
    manifest = _manifest(
        {"scope": "x", "name": "X", "version": "1.0.0", "entry": "x"},
        [
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
    )
    text = docs_markdown(Manifest.from_json(manifest))
    assert text.endswith("\n") and "## `x.y`" in text
    assert text == docs_markdown(Manifest.from_json(copy.deepcopy(manifest)))


_COMMON = {
    "description": st.text(max_size=8),
    "activation": st.sampled_from(["app_ready", "foreground_required", "activation_not_required"]),
    "input_schema": ROOTS.filter(lambda s: isinstance(s, dict)),
    "result_schema": ROOTS,
}
_HINTS = st.dictionaries(
    st.sampled_from(["read_only", "destructive", "idempotent", "open_world"]),
    st.booleans(),
    min_size=1,
)
SDK_TOOLS = st.fixed_dictionaries(
    {
        **_COMMON,
        "delivery": st.just("miniapp_sdk"),
        "long_running": st.just(False),
        "timeout_s": st.sampled_from([0.5, 1, 30, 30.0, 3600]),
    },
    optional={"hints": _HINTS},
)
RUNTIME_TOOLS = st.fixed_dictionaries(
    {
        **_COMMON,
        "delivery": st.just("runtime"),
        "long_running": st.booleans(),
        "handler_key": st.sampled_from(["pomodoro.start", "pomodoro.stop"]),
    },
    optional={"hints": _HINTS},
)
TOOLS = st.lists(
    st.tuples(st.sampled_from(["x.a", "x.b", "x.c"]), st.one_of(SDK_TOOLS, RUNTIME_TOOLS)),
    max_size=3,
    unique_by=lambda pair: pair[0],
).map(lambda pairs: sorted(({"method": m, **t} for m, t in pairs), key=lambda t: t["method"]))
APPS = st.fixed_dictionaries(
    {
        "scope": st.sampled_from(["x", "y"]),
        "name": st.just("X"),
        "version": st.sampled_from(["1.0.0", "2.0.0-rc.1", "0.0.1"]),
        "entry": st.just("x_app.tools"),
    },
    optional={
        "dependencies": st.lists(st.sampled_from(["a>=1", "b", "c==2"]), min_size=1, unique=True),
        "permissions": st.just({"network": True}),
    },
)
#: Every kind `diff_manifests` can report: the schema rules and the tool and app rules.
KINDS = set(RULES) | {
    "tool_removed",
    "tool_added",
    "delivery_changed",
    "handler_key_changed",
    "long_running_changed",
    "activation_changed",
    "timeout_lowered",
    "timeout_raised",
    "hint_changed",
    "app_scope_changed",
    "permission_added",
    "permission_removed",
    "dependency_added",
    "dependency_removed",
    "surface_csp_changed",
}


@settings(max_examples=200, deadline=None)
@given(APPS, TOOLS, APPS, TOOLS)
def test_diff_and_docs_take_any_schema_valid_manifests(
    old_app: Any, old_tools: Any, new_app: Any, new_tools: Any
) -> None:
    """Over every manifest the schema admits (what `lineup_build.sources` hands on), the
    diff never raises and reports only known kinds, a manifest compared with itself has
    no changes, and the docs render deterministically."""
    from lineup_build.diff import diff_manifests
    from lineup_build.manifest_checks import schema_problems

    docs = [_manifest(old_app, old_tools), _manifest(new_app, new_tools)]
    assert [schema_problems(d) for d in docs] == [[], []]  # the strategies stay honest
    old, new = (Manifest.from_json(d) for d in docs)
    report = diff_manifests(old, new)
    assert {c.kind for c in report.changes} <= KINDS
    assert isinstance(report.to_dict(), dict)
    assert diff_manifests(new, new).changes == []
    text = docs_markdown(new)
    assert text.endswith("\n") and text == docs_markdown(Manifest.from_json(copy.deepcopy(docs[1])))
