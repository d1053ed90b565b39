"""The Surface as an MCP App in process (SPEC 18.2): negotiation on both revisions (declared
only with `text/html;profile=mcp-app`), the `tools/list` cache per (revision, UI declared),
linked tools and their `view`, the app-only tools `lineup-surface-sync` and
`lineup-ui-action` (view checked first, no Agent trace), linked long-running tools answering
at acceptance for UI clients only; todo and pomodoro templates, virtual clock."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.shared.memory import create_client_server_memory_streams

from lineup_build.build import build_project
from lineup_build.init import init_project
from lineup_build.signing import SigningKey
from lineup_build.trust import TrustStore
from lineup_runtime_lite import Runtime, VirtualClock
from lineup_runtime_lite.internals import VIEW_TTL_MS
from lineup_runtime_lite.serve import Bridge, ServeOptions
from tests.runtime.serve_kit import FAST, RawClient, advance, open_runtime, raw_session

UI = "io.modelcontextprotocol/ui"
MIME = "text/html;profile=mcp-app"
DECLARED = {UI: {"mimeTypes": [MIME]}}
SURFACE = "io.lineup/surface"
CALL_ID = "io.lineup/call_id"
CONV = "io.lineup/conversation_id"
TODO_URI = "ui://lineup/todo/1.0.0/surface.html"
FOCUS_URI = "ui://lineup/pomodoro/1.0.0/surface.html"
APP_ONLY = {"lineup-surface-sync", "lineup-ui-action"}
FIXTURES = Path(__file__).parents[2] / "users" / "mcp_apps" / "fixtures"


@pytest.fixture(scope="module")
def focus_bundle(tmp_path_factory: pytest.TempPathFactory, rt_key: SigningKey) -> Path:
    root = tmp_path_factory.mktemp("focus-apps") / "pomodoro"
    init_project(root, template="pomodoro", scope="pomodoro")
    result = build_project(root, signing_key=rt_key)
    assert result.ok and result.bundle is not None
    return result.bundle


def run_on(tmp_path: Path, trust: TrustStore, bundles: list[Path], main: Any) -> None:
    rt, clock = open_runtime(tmp_path / "rt.db", trust, bundles)
    try:
        anyio.run(main, rt, clock)
    finally:
        rt.close()


class Modern:
    """JSON-RPC on 2026-07-28: the envelope (and capabilities) in every request's `_meta`."""

    def __init__(self, raw: RawClient, capabilities: dict[str, Any]) -> None:
        self.raw, self.capabilities = raw, capabilities

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        params = dict(params or {})
        params["_meta"] = {
            **params.get("_meta", {}),
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": self.capabilities,
            "io.modelcontextprotocol/clientInfo": {"name": "raw-modern", "version": "0"},
        }
        return await self.raw.request(method, params)


@asynccontextmanager
async def modern(bridge: Bridge, capabilities: dict[str, Any]) -> AsyncIterator[Modern]:
    async with (
        create_client_server_memory_streams() as (client_streams, server_streams),
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(bridge.run, *server_streams)
        yield Modern(RawClient(*client_streams), capabilities)
        tg.cancel_scope.cancel()


def tools_of(answer: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["name"]: t for t in answer["result"]["tools"]}


def has_ui(tools: dict[str, dict[str, Any]]) -> bool:
    return any("ui" in (t.get("_meta") or {}) for t in tools.values()) or bool(
        APP_ONLY & set(tools)
    )


async def call(
    raw: Any, name: str, arguments: dict[str, Any], meta: dict[str, Any] | None = None
) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "arguments": arguments}
    if meta is not None:
        params["_meta"] = meta
    answer = await raw.request("tools/call", params)
    assert "result" in answer, answer
    result: dict[str, Any] = answer["result"]
    return result


def code_of(result: dict[str, Any]) -> str:
    assert result["isError"] is True, result
    return str(result["_meta"]["io.lineup/error"]["code"])


