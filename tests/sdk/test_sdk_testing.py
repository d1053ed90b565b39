"""`lineup_sdk.testing`: a tool called in-process as the runtime would call it — on the todo
template's tools (validation, session data, ToolError) and on edge cases beside them."""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, Field

from lineup_build.init import init_project
from lineup_sdk import ToolContext, ToolError, define_agent_tools
from lineup_sdk.context import Snapshot
from lineup_sdk.errors import LineupError
from lineup_sdk.testing import MemorySessionData, ToolClient


def _load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def todo(tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp("sdk-testing") / "todo"
    init_project(root, template="todo")
    module = _load(root / "todo_app" / "tools.py", "todo_tools_under_sdk_testing")
    yield module.tools
    sys.modules.pop("todo_tools_under_sdk_testing", None)


def test_add_list_complete_over_session_data(todo: Any) -> None:
    client = ToolClient(todo)
    added = client.call("todo.add", {"title": "milk"}, call_id="a1")
    assert added.ok and added.code is None
    assert added.result == {"item": {"id": "a1", "title": "milk", "done": False}, "count": 1}
    assert client.call("todo.add", {"title": "eggs"}, call_id="a2").result["count"] == 2
    assert client.call("todo.complete", {"item_id": "a1"}).result["done"] is True
    listed = client.call("todo.list")
    assert [(i["id"], i["done"]) for i in listed.result["items"]] == [("a1", True), ("a2", False)]
    snap = client.session_data.get_sync()
    assert snap.revision == 3 and [i["title"] for i in snap.data["items"]] == ["milk", "eggs"]  # type: ignore[index]


def test_a_retried_call_id_is_deduplicated_by_the_handler(todo: Any) -> None:
    client = ToolClient(todo)
    first = client.call("todo.add", {"title": "milk"}, call_id="same")
    again = client.call("todo.add", {"title": "milk"}, call_id="same")
    assert first.result == again.result
    assert client.session_data.get_sync().revision == 1  # ctx.call_id reached the handler


def test_tool_error_becomes_app_code(todo: Any) -> None:
    missing = ToolClient(todo).call("todo.complete", {"item_id": "nope"})
    assert not missing.ok and missing.code == "app.not_found"
    assert missing.error is not None and "nope" in missing.error["message"]


@pytest.mark.parametrize(
    ("params", "path"),
    [
        ({"title": "milk", "colour": "red"}, ""),
        ({"title": ""}, "/title"),
        ({"title": 2}, "/title"),
        ({}, ""),
        ([], ""),
    ],
    ids=["unknown-key", "too-short", "wrong-type", "missing", "not-an-object"],
)
def test_params_are_checked_against_the_input_schema(todo: Any, params: Any, path: str) -> None:
    client = ToolClient(todo)
    res = client.call("todo.add", params)
    assert res.code == "invalid_params"
    assert res.error is not None and res.error["details"][0]["path"] == path
    assert client.session_data.get_sync() == Snapshot(None, 0)  # the handler never ran


def test_seeded_session_data_and_subscribers(todo: Any) -> None:
    data = MemorySessionData({"items": [{"id": "x", "title": "old", "done": False}]})
    frames: list[tuple[str, int]] = []
    data.subscribe(lambda kind, snap: frames.append((kind, snap.revision)))
    client = ToolClient(todo, session_data=data)
    assert [i["id"] for i in client.call("todo.list").result["items"]] == ["x"]
    client.call("todo.complete", {"item_id": "x"})
    assert frames == [("session_data.snapshot", 1), ("session_data.changed", 2)]


def test_memory_session_data_rules() -> None:
    data = MemorySessionData()
    assert data.get_sync() == Snapshot(None, 0)
    snap = data.replace_sync({"a": 1}, expected_revision=0)
    assert snap == Snapshot({"a": 1}, 1)
    snap.data["a"] = 99  # type: ignore[index]  # a copy: the stored data is untouched
    assert data.get_sync().data == {"a": 1}
    cases: list[tuple[Any, Any, str]] = [
        ({"a": 2}, 0, "session_data_revision_conflict"),
        (["not", "an", "object"], 1, "session_data_invalid"),
        ({"a": 2}, "1", "session_data_invalid"),
        ({"a": float("nan")}, 1, "session_data_invalid"),
        ({"a": "x" * (1024 * 1024)}, 1, "session_data_too_large"),
    ]
    for value, revision, code in cases:
        with pytest.raises(LineupError) as exc:
            data.replace_sync(value, expected_revision=revision)
        assert exc.value.code == code
    assert data.get_sync().revision == 1


tools = define_agent_tools(app_scope="demo")


class Total(BaseModel):
    total: int


@tools.tool("demo.add", activation="app_ready")
def add(ctx: ToolContext, a: int, b: int = 0) -> Total:
    """Add two numbers (a sync handler: it runs in a thread).

    Args:
        a: The first.
        b: The second.
    """
    return Total(total=a + b)


@tools.tool("demo.lie", activation="app_ready")
async def lie(ctx: ToolContext) -> Annotated[int, Field(ge=0)]:
    """Return something its result schema refuses."""
    return -1


@tools.tool("demo.clash", activation="app_ready")
async def clash(ctx: ToolContext) -> int:
    """Replace with a stale revision and let the conflict escape."""
    await ctx.session_data.replace({"n": 1}, expected_revision=7)
    return 1


@tools.tool("demo.shout", activation="app_ready")
async def shout(ctx: ToolContext) -> None:
    """Raise a ToolError whose code is not snake_case."""
    raise ToolError("Not-Snake", "loud")


@tools.tool("demo.boom", activation="app_ready")
async def boom(ctx: ToolContext) -> None:
    """Fail with an ordinary exception."""
    raise RuntimeError("secret detail")


tools.runtime_tool("demo.focus", handler_key="pomodoro.start", activation="foreground_required")


def test_a_string_is_not_an_integer() -> None:
    client = ToolClient(tools)
    assert client.call("demo.add", {"a": 2, "b": 3}).result == {"total": 5}
    assert client.call("demo.add", {"a": "2"}).code == "invalid_params"
    assert client.call("demo.add", {"a": True}).code == "invalid_params"
    assert client.call("demo.add", {"a": 2.5}).code == "invalid_params"


def test_the_spec_is_what_the_build_derives() -> None:
    spec = ToolClient(tools).spec("demo.add")
    assert spec["input_schema"]["additionalProperties"] is False
    assert spec["input_schema"]["properties"]["a"]["description"] == "The first."
    assert spec["description"].startswith("Add two numbers")


@pytest.mark.parametrize(
    ("method", "code"),
    [
        ("demo.lie", "handler_result_invalid"),
        ("demo.clash", "session_data_revision_conflict"),
        ("demo.shout", "handler_failed"),
        ("demo.boom", "handler_failed"),
    ],
)
def test_failures_map_to_the_runtime_codes(method: str, code: str) -> None:
    res = ToolClient(tools).call(method)
    assert res.code == code
    assert res.error is not None and "secret detail" not in res.error["message"]


@pytest.mark.parametrize(
    ("method", "code"), [("demo.nope", "unknown_method"), ("demo.focus", "usage_invalid")]
)
def test_what_cannot_be_called_in_process(method: str, code: str) -> None:
    with pytest.raises(LineupError) as exc:
        ToolClient(tools).call(method)
    assert exc.value.code == code


def test_acall_inside_an_event_loop(todo: Any) -> None:
    client = ToolClient(todo)

    async def agent() -> Any:
        return await client.acall("todo.add", {"title": "milk"})

    res = asyncio.run(agent())
    assert res.ok and res.result["count"] == 1
