"""`lineup_sdk.testing`: a tool called, and a UI Action run, in-process as the runtime would
deliver them — on the todo template's tools (validation, session data, ToolError), on the
board test app's actions, and on edge cases beside them; every delivery atomic (SPEC 17:
a handler's writes applied only when it returns, one revision and one frame)."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, Field
from typing_extensions import TypedDict

from lineup_build.init import init_project
from lineup_sdk import (
    ActionContext,
    ToolContext,
    ToolError,
    define_agent_tools,
    define_ui_actions,
)
from lineup_sdk.context import Snapshot
from lineup_sdk.errors import LineupError
from lineup_sdk.testing import MemorySessionData, ToolClient
from tests.app_kit import forget_app_modules, load_app_module


@pytest.fixture(scope="module")
def todo(tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp("sdk-testing") / "todo"
    init_project(root, template="todo")
    # a name per run: an app registry is one per module name, and mutmut runs the suite
    # twice in one process
    name = "todo_under_sdk_testing_" + root.parent.name.replace("-", "_")
    module = load_app_module(root / "todo_app", name)
    try:
        yield module.tools
    finally:
        forget_app_modules(name)


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


# -- atomic deliveries (SPEC 17) ------------------------------------------------------------

seen: dict[str, Any] = {}


@tools.tool("demo.twice", activation="app_ready")
async def twice(ctx: ToolContext, fail: str = "no") -> Annotated[int, Field(ge=0)]:
    """Write twice, reading its own first write; then maybe fail.

    Args:
        fail: `no`, `refuse` (a ToolError), `raise` (an exception) or `lie` (a bad result).
    """
    base = await ctx.session_data.get()
    n = (base.data or {}).get("n", 0)
    first = await ctx.session_data.replace({"n": n + 1}, expected_revision=base.revision)
    mine = await ctx.session_data.get()
    second = await ctx.session_data.replace({"n": n + 2}, expected_revision=first.revision)
    seen.update(base=base.revision, first=first, mine=mine, second=second)
    if fail == "refuse":
        raise ToolError("refused", "no")
    if fail == "raise":
        raise RuntimeError("boom")
    if fail == "lie":
        return -1
    return int(n) + 2


@tools.tool("demo.stale", activation="app_ready")
async def stale(ctx: ToolContext) -> int:
    """Write, then write again against the committed (no longer pending) revision."""
    base = await ctx.session_data.get()
    await ctx.session_data.replace({"n": 1}, expected_revision=base.revision)
    await ctx.session_data.replace({"n": 2}, expected_revision=base.revision)
    return 2


@tools.tool("demo.read", activation="app_ready")
def read(ctx: ToolContext) -> int:
    """Read only (a sync handler)."""
    return int((ctx.session_data.get_sync().data or {}).get("n", 0))


def _framed(client: ToolClient) -> list[tuple[str, int, Any]]:
    frames: list[tuple[str, int, Any]] = []
    client.session_data.subscribe(
        lambda kind, snap: frames.append((kind, snap.revision, snap.data))
    )
    return frames


def test_a_handler_writing_twice_commits_one_revision_and_one_frame() -> None:
    client = ToolClient(tools, session_data=MemorySessionData({"n": 10}))
    frames = _framed(client)
    res = client.call("demo.twice")
    assert res.ok and res.result == 12
    assert seen["base"] == 1
    assert seen["first"] == Snapshot({"n": 11}, 2)  # base + 1
    assert seen["mine"] == Snapshot({"n": 11}, 2)  # its own get sees its first write
    assert seen["second"] == Snapshot({"n": 12}, 2)  # base + 1 again, replaced in place
    assert client.session_data.get_sync() == Snapshot({"n": 12}, 2)
    assert frames == [
        ("session_data.snapshot", 1, {"n": 10}),
        ("session_data.changed", 2, {"n": 12}),
    ]


@pytest.mark.parametrize(
    ("fail", "code"),
    [("refuse", "app.refused"), ("raise", "handler_failed"), ("lie", "handler_result_invalid")],
)
def test_a_failed_delivery_applies_nothing(fail: str, code: str) -> None:
    client = ToolClient(tools, session_data=MemorySessionData({"n": 10}))
    frames = _framed(client)
    res = client.call("demo.twice", {"fail": fail})
    assert res.code == code
    assert seen["second"] == Snapshot({"n": 12}, 2)  # it did write, pending
    assert client.session_data.get_sync() == Snapshot({"n": 10}, 1)
    assert frames == [("session_data.snapshot", 1, {"n": 10})]
    assert client.call("demo.twice").result == 12  # the next one starts from the committed data


def test_replace_checks_the_pending_revision() -> None:
    client = ToolClient(tools)
    res = client.call("demo.stale")
    assert res.code == "session_data_revision_conflict"
    assert client.session_data.get_sync() == Snapshot(None, 0)


def test_a_delivery_that_never_writes_commits_nothing() -> None:
    client = ToolClient(tools, session_data=MemorySessionData({"n": 3}))
    frames = _framed(client)
    assert client.call("demo.read").result == 3
    assert client.session_data.get_sync().revision == 1 and len(frames) == 1


def test_concurrent_deliveries_run_one_at_a_time_each_on_the_last_commit() -> None:
    client = ToolClient(tools)
    frames = _framed(client)

    async def many() -> list[Any]:
        return await asyncio.gather(*(client.acall("demo.twice") for _ in range(20)))

    results = asyncio.run(many())
    assert sorted(r.result for r in results) == list(range(2, 42, 2))
    assert client.session_data.get_sync() == Snapshot({"n": 40}, 20)
    assert [rev for _, rev, _ in frames] == list(range(21))


# -- UI Actions in-process ---------------------------------------------------------------------

actions = define_ui_actions(app_scope="demo")


class Bumped(BaseModel):
    n: int
    by: str


@actions.action("demo.bump")
async def bump(ctx: ActionContext, by: int = Field(ge=1, le=5)) -> Bumped:
    """Add `by` to n, twice over (two writes, one commit).

    Args:
        by: How much to add, 1 to 5.
    """
    snap = await ctx.session_data.get()
    n = (snap.data or {}).get("n", 0)
    first = await ctx.session_data.replace({"n": n + by}, expected_revision=snap.revision)
    await ctx.session_data.replace({"n": n + 2 * by}, expected_revision=first.revision)
    if n + 2 * by > 20:
        raise ToolError("too_big", "n would pass 20")
    return Bumped(n=n + 2 * by, by=f"{ctx.client_id}/{ctx.action_id}")


@actions.action("demo.peek")
def peek(ctx: ActionContext) -> None:
    """Read only."""
    ctx.session_data.get_sync()


def test_an_action_runs_as_its_client_with_numbered_ids() -> None:
    client = ToolClient(tools, actions=actions)
    frames = _framed(client)
    one = client.act("demo.bump", {"by": 2}, client_id="s1")
    assert one.ok and one.action_id == "s1:1" and one.revision == 1
    assert one.result == {"n": 4, "by": "s1/s1:1"}
    two = client.act("demo.bump", {"by": 1}, client_id="s1")
    other = client.act("demo.bump", {"by": 1}, client_id="s2")
    assert (two.action_id, two.revision, other.action_id) == ("s1:2", 2, "s2:1")
    assert client.act("demo.bump", {"by": 1}, client_id="s2", seq=7).action_id == "s2:7"
    assert [rev for _, rev, _ in frames] == [0, 1, 2, 3, 4]  # one frame per action
    # the Agent's tools and the actions write one session's data
    assert client.call("demo.read").result == 10


def test_an_action_that_does_not_write_carries_the_current_revision() -> None:
    client = ToolClient(tools, actions=actions, session_data=MemorySessionData({"n": 1}))
    res = client.act("demo.peek")
    assert res.ok and res.result is None and res.revision == 1


def test_an_action_refusal_applies_nothing() -> None:
    client = ToolClient(tools, actions=actions, session_data=MemorySessionData({"n": 15}))
    res = client.act("demo.bump", {"by": 5})
    assert res.code == "app.too_big" and res.action_id == "test-client:1" and res.revision is None
    assert res.ok is False
    assert client.session_data.get_sync() == Snapshot({"n": 15}, 1)
    assert client.act("demo.bump", {"by": 1}).action_id == "test-client:2"


@pytest.mark.parametrize("params", [{"by": 0}, {"by": "1"}, {"by": 1, "x": 1}, []])
def test_invalid_action_params_are_rejected_before_acceptance(params: Any) -> None:
    client = ToolClient(tools, actions=actions)
    res = client.act("demo.bump", params)
    assert res.code == "invalid_params" and res.action_id is None and res.ok is False
    assert res.error is not None
    assert res.error["message"] == "params of demo.bump do not match its input schema"
    assert client.act("demo.bump", {"by": 1}).action_id == "test-client:1"  # no seq used


@pytest.mark.parametrize(
    ("name", "with_actions"), [("demo.nope", True), ("demo.read", True), ("demo.bump", False)]
)
def test_an_unknown_action_is_refused(name: str, with_actions: bool) -> None:
    client = ToolClient(tools, actions=actions if with_actions else None)
    with pytest.raises(LineupError) as exc:
        client.act(name)
    assert exc.value.code == "unknown_action"


def test_an_action_is_not_a_tool() -> None:
    with pytest.raises(LineupError) as exc:
        ToolClient(tools, actions=actions).call("demo.bump", {"by": 1})
    assert exc.value.code == "unknown_method"


def test_the_action_spec_is_what_the_build_derives() -> None:
    spec = ToolClient(tools, actions=actions).action_spec("demo.bump")
    schema = spec["input_schema"]
    assert schema["additionalProperties"] is False
    assert schema["properties"]["by"] == {
        "description": "How much to add, 1 to 5.",
        "maximum": 5,
        "minimum": 1,
        "title": "By",
        "type": "integer",
    }
    assert spec["timeout_s"] == 30 and spec["description"].startswith("Add `by` to n")


# -- the mirror's edges: what a handler sees, holds and returns ------------------------------
edge = actions  # one UI Action registry per module: the same one, more actions
BEHIND: list[MemorySessionData] = []  # the committed store a `demo.behind` writes to


@edge.action("demo.whoami")
def whoami(ctx: ActionContext) -> dict[str, str]:
    """The context the action runs in."""
    return {
        "app_scope": ctx.app_scope,
        "app_session_id": ctx.app_session_id,
        "conversation_id": ctx.conversation_id,
        "action_id": ctx.action_id,
    }


@edge.action("demo.hold")
def hold(ctx: ActionContext) -> dict[str, list[str]]:
    """Change the snapshots it is given in place, reading back in between."""
    got = ctx.session_data.get_sync()
    got.data["items"].append("leak")  # type: ignore[index]
    before = ctx.session_data.get_sync().data["items"]  # type: ignore[index]
    wrote = ctx.session_data.replace_sync({"items": ["a"]}, expected_revision=got.revision)
    wrote.data["items"].append("leak")  # type: ignore[index]
    return {"before": before, "after": ctx.session_data.get_sync().data["items"]}  # type: ignore[index]


@edge.action("demo.listen")
def listen(ctx: ActionContext) -> None:
    """Try to subscribe from inside a handler."""
    ctx.session_data.subscribe(lambda kind, snap: None)


@edge.action("demo.behind")
def behind(ctx: ActionContext) -> None:
    """Write, while the test writes the committed data behind the delivery's back."""
    snap = ctx.session_data.get_sync()
    ctx.session_data.replace_sync({"n": 1}, expected_revision=snap.revision)
    store = BEHIND[0]
    store.replace_sync({"n": 99}, expected_revision=store.get_sync().revision)


