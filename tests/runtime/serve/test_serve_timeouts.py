"""`lineup serve` for MCP clients as they are (SPEC 13.2), in process with the real
`mcp.ClientSession` on a virtual clock: names every client accepts (dashed by default, the
other spelling taken too, a hint for an unknown one), no call held past `--max-wait`
without a progress token (a long-running tool's `pending` envelope, any other tool's
`call_pending`), `lineup-result` scoped to the asking conversation, and the call_id in the
first progress notification for a client that timed out."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import mcp.types as mt
import pytest
from mcp import ClientSession
from mcp.shared.exceptions import MCPError

from lineup_build.trust import TrustStore
from lineup_runtime_lite import HostSimulator, Runtime, VirtualClock
from lineup_runtime_lite.serve import Bridge, ServeOptions
from tests.runtime.serve_kit import Progress, advance, call_meta, memory_session, until

CALL_ID = "io.lineup/call_id"
CONVERSATION = "io.lineup/conversation_id"
MIN = 60_000
#: The server's defaults but for quick polling (what `lineup serve` runs with).
QUICK = ServeOptions(poll_s=0.01, heartbeat_s=0.05)
NOW = replace(QUICK, max_wait_s=0)  # `--max-wait 0`: answer right after acceptance


@pytest.fixture()
def bundles(todo_bundle: Path, pomodoro_bundle: Path) -> list[Path]:
    return [todo_bundle, pomodoro_bundle]


def _runtime(tmp_path: Path, trust: TrustStore, bundles: list[Path], host: str = "auto") -> Any:
    clock = VirtualClock()
    rt = Runtime.open(tmp_path / "rt.db", trust=trust, clock=clock, host=HostSimulator(host))
    for bundle in bundles:
        rt.install(bundle)
    return rt, clock


def _structured(res: Any) -> dict[str, Any]:
    assert isinstance(res, mt.CallToolResult), res
    assert res.structured_content is not None, res
    return dict(res.structured_content)


def _error(res: Any) -> dict[str, Any]:
    assert isinstance(res, mt.CallToolResult) and res.is_error, res
    assert res.meta is not None
    return res.meta["io.lineup/error"]  # type: ignore[no-any-return]


def _stages(rt: Runtime, call_id: str) -> list[str]:
    record = rt.call_record(call_id)
    return [m["stage"] for m in record["messages"]] if record else []


def _run(rt: Runtime, options: ServeOptions, body: Any) -> None:
    async def main() -> None:
        with anyio.fail_after(60):  # a regression fails here instead of hanging the suite
            async with memory_session(Bridge(rt, options)) as s:
                await body(s)

    try:
        anyio.run(main)
    finally:
        rt.close()


# -- names -----------------------------------------------------------------------------------
def test_every_listed_name_matches_claude_desktops_rule_and_dotted_is_accepted(
    tmp_path: Path, trust: TrustStore, bundles: list[Path]
) -> None:
    rt, _ = _runtime(tmp_path, trust, bundles)

    async def body(s: ClientSession) -> None:
        names = [t.name for t in (await s.list_tools()).tools]
        assert "todo-add" in names and "pomodoro-start" in names and "lineup-result" in names
        assert all(re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", n) for n in names)
        added = await s.call_tool("todo.add", {"title": "milk"})  # the old, dotted spelling
        assert _structured(added)["count"] == 1
        again = await s.call_tool("todo-list", {})
        assert [i["title"] for i in _structured(again)["items"]] == ["milk"]
        with pytest.raises(MCPError) as exc:
            await s.call_tool("todo-ad", {"title": "x"})
        assert exc.value.code == mt.INVALID_PARAMS
        assert "did you mean 'todo-add'" in str(exc.value)

    _run(rt, QUICK, body)


# -- no call held past --max-wait without a progress token ------------------------------------
def test_a_long_running_call_answers_pending_then_lineup_result_fetches_its_final(
    tmp_path: Path, trust: TrustStore, bundles: list[Path]
) -> None:
    rt, clock = _runtime(tmp_path, trust, bundles)

    async def body(s: ClientSession) -> None:
        res = await s.call_tool(
            "pomodoro-start", {"minutes": 1}, meta=call_meta({CALL_ID: "focus-1"})
        )
        pending = _structured(res)
        assert not isinstance(res, mt.CallToolResult) or not res.is_error
        assert pending["status"] == "pending" and pending["call_id"] == "focus-1"
        assert "result" not in pending  # a receipt is never the business result
        assert res.meta is not None and res.meta[CALL_ID] == "focus-1"
        await until(lambda: "started" in _stages(rt, "focus-1"))
        started = _structured(await s.call_tool("lineup-result", {"call_id": "focus-1"}))
        assert started["status"] == "pending" and started["stage"] == "started"
        assert started["ends_at"] == "2026-01-01T00:01:00.000Z"
        await advance(clock, MIN)
        final = _structured(await s.call_tool("lineup-result", {"call_id": "focus-1"}))
        assert final["status"] == "final" and final["result"]["status"] == "completed"
        # the envelope is the same for a replay of the call itself
        replay = await s.call_tool(
            "pomodoro-start", {"minutes": 1}, meta=call_meta({CALL_ID: "focus-1"})
        )
        assert _structured(replay) == final

    _run(rt, NOW, body)


def test_an_sdk_tool_whose_activation_waits_past_max_wait_answers_call_pending(
    tmp_path: Path, trust: TrustStore, bundles: list[Path]
) -> None:
    rt, _ = _runtime(tmp_path, trust, bundles)

    async def body(s: ClientSession) -> None:
        res = await s.call_tool("todo-add", {"title": "milk"}, meta=call_meta({CALL_ID: "a1"}))
        error = _error(res)
        assert error["code"] == "call_pending"
        assert error["details"]["call_id"] == "a1"
        assert error["details"]["stage"] == "accepted"
        text = res.content[0].text  # type: ignore[union-attr]
        assert "lineup-result" in text and "a1" in text
        final = await s.call_tool("lineup-result", {"call_id": "a1", "wait_s": 0})
        while isinstance(final, mt.CallToolResult) and final.is_error:  # the worker starting
            assert _error(final)["code"] == "call_pending"
            await anyio.sleep(0.05)
            final = await s.call_tool("lineup-result", {"call_id": "a1"})
        assert _structured(final)["count"] == 1

    _run(rt, NOW, body)


def test_a_call_is_held_at_most_max_wait(
    tmp_path: Path, trust: TrustStore, bundles: list[Path]
) -> None:
    rt, _ = _runtime(tmp_path, trust, bundles)

    async def body(s: ClientSession) -> None:
        started = anyio.current_time()
        res = await s.call_tool("pomodoro-start", {"minutes": 5})
        took = anyio.current_time() - started
        assert _structured(res)["status"] == "pending"
        assert 0.2 <= took < 10

    _run(rt, replace(QUICK, max_wait_s=0.2), body)


def test_lineup_result_refuses_another_conversations_call(
    tmp_path: Path, trust: TrustStore, bundles: list[Path]
) -> None:
    rt, _ = _runtime(tmp_path, trust, bundles)

    async def body(s: ClientSession) -> None:
        mine = call_meta({CALL_ID: "p1", CONVERSATION: "alice"})
        await s.call_tool("pomodoro-start", {"minutes": 5}, meta=mine)
        own = await s.call_tool(
            "lineup-result", {"call_id": "p1"}, meta=call_meta({CONVERSATION: "alice"})
        )
        assert _structured(own)["call_id"] == "p1"
        other = await s.call_tool(
            "lineup-result", {"call_id": "p1"}, meta=call_meta({CONVERSATION: "bob"})
        )
        assert _error(other)["code"] == "call_not_found"
        default = await s.call_tool("lineup-result", {"call_id": "p1"})  # conversation `mcp`
        assert _error(default)["code"] == "call_not_found"
        nothing = await s.call_tool("lineup-result", {"call_id": "never"})
        assert _error(nothing)["code"] == "call_not_found"
        bad = await s.call_tool("lineup-result", {"call_id": "p1", "wait_s": 999})
        assert _error(bad)["code"] == "invalid_params"

    _run(rt, NOW, body)


def test_a_request_with_a_progress_token_is_held_until_its_final(
    tmp_path: Path, trust: TrustStore, bundles: list[Path]
) -> None:
    rt, clock = _runtime(tmp_path, trust, bundles)

    async def body(s: ClientSession) -> None:
        seen = Progress()
        box: dict[str, Any] = {}

        async def call() -> None:
            box["r"] = await s.call_tool(
                "pomodoro-start", {"minutes": 1}, progress_callback=seen, meta=call_meta({})
            )

        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            await until(lambda: any(m.startswith("started (") for m in seen.messages))
            assert "r" not in box  # max_wait 0 does not apply: the client asked for progress
            await advance(clock, MIN)
        assert _structured(box["r"])["status"] == "final"

    _run(rt, NOW, body)


def test_a_client_that_timed_out_finds_its_call_by_the_first_progress_notification(
    tmp_path: Path, trust: TrustStore, bundles: list[Path]
) -> None:
    rt, clock = _runtime(tmp_path, trust, bundles)

    async def body(s: ClientSession) -> None:
        seen = Progress()
        with pytest.raises(MCPError):  # the client's own timeout, a real one
            await s.call_tool(
                "pomodoro-start", {"minutes": 1}, read_timeout_seconds=0.5, progress_callback=seen
            )
        first = seen.messages[0]
        found = re.search(r"call_id (mcp_[0-9a-f]+)$", first)
        assert found is not None, first
        call_id = found.group(1)
        await advance(clock, MIN)
        final = _structured(await s.call_tool("lineup-result", {"call_id": call_id}))
        assert final["status"] == "final" and final["call_id"] == call_id

    _run(rt, NOW, body)


def test_the_first_progress_notification_carries_the_call_id_in_its_meta(
    tmp_path: Path, trust: TrustStore, bundles: list[Path]
) -> None:
    from tests.runtime.serve_kit import raw_session

    rt, clock = _runtime(tmp_path, trust, bundles)

    async def main() -> None:
        async with raw_session(Bridge(rt, QUICK)) as raw:
            async with anyio.create_task_group() as tg:

                async def call() -> None:
                    await raw.request(
                        "tools/call",
                        {
                            "name": "pomodoro-start",
                            "arguments": {"minutes": 1},
                            "_meta": {"progressToken": "tok", CALL_ID: "p9"},
                        },
                    )

                tg.start_soon(call)
                await until(lambda: bool(raw.notifications))
                await advance(clock, MIN)
            first = raw.notifications[0]
            assert first["method"] == "notifications/progress"
            assert first["params"]["_meta"] == {CALL_ID: "p9"}
            assert first["params"]["message"].endswith("call_id p9")

    try:
        anyio.run(main)
    finally:
        rt.close()


# -- the reserved scope ----------------------------------------------------------------------
def test_build_and_init_refuse_the_reserved_scope(tmp_path: Path) -> None:
    from lineup_build.build import build_project
    from lineup_build.init import init_project
    from lineup_sdk.errors import LineupError

    with pytest.raises(LineupError) as exc:
        init_project(tmp_path / "x", template="blank", scope="lineup")
    assert exc.value.code == "scope_invalid"
    init_project(tmp_path / "app", template="blank", scope="app")
    config = tmp_path / "app" / "lineup.toml"
    config.write_text(config.read_text().replace('scope = "app"', 'scope = "lineup"'))
    result = build_project(tmp_path / "app", dev_key=True)
    assert not result.ok and result.bundle is None
    codes = {(d.code, d.message) for d in result.diagnostics}
    assert any(c == "config_invalid" and "reserved" in m for c, m in codes), codes
