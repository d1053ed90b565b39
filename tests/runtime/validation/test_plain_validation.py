"""The quick test for plain schemas (`validation._plain_check`): it may only ever say
"valid" when jsonschema agrees; anything it does not accept goes to jsonschema."""

from __future__ import annotations

from typing import Any

import jsonschema
from hypothesis import given, settings
from hypothesis import strategies as st

from lineup_runtime_lite.internals import plain_check
from lineup_runtime_lite.validation.checks import validator_for

SCALARS = ["string", "integer", "number", "boolean", "null"]

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**60), 2**60)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("abcd"), inner),
    max_leaves=8,
)


def plain_schemas() -> st.SearchStrategy[Any]:
    scalar = st.sampled_from(SCALARS).map(lambda t: {"type": t, "title": "x"})
    return st.recursive(
        scalar | st.just(True),
        lambda inner: st.builds(
            lambda props, required, extra: {
                "type": "object",
                "properties": props,
                "required": sorted(set(required) & set(props)),
                "additionalProperties": extra,
            },
            st.dictionaries(st.sampled_from("abcd"), inner, max_size=3),
            st.lists(st.sampled_from("abcd"), max_size=3),
            st.booleans(),
        ),
        max_leaves=5,
    )


@settings(max_examples=400)
@given(plain_schemas(), json_values)
def test_the_quick_test_never_accepts_what_jsonschema_rejects(schema: Any, value: Any) -> None:
    accepts = plain_check(schema)
    assert accepts is not None  # every generated schema is plain
    if accepts(value):
        assert jsonschema.Draft202012Validator(schema).is_valid(value), (schema, value)
    # and the runtime's answer is jsonschema's either way
    expected = jsonschema.Draft202012Validator(schema).is_valid(value)
    assert (validator_for(schema).problems(value) == []) == expected


def test_a_pydantic_style_input_schema_is_plain() -> None:
    schema = {
        "properties": {"n": {"title": "N", "type": "integer"}, "s": {"type": "string"}},
        "required": ["n"],
        "title": "PingInput",
        "type": "object",
        "additionalProperties": False,
    }
    accepts = plain_check(schema)
    assert accepts is not None
    assert accepts({"n": 1}) and accepts({"n": 1, "s": "x"})
    assert not accepts({"n": "1"}) and not accepts({}) and not accepts({"n": 1, "z": 0})
    assert not accepts({"n": True})  # a boolean is not an integer


def test_constraining_keywords_are_left_to_jsonschema() -> None:
    for schema in (
        {"type": "string", "pattern": "^a$"},
        {"type": "string", "format": "email"},
        {"type": "integer", "minimum": 3},
        {"type": ["string", "null"]},
        {"enum": [1, 2]},
        {"type": "object", "properties": {"a": {"type": "string", "maxLength": 2}}},
        {"type": "array", "items": {"type": "string"}},
        {"$ref": "#/$defs/x", "$defs": {"x": {"type": "string"}}},
        {"anyOf": [{"type": "string"}]},
        {"type": "object", "additionalProperties": {"type": "string"}},
    ):
        assert plain_check(schema) is None, schema
    # and they still reject: the pattern is checked by jsonschema, not skipped
    assert validator_for({"type": "string", "pattern": "^a$"}).problems("b") != []
