"""Schema extraction: what the build stores for a handler's input, result and description.

Handlers are declared in a module executed from a real file, then run through the same
extractor the build's import subprocess uses (`lineup_sdk._extract._Extractor`).
"""

from __future__ import annotations

import datetime as dt
import itertools
import sys
import textwrap
import types
from decimal import Decimal
from enum import Enum
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import GenerateJsonSchema

from lineup_sdk._extract import _Extractor
from lineup_sdk._schema import (
    _ClosedSchema,
    analyze_handler,
    closed_model_schema,
    doc_args,
    doc_summary,
    result_schema_of,
)

_names = itertools.count()

HEADER = """\
from __future__ import annotations

import datetime as dt
from enum import Enum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from lineup_sdk import ToolContext, define_agent_tools

tools = define_agent_tools(app_scope="demo")


class Priority(str, Enum):
    low = "low"
    high = "high"


class Owner(BaseModel):
    name: str = Field(description="Who owns it.")


class Task(BaseModel):
    \"\"\"A task.\"\"\"

    title: str = Field(min_length=1, description="What to do.")
    owner: Owner
    priority: Priority = Priority.low
    tags: list[str] = []
"""


def extract(tmp_path: Path, body: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Declare one tool in a fresh module and extract it as the build would."""
    path = tmp_path / f"schema_{next(_names)}.py"
    path.write_text(HEADER + textwrap.dedent(body))
    module = types.ModuleType(f"lineup_test_{path.stem}")
    module.__file__ = str(path)
    # a real module, as in the build: pydantic resolves string annotations through it
    sys.modules[module.__name__] = module
    try:
        exec(compile(path.read_text(), str(path), "exec", dont_inherit=True), module.__dict__)
        registry = module.tools
        (decl,) = registry.declarations()
        extractor = _Extractor(tmp_path)
        spec = extractor.tool(registry, decl)
    finally:
        del sys.modules[module.__name__]
    assert spec is not None, extractor.problems
    return spec, extractor.problems


def test_keyword_parameters_with_field_constraints(tmp_path: Path) -> None:
    spec, problems = extract(
        tmp_path,
        """
        @tools.tool("demo.add", activation="app_ready")
        async def add(
            ctx: ToolContext,
            title: str = Field(min_length=1, max_length=200, description="What to do."),
            count: int = Field(default=1, ge=1, le=10),
        ) -> int:
            \"\"\"Add an item.\"\"\"
            return count
        """,
    )
    assert problems == []
    assert spec["input_schema"] == {
        "additionalProperties": False,
        "properties": {
            "title": {
                "description": "What to do.",
                "maxLength": 200,
                "minLength": 1,
                "title": "Title",
                "type": "string",
            },
            "count": {
                "default": 1,
                "maximum": 10,
                "minimum": 1,
                "title": "Count",
                "type": "integer",
            },
        },
        "required": ["title"],
        "title": "DemoAddParams",
        "type": "object",
    }
    assert spec["result_schema"] == {"type": "integer"}
    assert spec["description"] == "Add an item."


def test_annotated_optional_and_defaults(tmp_path: Path) -> None:
    spec, _ = extract(
        tmp_path,
        """
        @tools.tool("demo.add", activation="app_ready")
        def add(
            ctx: ToolContext,
            title: Annotated[str, Field(max_length=5, description="Short title.")],
            note: str | None = None,
            size: Annotated[int, Field(gt=0)] = 3,
            mode: Literal["a", "b"] = "a",
        ) -> None:
            \"\"\"Add.\"\"\"
        """,
    )
    props = spec["input_schema"]["properties"]
    assert props["title"] == {
        "description": "Short title.",
        "maxLength": 5,
        "title": "Title",
        "type": "string",
    }
    assert props["note"] == {
        "anyOf": [{"type": "string"}, {"type": "null"}],
        "default": None,
        "title": "Note",
    }
    assert props["size"] == {
        "default": 3,
        "exclusiveMinimum": 0,
        "title": "Size",
        "type": "integer",
    }
    assert props["mode"] == {"default": "a", "enum": ["a", "b"], "title": "Mode", "type": "string"}
    assert spec["input_schema"]["required"] == ["title"]
    assert spec["result_schema"] == {"type": "null"}


def test_model_parameter_with_nested_models_enums_and_lists(tmp_path: Path) -> None:
    spec, _ = extract(
        tmp_path,
        """
        @tools.tool("demo.add", activation="app_ready")
        def add(ctx: ToolContext, params: Task) -> Task:
            \"\"\"Add a task.\"\"\"
            return params
        """,
    )
    schema = spec["input_schema"]
    assert schema == {
        "$defs": {
            "Owner": {
                "additionalProperties": False,
                "properties": {
                    "name": {"description": "Who owns it.", "title": "Name", "type": "string"}
                },
                "required": ["name"],
                "title": "Owner",
                "type": "object",
            },
            "Priority": {"enum": ["low", "high"], "title": "Priority", "type": "string"},
        },
        "additionalProperties": False,
        "description": "A task.",
        "properties": {
            "title": {
                "description": "What to do.",
                "minLength": 1,
                "title": "Title",
                "type": "string",
            },
            "owner": {"$ref": "#/$defs/Owner"},
            "priority": {"$ref": "#/$defs/Priority", "default": "low"},
            "tags": {"default": [], "items": {"type": "string"}, "title": "Tags", "type": "array"},
        },
        "required": ["title", "owner"],
        "title": "Task",
        "type": "object",
    }
    # the result schema is the same model, in serialization mode, also closed
    assert spec["result_schema"]["additionalProperties"] is False
    assert spec["result_schema"]["$defs"]["Owner"]["additionalProperties"] is False


def test_every_ref_is_local_and_resolves(tmp_path: Path) -> None:
    spec, _ = extract(
        tmp_path,
        """
        @tools.tool("demo.add", activation="app_ready")
        def add(ctx: ToolContext, tasks: list[Task], lead: Owner | None = None) -> list[Task]:
            \"\"\"Add tasks.\"\"\"
            return tasks
        """,
    )
    for schema in (spec["input_schema"], spec["result_schema"]):
        refs = list(_refs(schema))
        assert refs and all(r.startswith("#/$defs/") for r in refs)
        assert {r.removeprefix("#/$defs/") for r in refs} <= set(schema["$defs"])
    assert spec["input_schema"]["properties"]["tasks"] == {
        "items": {"$ref": "#/$defs/Task"},
        "title": "Tasks",
        "type": "array",
    }


def _refs(node: Any) -> Any:
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "$ref":
                yield v
            else:
                yield from _refs(v)
    elif isinstance(node, list):
        for v in node:
            yield from _refs(v)


@pytest.mark.parametrize(
    ("annotation", "expected"),
    [
        ("int", {"type": "integer"}),
        ("str", {"type": "string"}),
        ("bool", {"type": "boolean"}),
        ("None", {"type": "null"}),
        ("list[int]", {"items": {"type": "integer"}, "type": "array"}),
        ("dict[str, int]", {"additionalProperties": {"type": "integer"}, "type": "object"}),
        ("Priority", {"enum": ["low", "high"], "title": "Priority", "type": "string"}),
        (
            "Owner",
            {
                "additionalProperties": False,
                "properties": {
                    "name": {"description": "Who owns it.", "title": "Name", "type": "string"}
                },
                "required": ["name"],
                "title": "Owner",
                "type": "object",
            },
        ),
    ],
    ids=["int", "str", "bool", "none", "list", "dict", "enum", "model"],
)
def test_result_schema_from_the_return_annotation(
    annotation: str, expected: dict[str, Any], tmp_path: Path
) -> None:
    spec, _ = extract(
        tmp_path,
        f"""
        @tools.tool("demo.get", activation="app_ready")
        def get(ctx: ToolContext) -> {annotation}:
            \"\"\"Get.\"\"\"
        """,
    )
    assert spec["result_schema"] == expected
    assert spec["input_schema"]["properties"] == {}
    assert spec["input_schema"]["additionalProperties"] is False


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_sync_and_async_handlers_extract_the_same(is_async: bool, tmp_path: Path) -> None:
    prefix = "async " if is_async else ""
    spec, problems = extract(
        tmp_path,
        f"""
        @tools.tool("demo.add", activation="app_ready")
        {prefix}def add(ctx: ToolContext, x: int) -> int:
            \"\"\"Add.\"\"\"
            return x
        """,
    )
    assert problems == []
    assert spec["input_schema"]["properties"] == {"x": {"title": "X", "type": "integer"}}
    assert spec["result_schema"] == {"type": "integer"}


class Params(BaseModel):
    x: int


def test_analyze_handler_forms() -> None:
    async def by_model(ctx: Any, params: Params) -> int:
        return params.x

    def by_kwargs(ctx: Any, x: int, y: str = "a") -> None:
        return None

    def by_dict(ctx: Any, params: dict[str, Any]) -> dict[str, Any]:
        return params

    def no_return(ctx: Any, x: int):  # type: ignore[no-untyped-def]
        return x

    model = analyze_handler(by_model, model_name="M")
    assert (model.form, model.model, model.is_async, model.returns) == ("model", Params, True, int)
    kwargs = analyze_handler(by_kwargs, model_name="KwParams")
    assert (kwargs.form, kwargs.field_names, kwargs.is_async) == ("kwargs", ("x", "y"), False)
    assert kwargs.model is not None and kwargs.model.__name__ == "KwParams"
    assert kwargs.model.model_config.get("extra") == "forbid"
    assert kwargs.has_return and kwargs.returns is type(None)
    assert analyze_handler(by_dict, model_name="D").form == "dict"
    assert analyze_handler(no_return, model_name="N").has_return is False


# --- descriptions --------------------------------------------------------------------------


def test_docstring_first_paragraph_and_args_section(tmp_path: Path) -> None:
    spec, _ = extract(
        tmp_path,
        """
        @tools.tool("demo.add", activation="app_ready")
        def add(
            ctx: ToolContext,
            title: str,
            count: Annotated[int, Field(description="From Field.")] = 1,
            note: str = "",
        ) -> None:
            \"\"\"Add one item
            to the list.

            Longer explanation that the Agent does not need.

            Args:
                ctx: The call context.
                title: What to do,
                    in the user's words.
                count (int): Overridden by Field.
                note: A note.

            Returns:
                Nothing.
            \"\"\"
        """,
    )
    assert spec["description"] == "Add one item to the list."
    props = spec["input_schema"]["properties"]
    assert props["title"]["description"] == "What to do, in the user's words."
    assert props["count"]["description"] == "From Field."  # Field(description=) wins
    assert props["note"]["description"] == "A note."
    assert "ctx" not in props


def test_explicit_description_overrides_the_docstring(tmp_path: Path) -> None:
    spec, _ = extract(
        tmp_path,
        """
        @tools.tool("demo.add", activation="app_ready", description="Explicit.")
        def add(ctx: ToolContext) -> None:
            \"\"\"From the docstring.\"\"\"
        """,
    )
    assert spec["description"] == "Explicit."


def test_no_docstring_means_an_empty_description(tmp_path: Path) -> None:
    spec, _ = extract(
        tmp_path,
        """
        @tools.tool("demo.add", activation="app_ready")
        def add(ctx: ToolContext, x: int) -> None:
            pass
        """,
    )
    assert spec["description"] == ""
    assert "description" not in spec["input_schema"]["properties"]["x"]


def test_doc_helpers() -> None:
    def fn() -> None:
        """Summary line.

        Args:
            a: First.
            *args: Rest.
            b: Second
                continued.
        Raises:
            ValueError: never.
        """

    assert doc_summary(fn) == "Summary line."
    assert doc_args(fn) == {"a": "First.", "args": "Rest.", "b": "Second continued."}
    assert doc_summary(lambda: None) is None


# --- closed schemas ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "expected"),
    [(None, False), ("ignore", False), ("forbid", False), ("allow", True)],
    ids=["default", "ignore", "forbid", "allow"],
)
def test_models_are_closed_unless_they_allow_extra(extra: str | None, expected: bool) -> None:
    config = ConfigDict() if extra is None else ConfigDict(extra=extra)  # type: ignore[typeddict-item]

    class Inner(BaseModel):
        model_config = config
        a: int

    class Outer(BaseModel):
        model_config = config
        inner: Inner

    schema = closed_model_schema(Outer)
    assert schema["additionalProperties"] is expected
    assert schema["$defs"]["Inner"]["additionalProperties"] is expected
    assert result_schema_of(Outer)["additionalProperties"] is expected


# --- the encode_default fast path changes nothing ------------------------------------------------


class _Colour(Enum):
    red = "red"


class _Point(BaseModel):
    x: int = 0


class _StockDefaults(_ClosedSchema):
    """`_ClosedSchema` with pydantic's own `encode_default` (the reference)."""

    encode_default = GenerateJsonSchema.encode_default


@pytest.mark.parametrize(
    ("annotation", "default", "config"),
    [
        (int, 3, None),
        (float, 1.5, None),
        (float, float("inf"), None),
        (str, "s", None),
        (bool, True, None),
        (int | None, None, None),
        (_Colour, _Colour.red, None),
        (list[int], [1, 2], None),
        (tuple[str, ...], ("a",), None),
        (dict[str, int], {"k": 1}, None),
        (dt.date, dt.date(2024, 1, 2), None),
        (dt.timedelta, dt.timedelta(seconds=90), ConfigDict(ser_json_timedelta="float")),
        (Decimal, Decimal("1.5"), None),
        (_Point, _Point(x=2), None),
        (bytes, b"\xff", ConfigDict(ser_json_bytes="base64")),
        (_Colour, _Colour.red, ConfigDict(use_enum_values=True, extra="forbid")),
    ],
    ids=lambda v: type(v).__name__ if not isinstance(v, type) else v.__name__,
)
def test_default_encoding_matches_pydantic(annotation: Any, default: Any, config: Any) -> None:
    from pydantic import create_model

    model = create_model(
        "Defaults",
        __config__=config,
        value=(annotation, Field(default=default)),
    )
    ours = model.model_json_schema(schema_generator=_ClosedSchema)
    stock = model.model_json_schema(schema_generator=_StockDefaults)
    assert ours == stock