# -- negotiation --------------------------------------------------------------------------
@pytest.mark.parametrize(
    "capabilities",
    [{"extensions": DECLARED}, {"experimental": DECLARED}],
    ids=["extensions", "experimental"],
)
def test_2025_11_25_a_declaring_client_gets_the_extension_and_linked_tools(
    tmp_path: Path,
    trust: TrustStore,
    todo_bundle: Path,
    focus_bundle: Path,
    capabilities: dict[str, Any],
) -> None:
    async def main(rt: Runtime, clock: VirtualClock) -> None:
        bridge = Bridge(rt, FAST)
        async with (
            create_client_server_memory_streams() as (client_streams, server_streams),
            anyio.create_task_group() as tg,
        ):
            tg.start_soon(bridge.run, *server_streams)
            raw = RawClient(*client_streams)
            init = await raw.request(
                "initialize",
                {
                    "protocolVersion": "2025-11-25",
                    "capabilities": capabilities,
                    "clientInfo": {"name": "host", "version": "0"},
                },
            )
            # the server's declaration, added to the raw 2025-11-25 result
            assert init["result"]["capabilities"]["extensions"][UI] == {"mimeTypes": [MIME]}
            await raw.notify("notifications/initialized")
            tools = tools_of(await raw.request("tools/list"))
            for method in ("todo.add", "todo.list", "todo.complete"):
                assert tools[method]["_meta"]["ui"] == {"resourceUri": TODO_URI}
            assert tools["pomodoro.start"]["_meta"]["ui"] == {"resourceUri": FOCUS_URI}
            assert "execution" not in tools["pomodoro.start"]  # no task support there
            assert "ui" not in tools["pomodoro.interrupt"]["_meta"]  # not linked
            for name in APP_ONLY:  # named so under --tool-names dotted too
                assert tools[name]["_meta"]["ui"]["visibility"] == ["app"]
            tg.cancel_scope.cancel()

    run_on(tmp_path, trust, [todo_bundle, focus_bundle], main)


@pytest.mark.parametrize(
    "extensions",
    [
        None,
        {UI: {}},
        {UI: {"mimeTypes": ["text/html"]}},
        {UI: {"mimeTypes": "text/html;profile=mcp-app"}},
        {"io.example/other": {"mimeTypes": [MIME]}},
    ],
    ids=["none", "empty", "other-mime", "not-a-list", "other-extension"],
)
def test_2025_11_25_a_client_without_the_declaration_gets_todays_tools(
    tmp_path: Path,
    trust: TrustStore,
    todo_bundle: Path,
    focus_bundle: Path,
    extensions: dict[str, Any] | None,
) -> None:
    async def main(rt: Runtime, clock: VirtualClock) -> None:
        bridge = Bridge(rt, FAST)
        async with raw_session(bridge) as plain:
            today = (await plain.request("tools/list"))["result"]
        async with raw_session(bridge, extensions=extensions) as raw:
            tools = tools_of(await raw.request("tools/list"))
            assert not has_ui(tools)
            assert today["tools"] == list(tools.values())  # byte for byte today's
            assert tools["pomodoro.start"]["execution"] == {"taskSupport": "optional"}
            sync = await raw.request(
                "tools/call", {"name": "lineup-surface-sync", "arguments": {"view": "x"}}
            )
            assert "Unknown tool" in sync["error"]["message"]
            added = await call(raw, "todo.add", {"title": "milk"})
            assert SURFACE not in added["_meta"]  # answers as today

    run_on(tmp_path, trust, [todo_bundle, focus_bundle], main)