@edge.action("demo.nan")
def nan(ctx: ActionContext) -> dict[str, float]:
    """A result that is not JSON."""
    return {"x": float("nan")}


@edge.action("demo.nan_any")
def nan_any(ctx: ActionContext) -> Any:
    """A non-finite float under `Any` (pydantic would dump it as `null`)."""
    return {"x": [1.0, float("inf")], "y": float("nan")}


class Pair(TypedDict):
    left: int
    right: int


@edge.action("demo.pair")
def pair(ctx: ActionContext) -> Pair:
    """A TypedDict result (a type pydantic takes no adapter config for)."""
    return {"left": 1, "right": 2}


def test_a_typeddict_result_is_dumped_as_declared() -> None:
    res = ToolClient(tools, actions=edge).act("demo.pair")
    assert res.ok and res.result == {"left": 1, "right": 2}


def test_an_action_gets_its_session_and_default_client() -> None:
    client = ToolClient(tools, actions=edge, app_session_id="ses-7", conversation_id="conv-3")
    res = asyncio.run(client.aact("demo.whoami"))  # the async API's own default client
    assert res.ok and res.action_id == "test-client:1"
    assert res.result == {
        "app_scope": "demo",
        "app_session_id": "ses-7",
        "conversation_id": "conv-3",
        "action_id": "test-client:1",
    }


