"""`lineup serve` in process (SPEC 10): the real `mcp.ClientSession` against the bridge over
in-memory streams and over streamable HTTP, on a virtual clock, with the todo and pomodoro
templates; MCP tasks by hand-written JSON-RPC; state, replay and tasks across restarts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import mcp.types as mt
import pytest
from mcp import ClientSession
from mcp.shared.exceptions import MCPError

from lineup_build.build import build_project
from lineup_build.init import init_project
from lineup_build.signing import SigningKey
from lineup_build.trust import TrustStore
from lineup_runtime_lite import Runtime, VirtualClock
from lineup_runtime_lite.serve import Bridge
from tests.runtime.conftest import build_source_app
from tests.runtime.serve_kit import (
    FAST,
    HttpServer,
    Progress,
    advance,
    call_meta,
    http_session,
    memory_session,
    open_runtime,
    raw_session,
    until,
)

CALL_ID = "io.lineup/call_id"
MIN = 60_000


@pytest.fixture(scope="session")
def pomodoro_bundle(tmp_path_factory: pytest.TempPathFactory, rt_key: SigningKey) -> Path:
    root = tmp_path_factory.mktemp("pomodoro") / "pomodoro"
    init_project(root, template="pomodoro", scope="pomodoro")
    result = build_project(root, signing_key=rt_key)
    assert result.ok and result.bundle is not None
    return result.bundle


@pytest.fixture()
def bundles(todo_bundle: Path, pomodoro_bundle: Path) -> list[Path]:
    return [todo_bundle, pomodoro_bundle]


async def scenario(s: ClientSession, rt: Runtime, clock: VirtualClock) -> None:
    """Everything SPEC 10 promises one client, in one conversation."""
    caps = s.server_capabilities
    assert caps is not None and caps.tasks is not None  # over stdio and over HTTP alike
    assert caps.tasks.requests is not None and caps.tasks.requests.tools is not None
    assert caps.tasks.cancel is None  # refused
    listed = {t.name: t for t in (await s.list_tools()).tools}
    inventory = {e["method"]: e for e in rt.inventory()}
    assert set(listed) == set(inventory) | {"lineup-result"}  # and the toolchain's own tool
    add = listed["todo.add"]
    assert add.input_schema == inventory["todo.add"]["input_schema"]  # as is
    assert add.output_schema == inventory["todo.add"]["result_schema"]
    assert add.meta == {"io.lineup/activation": "app_ready", "io.lineup/long_running": False}
    assert add.execution is None
    start = listed["pomodoro.start"]
    assert start.meta == {
        "io.lineup/activation": "foreground_required",
        "io.lineup/long_running": True,
    }
    assert start.execution is not None and start.execution.task_support == "optional"
    assert start.output_schema is not None  # the envelope: its result is the tool's result
    assert start.output_schema["properties"]["result"] == {
        k: v for k, v in inventory["pomodoro.start"]["result_schema"].items() if k != "$defs"
    }

    # the first app_ready call starts the app: its receipts arrive as progress
    first_progress = Progress()
    first = await s.call_tool(
        "todo.add",
        {"title": "milk"},
        progress_callback=first_progress,
        meta=call_meta({CALL_ID: "add-1"}),
    )
    assert not first.is_error
    assert first.structured_content == {
        "item": {"id": "add-1", "title": "milk", "done": False},
        "count": 1,
    }
    assert json.loads(first.content[0].text) == first.structured_content  # type: ignore[union-attr]
    assert first.meta is not None and first.meta[CALL_ID] == "add-1"
    # the first notification names the call_id in its text (Python clients drop `_meta`)
    assert first_progress.stages == [
        "accepted (activation starting) · call_id add-1",
        "activation_ready",
    ]

    # replay by call_id: the same answer, no second effect
    again = await s.call_tool("todo.add", {"title": "milk"}, meta=call_meta({CALL_ID: "add-1"}))
    assert again.structured_content == first.structured_content
    listing = await s.call_tool("todo.list", {})
    assert listing.structured_content == {
        "items": [{"id": "add-1", "title": "milk", "done": False}]
    }
    assert listing.meta is not None and listing.meta[CALL_ID].startswith("mcp_")  # minted

    # the same call_id with another argument
    conflict = await s.call_tool("todo.add", {"title": "eggs"}, meta=call_meta({CALL_ID: "add-1"}))
    assert conflict.is_error and conflict.structured_content is None
    assert (
        conflict.meta is not None and conflict.meta["io.lineup/error"]["code"] == "call_id_conflict"
    )
    assert "call_id_conflict" in conflict.content[0].text  # type: ignore[union-attr]

    # invalid params: nothing is coerced, every problem is in the text the model reads
    bad = await s.call_tool("todo.add", {"title": 25, "due": "friday"})
    text = bad.content[0].text  # type: ignore[union-attr]
    assert bad.is_error and "error invalid_params" in text
    assert "at /title" in text and 'expected type "string"' in text and "got 25" in text
    assert "at /due" in text
    assert bad.meta is not None
    assert {d["path"] for d in bad.meta["io.lineup/error"]["details"]} == {"/title", "/due"}
    unc = await s.call_tool("pomodoro.start", {"minutes": "25"})
    assert unc.is_error and "at /minutes" in unc.content[0].text  # type: ignore[union-attr]

    # a business ToolError
    missing = await s.call_tool("todo.complete", {"item_id": "nope"})
    assert missing.is_error
    assert "error app.not_found: no item with id 'nope'" in missing.content[0].text  # type: ignore[union-attr]

    # an unknown tool is a JSON-RPC error
    with pytest.raises(MCPError) as exc:
        await s.call_tool("todo.nope", {})
    assert exc.value.code == mt.INVALID_PARAMS

    # a Pomodoro: receipts as progress, repeated while it waits; the result after the deadline
    focus = Progress()
    box: dict[str, mt.CallToolResult] = {}

    async def run_focus() -> None:
        box["r"] = await s.call_tool(
            "pomodoro.start",
            {"minutes": 25, "label": "report"},
            progress_callback=focus,
            meta=call_meta({CALL_ID: "focus-1"}),
        )

    async with anyio.create_task_group() as tg:
        tg.start_soon(run_focus)
        await until(lambda: any(m.startswith("started (") for m in focus.messages))
        await until(lambda: any(m.startswith("focusing: ") for m in focus.messages))
        assert "r" not in box  # a receipt is never the business result
        await advance(clock, 10 * MIN)
        await until(lambda: any(m.startswith("focusing: 600 s of 1500 s") for m in focus.messages))
        await advance(clock, 15 * MIN)
    result = box["r"]
    assert not result.is_error
    assert result.structured_content is not None
    # a long-running tool answers its envelope; the business result is inside
    assert result.structured_content["status"] == "final"
    assert result.structured_content["call_id"] == "focus-1"
    assert result.structured_content["result"]["status"] == "completed"
    assert focus.stages[0] == "accepted (activation starting) · call_id focus-1"
    assert focus.stages[1].startswith("started (started_at ") and "ends_at" in focus.stages[1]
    values = [p for p, _, _ in focus.seen]
    assert values == sorted(values) and len(set(values)) == len(values)  # strictly increasing
    assert any(total == 1500 for _, total, _ in focus.seen)


def test_scenario_over_memory_streams(
    tmp_path: Path, trust: TrustStore, bundles: list[Path]
) -> None:
    rt, clock = open_runtime(tmp_path / "rt.db", trust, bundles)
    try:

        async def main() -> None:
            async with memory_session(Bridge(rt, FAST)) as s:
                await scenario(s, rt, clock)

        anyio.run(main)
    finally:
        rt.close()


def test_scenario_over_streamable_http(
    tmp_path: Path, trust: TrustStore, bundles: list[Path]
) -> None:
    rt, clock = open_runtime(tmp_path / "rt.db", trust, bundles)
    server = HttpServer(Bridge(rt, FAST)).start()
    try:

        async def main() -> None:
            async with http_session(server.url) as s:
                await scenario(s, rt, clock)

        anyio.run(main)
    finally:
        server.stop()
        rt.close()


def test_http_requires_the_token_and_a_local_origin(
    tmp_path: Path, trust: TrustStore, bundles: list[Path]
) -> None:
    import httpx2

    rt, _ = open_runtime(tmp_path / "rt.db", trust, bundles)
    server = HttpServer(Bridge(rt, FAST)).start()
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"},
        },
    }
    headers = {"Accept": "application/json, text/event-stream"}
    try:
        with httpx2.Client() as http:
            none = http.post(server.url, json=body, headers=headers)
            assert none.status_code == 401
            # the body and the challenge say where the token is; no OAuth is advertised
            assert none.json()["error"] == "invalid_token"
            for said in (none.json()["error_description"], none.headers["www-authenticate"]):
                assert "start line" in said and "LINEUP_SERVE_TOKEN" in said
            for well_known in ("oauth-protected-resource", "oauth-authorization-server"):
                found = http.get(server.url.replace("/mcp", f"/.well-known/{well_known}"))
                assert found.status_code == 404
            wrong = http.post(
                server.url, json=body, headers={**headers, "Authorization": "Bearer x"}
            )
            assert wrong.status_code == 401
            auth = {**headers, "Authorization": "Bearer test-token-0123456789"}
            foreign = http.post(
                server.url, json=body, headers={**auth, "Origin": "https://evil.example"}
            )
            assert foreign.status_code == 403
            local = http.post(
                server.url, json=body, headers={**auth, "Origin": "http://localhost:3000"}
            )
            assert local.status_code == 200
    finally:
        server.stop()
        rt.close()


def test_state_and_replay_survive_a_restart(
    tmp_path: Path, trust: TrustStore, bundles: list[Path]
) -> None:
    db = tmp_path / "rt.db"

    async def first() -> mt.CallToolResult:
        async with memory_session(Bridge(rt, FAST)) as s:
            return await s.call_tool(
                "todo.add", {"title": "milk"}, meta=call_meta({CALL_ID: "add-1"})
            )

    rt, _ = open_runtime(db, trust, bundles)
    try:
        before = anyio.run(first)
    finally:
        rt.close()
    rt, _ = open_runtime(db, trust, bundles)
    try:

        async def second() -> None:
            async with memory_session(Bridge(rt, FAST)) as s:
                again = await s.call_tool(
                    "todo.add", {"title": "milk"}, meta=call_meta({CALL_ID: "add-1"})
                )
                assert again.structured_content == before.structured_content
                listing = await s.call_tool("todo.list", {})
                assert listing.structured_content is not None
                assert [i["id"] for i in listing.structured_content["items"]] == ["add-1"]

        anyio.run(second)
    finally:
        rt.close()


def test_replay_of_a_waiting_call_waits_for_its_final(
    tmp_path: Path, trust: TrustStore, bundles: list[Path]
) -> None:
    rt, clock = open_runtime(tmp_path / "rt.db", trust, bundles)
    try:

        async def main() -> None:
            async with memory_session(Bridge(rt, FAST)) as s:
                box: dict[str, mt.CallToolResult] = {}
                seen = Progress()

                async def replay() -> None:
                    box["r"] = await s.call_tool(
                        "pomodoro.start",
                        {"minutes": 5},
                        progress_callback=seen,
                        meta=call_meta({CALL_ID: "f"}),
                    )

                await anyio.to_thread.run_sync(
                    rt.call, "f", "mcp", "pomodoro.start", {"minutes": 5}
                )
                async with anyio.create_task_group() as tg:
                    tg.start_soon(replay)
                    await until(lambda: any(m.startswith("started") for m in seen.messages))
                    assert "r" not in box
                    await advance(clock, 5 * MIN)
                assert box["r"].structured_content is not None
                assert box["r"].structured_content["result"]["status"] == "completed"

        anyio.run(main)
    finally:
        rt.close()


def test_a_task_is_polled_across_a_restart(
    tmp_path: Path, trust: TrustStore, bundles: list[Path]
) -> None:
    db = tmp_path / "rt.db"
    call = {
        "name": "pomodoro.start",
        "arguments": {"minutes": 25},
        "task": {"ttl": 3_600_000},
        "_meta": {CALL_ID: "focus-t"},
    }

    async def before_restart(rt: Runtime) -> None:
        async with raw_session(Bridge(rt, FAST)) as raw:
            init_tools = (await raw.request("tools/list"))["result"]["tools"]
            start = next(t for t in init_tools if t["name"] == "pomodoro.start")
            assert start["execution"] == {"taskSupport": "optional"}
            created = (await raw.request("tools/call", call))["result"]
            assert created["task"]["taskId"] == "focus-t"
            assert created["task"]["status"] == "working"
            state: dict[str, Any] = {}

            async def started() -> bool:
                state.update((await raw.request("tasks/get", {"taskId": "focus-t"}))["result"])
                return str(state.get("statusMessage", "")).startswith("started")

            with anyio.fail_after(30):
                while not await started():
                    await anyio.sleep(0.01)
            assert state["status"] == "working" and "ends_at" in state["statusMessage"]
            refused = await raw.request("tasks/cancel", {"taskId": "focus-t"})
            assert refused["error"]["code"] == mt.INVALID_PARAMS
            assert "pomodoro.interrupt" in refused["error"]["message"]
            plain = await raw.request(
                "tools/call", {"name": "todo.list", "arguments": {}, "task": {}}
            )
            assert plain["error"]["code"] == mt.METHOD_NOT_FOUND  # taskSupport forbidden
            bad = await raw.request(
                "tools/call",
                {"name": "pomodoro.start", "arguments": {"minutes": 0}, "task": {}},
            )
            assert bad["result"]["isError"] is True  # nothing accepted, so no task

    async def after_restart(rt: Runtime, clock: VirtualClock) -> None:
        async with raw_session(Bridge(rt, FAST)) as raw:
            got = (await raw.request("tasks/get", {"taskId": "focus-t"}))["result"]
            assert got["status"] == "working" and got["statusMessage"].startswith("started")
            await advance(clock, 25 * MIN)
            done = (await raw.request("tasks/get", {"taskId": "focus-t"}))["result"]
            assert done["status"] == "completed"
            payload = (await raw.request("tasks/result", {"taskId": "focus-t"}))["result"]
            assert payload["structuredContent"]["status"] == "final"
            assert payload["structuredContent"]["result"]["status"] == "completed"
            assert payload["isError"] is False
            assert payload["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": "focus-t"}
            unknown = await raw.request("tasks/get", {"taskId": "nope"})
            assert unknown["error"]["code"] == mt.INVALID_PARAMS
            # the same call without a task: the stored final, no second focus
            replay = (await raw.request("tools/call", {**call, "task": None}))["result"]
            assert replay["structuredContent"] == payload["structuredContent"]

    rt, _ = open_runtime(db, trust, bundles)
    try:
        anyio.run(before_restart, rt)
    finally:
        rt.close()
    rt, clock = open_runtime(db, trust, bundles)
    try:
        anyio.run(after_restart, rt, clock)
    finally:
        rt.close()


def test_dashed_names_and_a_default_conversation(
    tmp_path: Path, trust: TrustStore, bundles: list[Path]
) -> None:
    from lineup_runtime_lite.serve import ServeOptions

    rt, _ = open_runtime(tmp_path / "rt.db", trust, bundles)
    try:

        async def main() -> None:
            bridge = Bridge(rt, ServeOptions(tool_names="dashed", conversation="desk", poll_s=0.01))
            async with memory_session(bridge) as s:
                names = {t.name for t in (await s.list_tools()).tools}
                assert "todo-add" in names and "todo.add" not in names
                res = await s.call_tool("todo-add", {"title": "x"}, meta=call_meta({CALL_ID: "d1"}))
                assert not res.is_error
                other = await s.call_tool(
                    "todo-list", {}, meta=call_meta({"io.lineup/conversation_id": "elsewhere"})
                )
                assert other.structured_content == {"items": []}

        anyio.run(main)
        record = rt.call_record("d1")
        assert record is not None and record["conversation_id"] == "desk"
    finally:
        rt.close()


def test_a_2026_client_gets_progress_and_no_tasks(
    tmp_path: Path, trust: TrustStore, bundles: list[Path]
) -> None:
    rt, _ = open_runtime(tmp_path / "rt.db", trust, bundles)
    try:

        async def main() -> None:
            async with memory_session(Bridge(rt, FAST), modern=True) as s:
                assert s.protocol_version == "2026-07-28"
                caps = s.server_capabilities
                assert caps is not None and caps.tasks is None  # tasks left the core
                tools = {t.name: t for t in (await s.list_tools()).tools}
                assert tools["pomodoro.start"].execution is None
                seen = Progress()
                added = await s.call_tool(
                    "todo.add",
                    {"title": "x"},
                    progress_callback=seen,
                    meta=call_meta({CALL_ID: "m1"}),
                )
                assert added.structured_content is not None
                assert added.structured_content["item"]["id"] == "m1"
                assert seen.stages == [
                    "accepted (activation starting) · call_id m1",
                    "activation_ready",
                ]

        anyio.run(main)
    finally:
        rt.close()


HINTED = '''
from __future__ import annotations

from lineup_sdk import ToolContext, define_agent_tools

tools = define_agent_tools(app_scope="demo")


@tools.tool("demo.look", activation="app_ready", read_only=True, open_world=False)
async def look(ctx: ToolContext, limit: int = 2) -> list[str]:
    """Look around without changing anything."""
    return ["a", "b", "c"][:limit]
'''


@pytest.fixture(scope="session")
def hinted_bundle(tmp_path_factory: pytest.TempPathFactory, rt_key: SigningKey) -> Path:
    return build_source_app(tmp_path_factory.mktemp("hinted") / "demo", "demo", HINTED, rt_key)


def test_hints_and_a_wrapped_result_end_to_end(
    tmp_path: Path, trust: TrustStore, hinted_bundle: Path
) -> None:
    rt, _ = open_runtime(tmp_path / "rt.db", trust, [hinted_bundle])
    try:

        async def main() -> None:
            async with memory_session(Bridge(rt, FAST)) as s:
                look, own = (await s.list_tools()).tools
                assert own.name == "lineup-result"
                assert look.annotations is not None
                assert look.annotations.read_only_hint is True
                assert look.annotations.open_world_hint is False
                assert look.annotations.destructive_hint is None
                assert look.output_schema is not None
                assert look.output_schema["required"] == ["result"]
                assert look.output_schema["x-fastmcp-wrap-result"] is True  # fastmcp unwraps
                res = await s.call_tool("demo.look", {"limit": 2})  # the client checks the schema
                assert res.structured_content == {"result": ["a", "b"]}
                assert json.loads(res.content[0].text) == {"result": ["a", "b"]}  # type: ignore[union-attr]

        anyio.run(main)
    finally:
        rt.close()