def test_2026_07_28_declared_in_capabilities_extensions_per_request(
    tmp_path: Path, trust: TrustStore, todo_bundle: Path
) -> None:
    async def main(rt: Runtime, clock: VirtualClock) -> None:
        bridge = Bridge(rt, FAST)
        async with modern(bridge, {"extensions": DECLARED}) as ui:
            found = await ui.request("server/discover")
            assert found["result"]["capabilities"]["extensions"][UI] == {"mimeTypes": [MIME]}
            tools = tools_of(await ui.request("tools/list"))
            assert tools["todo.add"]["_meta"]["ui"] == {"resourceUri": TODO_URI}
            assert set(tools) >= APP_ONLY
            # the same server, the same revision, a client that does not declare it
            ui.capabilities = {}
            assert not has_ui(tools_of(await ui.request("tools/list")))
            # experimental is not where 2026-07-28 declares extensions
            ui.capabilities = {"experimental": DECLARED}
            assert not has_ui(tools_of(await ui.request("tools/list")))
            ui.capabilities = {"extensions": DECLARED}
            assert has_ui(tools_of(await ui.request("tools/list")))

    run_on(tmp_path, trust, [todo_bundle], main)


def test_the_tools_list_cache_is_kept_per_revision_and_declaration(
    tmp_path: Path, trust: TrustStore, todo_bundle: Path
) -> None:
    async def main(rt: Runtime, clock: VirtualClock) -> None:
        bridge = Bridge(rt, FAST)
        async with raw_session(bridge, extensions=DECLARED) as ui:
            assert has_ui(tools_of(await ui.request("tools/list")))
        async with raw_session(bridge) as plain:
            assert not has_ui(tools_of(await plain.request("tools/list")))
        async with raw_session(bridge, extensions=DECLARED) as ui:
            assert has_ui(tools_of(await ui.request("tools/list")))

    run_on(tmp_path, trust, [todo_bundle], main)


@pytest.mark.parametrize(
    "fixture", sorted(p.name for p in FIXTURES.glob("*.json")) if FIXTURES.exists() else []
)
def test_what_the_official_clients_send_is_judged_as_declared_or_not(
    tmp_path: Path, trust: TrustStore, todo_bundle: Path, fixture: str
) -> None:
    """The JSON the pinned TypeScript client (as the ext-apps AppBridge host configures it,
    and plain) sends on each revision, replayed (tests/users/mcp_apps/fixtures)."""
    doc = json.loads((FIXTURES / fixture).read_text())

    async def main(rt: Runtime, clock: VirtualClock) -> None:
        bridge = Bridge(rt, FAST)
        async with (
            create_client_server_memory_streams() as (client_streams, server_streams),
            anyio.create_task_group() as tg,
        ):
            tg.start_soon(bridge.run, *server_streams)
            raw = RawClient(*client_streams)
            for message in doc["messages"]:
                if "id" not in message:
                    await raw.notify(message["method"])
                    continue
                answer = await raw.request(message["method"], message.get("params"))
                assert "result" in answer, answer
                if message["method"] == "tools/list":
                    assert has_ui(tools_of(answer)) is doc["declares"], fixture
            tg.cancel_scope.cancel()

    run_on(tmp_path, trust, [todo_bundle], main)


# -- linked tools and the view ----------------------------------------------------------
async def view_of(raw: Any, meta: dict[str, Any] | None = None) -> dict[str, Any]:
    added = await call(raw, "todo.add", {"title": "milk"}, meta)
    assert added["isError"] is False, added
    surface: dict[str, Any] = added["_meta"][SURFACE]
    # never where the model reads
    assert surface["view"] not in json.dumps(added["content"])
    assert surface["view"] not in json.dumps(added["structuredContent"])
    return surface


def test_a_linked_answer_carries_the_view_and_sync_reads_the_session(
    tmp_path: Path, trust: TrustStore, todo_bundle: Path
) -> None:
    async def main(rt: Runtime, clock: VirtualClock) -> None:
        async with raw_session(Bridge(rt, FAST), extensions=DECLARED) as raw:
            surface = await view_of(raw)
            assert surface["revision"] == 1 and surface["version"] == "1.0.0"
            got = await call(
                raw,
                "lineup-surface-sync",
                {"view": surface["view"], "protocol": 1, "after_revision": -1},
            )
            body = got["structuredContent"]
            assert body["status"] == "changed" and body["revision"] == 1
            assert [i["title"] for i in body["data"]["items"]] == ["milk"]
            assert body["operations"] == [] and isinstance(body["operations_version"], str)
            assert body["version"] == body["served_version"] == "1.0.0"
            assert got["_meta"][SURFACE]["view"]  # a refreshed view
            same = await call(
                raw,
                "lineup-surface-sync",
                {
                    "view": surface["view"],
                    "protocol": 1,
                    "after_revision": 1,
                    "after_operations": body["operations_version"],
                    "wait_s": 0,
                },
            )
            assert same["structuredContent"]["status"] == "unchanged"

    run_on(tmp_path, trust, [todo_bundle], main)