def test_an_explicit_lower_seq_does_not_move_the_clients_count_back() -> None:
    client = ToolClient(tools, actions=edge)
    assert client.act("demo.whoami", client_id="s1", seq=5).action_id == "s1:5"
    assert client.act("demo.whoami", client_id="s1", seq=2).action_id == "s1:2"
    assert client.act("demo.whoami", client_id="s1").action_id == "s1:6"


def test_what_a_handler_or_subscriber_holds_is_a_copy() -> None:
    data = MemorySessionData({"items": []})
    # a subscriber changing its frame in place changes nothing stored
    data.subscribe(lambda kind, snap: snap.data["items"].append("frame"))  # type: ignore[index]
    client = ToolClient(tools, actions=edge, session_data=data)
    res = client.act("demo.hold")
    assert res.ok and res.result == {"before": [], "after": ["a"]}
    assert data.get_sync() == Snapshot({"items": ["a"]}, 2)


def test_a_handler_cannot_subscribe() -> None:
    res = ToolClient(tools, actions=edge).act("demo.listen")
    assert res.ok is False
    assert res.error == {
        "code": "session_data_invalid",
        "message": "handlers read with get(); the Surface subscribes",
    }


def test_a_write_behind_the_deliverys_back_is_a_conflict_at_its_commit() -> None:
    data = MemorySessionData({"n": 0})
    BEHIND[:] = [data]
    with pytest.raises(LineupError) as exc:
        ToolClient(tools, actions=edge, session_data=data).act("demo.behind")
    assert exc.value.code == "session_data_revision_conflict"
    assert exc.value.message == "session data moved to revision 2 during the delivery"
    assert data.get_sync() == Snapshot({"n": 99}, 2)  # the test's write; none of the delivery's


