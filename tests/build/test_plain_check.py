"""The fast path for plain tool entries: never accepts what the manifest schema refuses,
reports exactly what the schema reports, and is on for the schema that ships."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from lineup_build.manifest import manifest_schema, manifest_schema_errors
from lineup_build.manifest_checks import _plain_tools, plainly_valid, schema_problems
from lineup_build.plain_check import compile_plain
from tests.build.bundle_kit import make_manifest, runtime_tool, sdk_tool, ui_action

_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 4000),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(
        [
            "",
            "todo.add",
            "todo.add\n",
            "Todo.add",
            "runtime",
            "miniapp_sdk",
            "app_ready",
            "foreground_required",
            "x" * 4097,
            30.0,
            1.0,
        ]
    ),
    st.just({"type": "object"}),
    st.just([]),
)
_KEYS = st.sampled_from(
    [
        "method",
        "description",
        "delivery",
        "activation",
        "long_running",
        "timeout_s",
        "handler_key",
        "input_schema",
        "result_schema",
        "hints",
        "extra",
    ]
)


@st.composite
def _tool(draw: st.DrawFn) -> Any:
    base = draw(st.sampled_from([sdk_tool(), runtime_tool("todo.tick", "pomodoro.start")]))
    tool = dict(base)
    for key in draw(st.lists(_KEYS, max_size=3)):
        if draw(st.booleans()):
            tool.pop(key, None)
        else:
            tool[key] = draw(_VALUES)
    return draw(st.one_of(st.just(tool), _VALUES)) if draw(st.integers(0, 9)) == 0 else tool


_ACTION_KEYS = st.sampled_from(
    ["name", "description", "timeout_s", "input_schema", "result_schema", "activation"]
)


@st.composite
def _action(draw: st.DrawFn) -> Any:
    action = ui_action()
    for key in draw(st.lists(_ACTION_KEYS, max_size=3)):
        if draw(st.booleans()):
            action.pop(key, None)
        else:
            action[key] = draw(_VALUES)
    return draw(_VALUES) if draw(st.integers(0, 9)) == 0 else action


@settings(max_examples=300, deadline=None)
@given(tools=st.lists(_tool(), max_size=4))
def test_fast_tool_check_agrees_with_the_json_schema(tools: list[Any]) -> None:
    doc = {**make_manifest(), "tools": tools}
    fast = [p.message for p in schema_problems(doc)]
    slow = manifest_schema_errors(doc)
    assert bool(fast) == bool(slow)
    assert len(fast) == min(len(slow), 20) + (1 if len(slow) > 20 else 0)


@settings(max_examples=300, deadline=None)
@given(tool=_tool())
def test_a_plain_tool_is_valid(tool: Any) -> None:
    schema = manifest_schema()
    items = schema["properties"]["tools"]["items"]
    check = compile_plain(items, schema)
    assert check is not None
    if check(tool):
        assert Draft202012Validator({"$defs": schema["$defs"], **items}).is_valid(tool)


def test_the_fast_path_is_on_for_the_shipped_schema() -> None:
    fast = _plain_tools()
    assert fast is not None
    is_plain, _ = fast
    assert is_plain(sdk_tool()) and is_plain(runtime_tool("todo.tick", "pomodoro.start"))


@pytest.mark.parametrize(
    ("schema", "instance", "plain"),
    [
        ({"type": "integer"}, 3, True),
        ({"type": "integer"}, True, False),
        ({"type": "integer"}, 3.0, False),  # valid, but not plainly: the validator decides
        ({"type": "number", "maximum": 3}, 3.5, False),
        ({"type": ["object", "boolean"]}, False, True),
        ({"const": 1}, True, False),
        ({"enum": ["a", "b"]}, "b", True),
        ({"pattern": "^a$"}, "a\n", True),  # `re.search`, exactly as the validator
        ({"pattern": "^a$"}, 7, True),  # applies to strings only
        ({"maxLength": 2}, "abc", False),
        ({"exclusiveMinimum": 0}, 0, False),
        ({"required": ["a"], "properties": {"a": {"type": "string"}}}, {"a": 1}, False),
        ({"properties": {"a": {}}, "additionalProperties": False}, {"a": 1, "b": 2}, False),
        ({"items": {"type": "string"}, "minItems": 1}, ["x"], True),
        ({"type": "object", "minProperties": 1}, {}, False),
        ({"oneOf": [{"type": "string"}, {"maxLength": 3}]}, "ab", False),  # both match
    ],
    ids=[
        "integer",
        "bool_is_not_integer",
        "float_integer_not_plain",
        "maximum",
        "type_list",
        "const_is_typed",
        "enum",
        "pattern_search",
        "pattern_non_string",
        "max_length",
        "exclusive_minimum",
        "nested_property",
        "closed_object",
        "items",
        "min_properties",
        "one_of_exactly_one",
    ],
)
def test_keyword_meaning(schema: dict[str, Any], instance: Any, plain: bool) -> None:
    check = compile_plain(schema)
    assert check is not None
    assert check(instance) is plain
    if plain:
        assert Draft202012Validator(schema).is_valid(instance)


@pytest.mark.parametrize(
    "schema",
    [
        {"patternProperties": {"a": {}}},
        {"additionalProperties": {"type": "string"}},
        {"anyOf": [{}]},
        {"enum": [[1]]},
        {"$ref": "https://example.com/s"},
        {"$ref": "#/$defs/missing"},
        {"format": "date-time"},
    ],
    ids=[
        "pattern_properties",
        "additional_schema",
        "any_of",
        "enum_of_arrays",
        "remote",
        "missing",
        "format",
    ],
)
def test_unsupported_keywords_turn_the_fast_path_off(schema: dict[str, Any]) -> None:
    assert compile_plain(schema) is None


_TOP_KEYS = st.sampled_from(
    ["manifest_version", "app", "sdk", "tools", "files", "ui_actions", "extra"]
)
_APP_KEYS = st.sampled_from(["scope", "name", "version", "entry", "permissions", "extra"])
_FILE_VALUES = st.one_of(
    _VALUES,
    st.just({"path": "a.py", "sha256": "0" * 64, "size": 1}),
    st.just({"path": "a.py", "sha256": "0" * 64 + "\n", "size": 1}),
    st.just({"path": "a.py", "sha256": "A" * 64, "size": -1}),
    st.just({"path": "", "sha256": "0" * 64, "size": 0}),
    st.just({"path": "a.py", "sha256": "0" * 64, "size": 1.0}),
    st.just({"path": "a.py", "sha256": "0" * 64, "size": True}),
)


@st.composite
def _manifest(draw: st.DrawFn) -> Any:
    """A valid manifest with a few top-level, `app`, tool and file mutations."""
    doc: dict[str, Any] = {**make_manifest(), "tools": draw(st.lists(_tool(), max_size=3))}
    actions: list[Any] = draw(st.lists(_action(), max_size=2))
    empty: bool = draw(st.booleans())
    if actions or empty:
        doc["ui_actions"] = actions  # an empty list is not canonical: the schema refuses it
    doc["files"] = list(doc["files"]) + draw(st.lists(_FILE_VALUES, max_size=2))
    app = dict(doc["app"])
    for key in draw(st.lists(_APP_KEYS, max_size=2)):
        if draw(st.booleans()):
            app.pop(key, None)
        else:
            app[key] = draw(_VALUES)
    doc["app"] = app
    for key in draw(st.lists(_TOP_KEYS, max_size=2)):
        if draw(st.booleans()):
            doc.pop(key, None)
        else:
            doc[key] = draw(_VALUES)
    return doc


@settings(max_examples=400, deadline=None)
@given(doc=_manifest())
def test_plainly_valid_never_accepts_what_the_schema_refuses(doc: Any) -> None:
    # the verify path skips the JSON Schema validator (and its import) exactly when this
    # says True, so True must imply valid; False only sends the manifest to the validator
    if plainly_valid(doc):
        assert manifest_schema_errors(doc) == []
    assert bool(schema_problems(doc)) == bool(manifest_schema_errors(doc))


def test_plainly_valid_is_on_for_the_shipped_schema() -> None:
    assert plainly_valid(make_manifest())
    assert plainly_valid(
        {**make_manifest(), "tools": [runtime_tool("todo.tick", "pomodoro.start")]}
    )
    assert plainly_valid(make_manifest(ui_actions=[ui_action()]))
    assert not plainly_valid({**make_manifest(), "ui_actions": []})
    assert not plainly_valid(make_manifest(ui_actions=[ui_action(activation="app_ready")]))
    assert not plainly_valid({**make_manifest(), "extra": 1})
    assert not plainly_valid([make_manifest()])
