"""MCP tasks in process (SPEC 13.2 "Tasks"): the 2026-07-28 tasks extension
`io.modelcontextprotocol/tasks` (SEP-2663) by hand-written JSON-RPC on the per-request
envelope, and the 2025-11-25 task status of an error final; pomodoro template, virtual clock,
state across restarts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import mcp.types as mt
import pytest

from lineup_build.build import build_project
from lineup_build.init import init_project
from lineup_build.signing import SigningKey
from lineup_build.trust import TrustStore
from lineup_runtime_lite import Runtime
from lineup_runtime_lite.serve import Bridge
from tests.runtime.serve.serve_tasks_kit import TASKS, ModernClient, modern_session
from tests.runtime.serve_kit import FAST, advance, open_runtime, raw_session

CALL_ID = "io.lineup/call_id"
MIN = 60_000


@pytest.fixture(scope="session")
def pomodoro_bundle(tmp_path_factory: pytest.TempPathFactory, rt_key: SigningKey) -> Path:
    root = tmp_path_factory.mktemp("pomodoro-tasks") / "pomodoro"
    init_project(root, template="pomodoro")
    result = build_project(root, signing_key=rt_key)
    assert result.ok and result.bundle is not None
    return result.bundle


async def started(c: ModernClient, task_id: str) -> dict[str, Any]:
    """Poll `tasks/get` (bounded) until the focus has started."""
    with anyio.fail_after(30):
        while True:
            got: dict[str, Any] = (await c.request("tasks/get", {"taskId": task_id}))["result"]
            if str(got.get("statusMessage", "")).startswith("started"):
                return got
            await anyio.sleep(0.01)


def run_on(tmp_path: Path, trust: TrustStore, bundle: Path, main: Any) -> None:
    rt, clock = open_runtime(tmp_path / "rt.db", trust, [bundle])
    try:
        anyio.run(main, rt, clock)
    finally:
        rt.close()


def test_the_extension_is_advertised_without_the_legacy_tasks_capability(
    tmp_path: Path, trust: TrustStore, pomodoro_bundle: Path
) -> None:
    async def main(rt: Runtime, clock: object) -> None:
        async with modern_session(Bridge(rt, FAST)) as c:
            found = (await c.request("server/discover"))["result"]
            # the tasks extension, beside MCP Apps (SPEC 18.2)
            assert found["capabilities"]["extensions"][TASKS] == {}
            assert set(found["capabilities"]["extensions"]) == {TASKS, "io.modelcontextprotocol/ui"}
            assert "tasks" not in found["capabilities"]  # no legacy tasks on 2026-07-28
            tools = (await c.request("tools/list"))["result"]["tools"]
            assert all("execution" not in t for t in tools)  # 2025-11-25's taskSupport

    run_on(tmp_path, trust, pomodoro_bundle, main)


def test_a_create_task_result_only_with_the_opt_in(
    tmp_path: Path, trust: TrustStore, pomodoro_bundle: Path
) -> None:
    async def main(rt: Runtime, clock: Any) -> None:
        async with modern_session(Bridge(rt, FAST)) as c:
            start = await c.tool_name("pomodoro.start")
            call = {"name": start, "arguments": {"minutes": 1}, "_meta": {CALL_ID: "opt-in"}}
            created = (await c.request("tools/call", call))["result"]
            assert created["resultType"] == "task"
            assert created["taskId"] == "opt-in" and created["status"] == "working"
            assert created["ttlMs"] is None and created["pollIntervalMs"] > 0
            assert created["createdAt"] and created["lastUpdatedAt"]
            assert "result" not in created and "content" not in created
            assert created["_meta"][CALL_ID] == "opt-in"
            await started(c, "opt-in")
            await advance(clock, 1 * MIN)
            # without the opt-in: the plain result (here the stored final of that call)
            plain_call = {**call, "arguments": {"minutes": 1}}
            plain = (await c.request("tools/call", plain_call, tasks=False))["result"]
            assert plain["resultType"] == "complete"
            assert plain["isError"] is False and "taskId" not in plain
            assert plain["structuredContent"] is not None
            # a short tool never becomes a task, opt-in or not
            interrupt = await c.tool_name("pomodoro.interrupt")
            quick = (await c.request("tools/call", {"name": interrupt, "arguments": {}}))["result"]
            assert quick["resultType"] == "complete"

    run_on(tmp_path, trust, pomodoro_bundle, main)


def test_tasks_get_through_a_server_restart(
    tmp_path: Path, trust: TrustStore, pomodoro_bundle: Path
) -> None:
    db = tmp_path / "rt.db"

    async def before(rt: Runtime) -> None:
        async with modern_session(Bridge(rt, FAST)) as c:
            start = await c.tool_name("pomodoro.start")
            call = {"name": start, "arguments": {"minutes": 25}, "_meta": {CALL_ID: "focus-x"}}
            created = (await c.request("tools/call", call))["result"]
            assert created["resultType"] == "task" and created["taskId"] == "focus-x"
            got = await started(c, "focus-x")
            assert got["resultType"] == "complete" and got["status"] == "working"
            assert "ends_at" in got["statusMessage"]

    async def after(rt: Runtime, clock: Any) -> None:
        async with modern_session(Bridge(rt, FAST)) as c:
            got = (await c.request("tasks/get", {"taskId": "focus-x"}))["result"]
            assert got["status"] == "working" and got["statusMessage"].startswith("started")
            await advance(clock, 25 * MIN)
            with anyio.fail_after(30):
                while got["status"] == "working":
                    got = (await c.request("tasks/get", {"taskId": "focus-x"}))["result"]
                    await anyio.sleep(0.01)
            assert got["status"] == "completed"
            assert got["result"]["resultType"] == "complete"
            assert got["result"]["isError"] is False
            assert got["result"]["structuredContent"]["status"] == "final"  # the envelope
            assert got["result"]["structuredContent"]["result"]["status"] == "completed"
            assert got["result"]["_meta"][CALL_ID] == "focus-x"
            unknown = await c.request("tasks/get", {"taskId": "nope"})
            assert unknown["error"]["code"] == mt.INVALID_PARAMS

    rt, _ = open_runtime(db, trust, [pomodoro_bundle])
    try:
        anyio.run(before, rt)
    finally:
        rt.close()
    rt, clock = open_runtime(db, trust, [pomodoro_bundle])
    try:
        anyio.run(after, rt, clock)
    finally:
        rt.close()


def test_tasks_methods_answer_32003_to_a_client_that_did_not_declare_the_extension(
    tmp_path: Path, trust: TrustStore, pomodoro_bundle: Path
) -> None:
    async def main(rt: Runtime, clock: Any) -> None:
        async with modern_session(Bridge(rt, FAST)) as c:
            start = await c.tool_name("pomodoro.start")
            call = {"name": start, "arguments": {"minutes": 5}, "_meta": {CALL_ID: "t-32003"}}
            assert (await c.request("tools/call", call))["result"]["resultType"] == "task"
            for method in ("tasks/get", "tasks/update", "tasks/cancel"):
                params: dict[str, Any] = {"taskId": "t-32003"}
                if method == "tasks/update":
                    params["inputResponses"] = {}
                refused = await c.request(method, params, tasks=False)
                assert refused["error"]["code"] == -32003, (method, refused)
                assert TASKS in refused["error"]["message"]

    run_on(tmp_path, trust, pomodoro_bundle, main)


def test_tasks_update_answers_32602_and_tasks_cancel_is_refused(
    tmp_path: Path, trust: TrustStore, pomodoro_bundle: Path
) -> None:
    async def main(rt: Runtime, clock: Any) -> None:
        async with modern_session(Bridge(rt, FAST)) as c:
            start = await c.tool_name("pomodoro.start")
            call = {"name": start, "arguments": {"minutes": 5}, "_meta": {CALL_ID: "t-upd"}}
            assert (await c.request("tools/call", call))["result"]["resultType"] == "task"
            update = await c.request("tasks/update", {"taskId": "t-upd", "inputResponses": {}})
            assert update["error"]["code"] == mt.INVALID_PARAMS
            assert "input" in update["error"]["message"]
            cancel = await c.request("tasks/cancel", {"taskId": "t-upd"})
            assert cancel["error"]["code"] == mt.INVALID_PARAMS
            assert "interrupt" in cancel["error"]["message"]
            still = (await c.request("tasks/get", {"taskId": "t-upd"}))["result"]
            assert still["status"] == "working"

    run_on(tmp_path, trust, pomodoro_bundle, main)


def test_an_is_error_result_is_completed_under_the_extension(
    tmp_path: Path, trust: TrustStore, pomodoro_bundle: Path
) -> None:
    async def main(rt: Runtime, clock: Any) -> None:
        async with modern_session(Bridge(rt, FAST)) as c:
            start = await c.tool_name("pomodoro.start")
            first = {"name": start, "arguments": {"minutes": 5}, "_meta": {CALL_ID: "e-1"}}
            assert (await c.request("tools/call", first))["result"]["resultType"] == "task"
            await started(c, "e-1")
            # a second focus in the same conversation: accepted, then a final error
            second = {"name": start, "arguments": {"minutes": 5}, "_meta": {CALL_ID: "e-2"}}
            created = (await c.request("tools/call", second))["result"]
            assert created["resultType"] == "task" and created["taskId"] == "e-2"
            got = (await c.request("tasks/get", {"taskId": "e-2"}))["result"]
            assert got["status"] == "completed"  # `failed` is for protocol errors only
            assert "error" not in got
            assert got["result"]["isError"] is True
            error = got["result"]["_meta"]["io.lineup/error"]
            assert error["code"] == "pomodoro_already_active"
            assert "pomodoro_already_active" in got["result"]["content"][0]["text"]

    run_on(tmp_path, trust, pomodoro_bundle, main)


def test_a_failed_2025_11_25_task(tmp_path: Path, trust: TrustStore, pomodoro_bundle: Path) -> None:
    async def main(rt: Runtime, clock: Any) -> None:
        async with raw_session(Bridge(rt, FAST)) as raw:
            tools = (await raw.request("tools/list"))["result"]["tools"]
            start = next(
                t["name"] for t in tools if t["name"].replace("-", ".") == "pomodoro.start"
            )
            first = {
                "name": start,
                "arguments": {"minutes": 5},
                "task": {},
                "_meta": {CALL_ID: "f-1"},
            }
            assert (await raw.request("tools/call", first))["result"]["task"]["taskId"] == "f-1"
            with anyio.fail_after(30):
                while True:
                    got = (await raw.request("tasks/get", {"taskId": "f-1"}))["result"]
                    if got["statusMessage"].startswith("started"):
                        break
                    await anyio.sleep(0.01)
            second = {**first, "_meta": {CALL_ID: "f-2"}}
            created = (await raw.request("tools/call", second))["result"]["task"]
            assert created["taskId"] == "f-2"
            got = (await raw.request("tasks/get", {"taskId": "f-2"}))["result"]
            assert got["status"] == "failed"  # the final is an error: isError: true
            assert "pomodoro_already_active" in got["statusMessage"]
            payload = (await raw.request("tasks/result", {"taskId": "f-2"}))["result"]
            assert payload["isError"] is True
            assert payload["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": "f-2"}
            # the extension's methods are not served on this revision
            update = await raw.request("tasks/update", {"taskId": "f-2", "inputResponses": {}})
            assert update["error"]["code"] == mt.METHOD_NOT_FOUND

    run_on(tmp_path, trust, pomodoro_bundle, main)