def test_a_result_that_is_not_json_is_handler_result_invalid() -> None:
    res = ToolClient(tools, actions=edge).act("demo.nan")
    assert res.ok is False and res.code == "handler_result_invalid"
    assert res.error is not None
    assert res.error["message"] == "the result of demo.nan does not match its result schema"
    (problem,) = res.error["details"]
    assert problem["path"] == ""
    assert problem["message"].startswith("the result is not JSON: ")


def test_a_non_finite_float_under_any_is_handler_result_invalid_not_null() -> None:
    res = ToolClient(tools, actions=edge).act("demo.nan_any")
    assert res.ok is False and res.code == "handler_result_invalid", res


tools.declare(
    "demo.tag",
    input_schema={
        "type": "object",
        "properties": {"tags": {"type": "array", "items": {"type": "string"}}},
        "required": ["tags"],
        "additionalProperties": False,
    },
    result_schema={"type": "array", "items": {"type": "string"}},
    activation="app_ready",
)


@tools.handler("demo.tag")
def tag(ctx: ToolContext, params: dict[str, Any]) -> list[str]:
    """A schema-first handler that changes the params it is given in place."""
    params["tags"].append("mine")
    return list(params["tags"])


def test_a_handler_changing_its_params_leaves_the_callers_alone() -> None:
    params = {"tags": ["a"]}
    res = ToolClient(tools).call("demo.tag", params)
    assert res.ok and res.result == ["a", "mine"]
    assert params == {"tags": ["a"]}