def test_a_waiting_sync_answers_when_the_agent_changes_the_data(
    tmp_path: Path, trust: TrustStore, todo_bundle: Path
) -> None:
    async def main(rt: Runtime, clock: VirtualClock) -> None:
        bridge = Bridge(rt, FAST)
        async with raw_session(bridge, extensions=DECLARED) as ui, raw_session(bridge) as agent:
            surface = await view_of(ui)
            first = await call(
                ui,
                "lineup-surface-sync",
                {"view": surface["view"], "protocol": 1, "after_revision": -1},
            )
            ops = first["structuredContent"]["operations_version"]
            got: list[dict[str, Any]] = []

            async def wait() -> None:
                args = {"view": surface["view"], "protocol": 1, "after_revision": 1}
                args |= {"after_operations": ops, "wait_s": 25}
                got.append(await call(ui, "lineup-surface-sync", args))

            async with anyio.create_task_group() as tg:
                tg.start_soon(wait)
                await anyio.sleep(0.05)
                assert not got  # still waiting
                await call(agent, "todo.add", {"title": "eggs"})
            body = got[0]["structuredContent"]
            assert body["revision"] == 2
            assert [i["title"] for i in body["data"]["items"]] == ["milk", "eggs"]

    run_on(tmp_path, trust, [todo_bundle], main)


def test_view_invalid_missing_forged_expired_and_other_conversation(
    tmp_path: Path, trust: TrustStore, todo_bundle: Path
) -> None:
    async def main(rt: Runtime, clock: VirtualClock) -> None:
        async with raw_session(Bridge(rt, FAST), extensions=DECLARED) as raw:
            view = (await view_of(raw, {CONV: "alice"}))["view"]
            for tool in sorted(APP_ONLY):
                # missing, even with arguments the schema would refuse: the view comes first
                assert code_of(await call(raw, tool, {"bogus": 1})) == "view_invalid"
                body, mac = view.split(".")
                forged = f"{body}.{mac[:-2]}{'AA' if mac[-2:] != 'AA' else 'BB'}"
                assert code_of(await call(raw, tool, {"view": forged})) == "view_invalid"
                other = await call(raw, tool, {"view": view}, {CONV: "bob"})
                assert code_of(other) == "view_invalid"
            # the view alone names its session: hosts send no conversation
            sync = {"view": view, "protocol": 1, "after_revision": -1}
            assert (await call(raw, "lineup-surface-sync", sync))["isError"] is False
            assert (await call(raw, "lineup-surface-sync", sync, {CONV: "alice"}))[
                "isError"
            ] is False
            # the schema comes after the view
            bad = await call(raw, "lineup-surface-sync", {"view": view, "protocol": 1})
            assert code_of(bad) == "invalid_params"
            await advance(clock, VIEW_TTL_MS)
            assert code_of(await call(raw, "lineup-surface-sync", sync)) == "view_invalid"

    run_on(tmp_path, trust, [todo_bundle], main)


@pytest.mark.store
def test_the_view_key_is_kept_in_the_store_across_restarts(
    db_target: str, trust: TrustStore, tmp_path: Path
) -> None:
    """Created at first use, the same after a restart (and, on PostgreSQL, on another node
    of the same database)."""
    rt = Runtime.open(db_target, trust=trust, clock=VirtualClock())
    try:
        key = rt.surface_view_key()
        assert len(key) == 32 and rt.surface_view_key() == key
        if db_target.startswith("postgresql"):
            other = Runtime.open(
                db_target,
                trust=trust,
                clock=VirtualClock(),
                node_id="second-node",
                apps_dir=tmp_path / "second-apps",
            )
            try:
                assert other.surface_view_key() == key
            finally:
                other.close()
    finally:
        rt.close()
    rt = Runtime.open(db_target, trust=trust, clock=VirtualClock())
    try:
        assert rt.surface_view_key() == key
    finally:
        rt.close()


def test_ui_action_ticks_an_item_the_agent_then_sees_and_leaves_no_agent_trace(
    tmp_path: Path, trust: TrustStore, todo_bundle: Path
) -> None:
    async def main(rt: Runtime, clock: VirtualClock) -> None:
        async with raw_session(Bridge(rt, FAST), extensions=DECLARED) as raw:
            surface = await view_of(raw)
            item = (await call(raw, "todo.list", {}))["structuredContent"]["items"][0]
            before = await anyio.to_thread.run_sync(rt.outbox.all)
            marks = await anyio.to_thread.run_sync(rt.store_dump)
            act = {"view": surface["view"], "protocol": 1, "client_id": "v1", "seq": 1}
            got = await call(
                raw,
                "lineup-ui-action",
                {**act, "name": "todo.toggle", "params": {"id": item["id"]}},
            )
            assert got["isError"] is False, got
            assert got["structuredContent"]["action_id"] == "v1:1"
            assert CALL_ID not in got["_meta"]
            sync = await call(
                raw,
                "lineup-surface-sync",
                {"view": surface["view"], "protocol": 1, "after_revision": -1},
                {CALL_ID: "ignored-call-id"},
            )
            assert CALL_ID not in sync["_meta"]
            listed = (await call(raw, "todo.list", {}))["structuredContent"]["items"]
            assert listed[0]["done"] is True
            after = await anyio.to_thread.run_sync(rt.outbox.all)
            # the two todo.list calls are the Agent's; the app-only tools added nothing
            assert len(after) - len(before) == len(
                [m for m in after if m not in before and m["call_id"] != "ignored-call-id"]
            )
            assert all(m["call_id"] != "ignored-call-id" for m in after)
            assert await anyio.to_thread.run_sync(rt.call_record, "ignored-call-id") is None
            dump = await anyio.to_thread.run_sync(rt.store_dump)
            assert len(dump.get("calls", [])) == len(marks.get("calls", [])) + 1
            refused = await call(
                raw, "lineup-ui-action", {**act, "seq": 2, "name": "todo.nope", "params": {}}
            )
            assert code_of(refused) == "unknown_action"

    run_on(tmp_path, trust, [todo_bundle], main)


# -- linked long-running tools ----------------------------------------------------------
def test_a_linked_long_running_tool_answers_at_acceptance_for_a_ui_client_only(
    tmp_path: Path, trust: TrustStore, focus_bundle: Path
) -> None:
    async def main(rt: Runtime, clock: VirtualClock) -> None:
        bridge = Bridge(rt, FAST)
        token = {"progressToken": "p1"}
        async with raw_session(bridge, extensions=DECLARED) as ui:
            meta = {**token, CONV: "ui", CALL_ID: "focus-ui"}
            with anyio.fail_after(20):  # at acceptance; never held until the final
                got = await call(ui, "pomodoro.start", {"minutes": 1}, meta)
            assert got["structuredContent"]["status"] == "pending"  # despite the token
            assert got["_meta"][SURFACE]["version"] == "1.0.0"
            # a task opt-in is answered the same way
            with anyio.fail_after(20):
                task = await ui.request(
                    "tools/call",
                    {
                        "name": "pomodoro.start",
                        "arguments": {"minutes": 1},
                        "task": {},
                        "_meta": {CONV: "ui2", CALL_ID: "focus-task"},
                    },
                )
            assert "task" not in task["result"], task
            assert task["result"]["structuredContent"]["status"] == "pending"
        async with raw_session(bridge) as plain:
            done: list[dict[str, Any]] = []

            async def held() -> None:
                meta = {**token, CONV: "plain", CALL_ID: "focus-plain"}
                done.append(await call(plain, "pomodoro.start", {"minutes": 1}, meta))

            async with anyio.create_task_group() as tg:
                tg.start_soon(held)
                with anyio.fail_after(30):
                    while not any("started" in str(n) for n in plain.notifications):
                        await anyio.sleep(0.01)
                assert not done  # held with progress, as 13.2 says
                await advance(clock, 60_000)
            assert done[0]["structuredContent"]["status"] == "final"
            assert SURFACE not in done[0]["_meta"]

    run_on(tmp_path, trust, [focus_bundle], main)


def test_sync_clamps_wait_s_and_checks_its_protocol(
    tmp_path: Path, trust: TrustStore, todo_bundle: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lineup_runtime_lite.internals import mcpapps

    monkeypatch.setattr(mcpapps, "MAX_SYNC_WAIT_S", 0.05)  # the clamp, scaled down

    async def main(rt: Runtime, clock: VirtualClock) -> None:
        async with raw_session(Bridge(rt, FAST), extensions=DECLARED) as raw:
            view = (await view_of(raw))["view"]
            args = {"view": view, "protocol": 1, "after_revision": 1}
            first = await call(raw, "lineup-surface-sync", {**args, "after_revision": -1})
            args["after_operations"] = first["structuredContent"]["operations_version"]
            with anyio.fail_after(10):
                held = await call(raw, "lineup-surface-sync", {**args, "wait_s": 3600})
            assert held["structuredContent"]["status"] == "unchanged"
            for tool in sorted(APP_ONLY):
                other = await call(raw, tool, {**args, "protocol": 2})
                assert code_of(other) == "invalid_params"

    run_on(tmp_path, trust, [todo_bundle], main)


def test_the_first_view_key_written_wins(tmp_path: Path) -> None:
    """Two nodes creating the key at once: the second insert leaves the first key."""
    from lineup_runtime_lite.store.database import open_database

    db = open_database(tmp_path / "keys.db")
    try:
        for value in ("first", "second"):
            with db.transaction():
                db.facts.add_meta("surface_view_key", value)
        assert db.meta("surface_view_key") == "first"
    finally:
        db.close()


def test_2026_07_28_a_tasks_opt_in_on_a_linked_tool_answers_at_acceptance_for_a_ui_client(
    tmp_path: Path, trust: TrustStore, focus_bundle: Path
) -> None:
    tasks: dict[str, Any] = {"io.modelcontextprotocol/tasks": {}}

    async def main(rt: Runtime, clock: VirtualClock) -> None:
        bridge = Bridge(rt, FAST)
        async with modern(bridge, {"extensions": {**DECLARED, **tasks}}) as ui:
            params = {"name": "pomodoro.start", "arguments": {"minutes": 1}}
            with anyio.fail_after(20):
                got = await ui.request("tools/call", {**params, "_meta": {CONV: "m-ui"}})
            assert got["result"]["resultType"] == "complete"
            assert got["result"]["structuredContent"]["status"] == "pending"
            assert got["result"]["_meta"][SURFACE]["version"] == "1.0.0"
            ui.capabilities = {"extensions": tasks}  # the same call without MCP Apps
            task = await ui.request("tools/call", {**params, "_meta": {CONV: "m-plain"}})
            assert task["result"]["resultType"] == "task"

    run_on(tmp_path, trust, [focus_bundle], main)


def test_a_call_pending_answer_of_a_linked_tool_carries_the_view(
    tmp_path: Path, trust: TrustStore, todo_bundle: Path
) -> None:
    async def main(rt: Runtime, clock: VirtualClock) -> None:
        options = ServeOptions(tool_names="dotted", poll_s=0.01, max_wait_s=0)
        async with raw_session(Bridge(rt, options), extensions=DECLARED) as raw:
            got = await call(raw, "todo.add", {"title": "milk"})
            assert code_of(got) == "call_pending"
            assert got["_meta"][SURFACE]["version"] == "1.0.0"  # the session exists
            assert got["_meta"][SURFACE]["view"] not in json.dumps(got["content"])

    run_on(tmp_path, trust, [todo_bundle], main)
