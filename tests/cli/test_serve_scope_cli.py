"""`lineup serve` as a real process serves what it is told (SPEC 16.3, 16.5): exactly the
apps named, even over a state where more are installed (stdio and HTTP, through the Python
MCP client); `--all-installed`; the start line and its `--json` shape; and `--http` beyond
loopback only with `--allow-remote` (a warning), answering the `--allowed-host` names."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp.types as mt
import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

from lineup_build.init import init_project
from tests.cli_kit import LINEUP, lineup_process, serving_http, start_lines
from tests.runtime.serve_kit import call_meta, http_session

CALL_ID = "io.lineup/call_id"
TOKEN = "scope-token-0123456789"
BOTH = {
    "todo-add",
    "todo-list",
    "todo-complete",
    "pomodoro-start",
    "pomodoro-interrupt",
    "lineup-result",
}
TODO_ONLY = {"todo-add", "todo-list", "todo-complete", "lineup-result"}


@pytest.fixture(scope="module")
def apps(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("serve-scope")
    init_project(root / "todo", template="todo", scope="todo")
    init_project(root / "focus", template="pomodoro", scope="pomodoro")
    return root


def _stdio(apps: Path, *args: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=LINEUP[0], args=[*LINEUP[1:], "serve", *args], cwd=str(apps)
    )


def _stdio_session(apps: Path, errors: Path, args: list[str], body: Any) -> Any:
    async def main() -> Any:
        with errors.open("w") as err:
            async with (
                stdio_client(_stdio(apps, *args), errlog=err) as (r, w),
                ClientSession(r, w) as s,
            ):
                await s.initialize()
                return await body(s)

    return anyio.run(main)


async def _names(s: ClientSession) -> set[str]:
    return {t.name for t in (await s.list_tools()).tools}


async def _ignore(progress: float, total: float | None, message: str | None) -> None:
    return None


async def _refused_focus(s: ClientSession) -> None:
    """pomodoro is installed in the state but not served: not callable, its call not found."""
    for name in ("pomodoro-start", "pomodoro.start"):  # either spelling
        with pytest.raises(MCPError) as caught:
            await s.call_tool(name, {"minutes": 1})
        assert caught.value.error.code == mt.INVALID_PARAMS
    gone = await s.call_tool("lineup-result", {"call_id": "f-first"})
    assert gone.is_error and gone.meta is not None
    assert gone.meta["io.lineup/error"]["code"] == "call_not_found"
    added = await s.call_tool("todo-add", {"title": "tea"}, progress_callback=_ignore)
    assert not added.is_error  # held to its final by the progress token


async def _first(s: ClientSession) -> None:
    """Served with both apps: a pending focus call (max-wait 0 answers at once)."""
    assert await _names(s) == BOTH
    started = await s.call_tool(
        "pomodoro-start", {"minutes": 1}, meta=call_meta({CALL_ID: "f-first"})
    )
    assert not started.is_error and started.structured_content is not None
    assert started.structured_content["status"] == "pending"


def test_stdio_serve_with_fewer_apps_serves_only_those(apps: Path, tmp_path: Path) -> None:
    db = str(tmp_path / "s.db")
    errors = tmp_path / "stderr.txt"
    _stdio_session(apps, errors, ["todo", "focus", "--db", db, "--max-wait", "0"], _first)
    first = errors.read_text()
    assert "pomodoro 1.0.0 (2 tools), todo 1.0.0 (3 tools): 5 tools over stdio" in first

    async def second(s: ClientSession) -> None:
        assert await _names(s) == TODO_ONLY
        await _refused_focus(s)

    _stdio_session(apps, errors, ["todo", "--db", db, "--max-wait", "0", "--json"], second)
    said = errors.read_text()
    assert "todo 1.0.0 (3 tools): 3 tools over stdio" in said
    assert "pomodoro" not in said.split("state in", 1)[1].split("\n", 1)[1]
    doc = json.loads(next(line for line in said.splitlines() if line.startswith("{")))
    assert doc["ok"] is True and doc["transport"] == "stdio" and doc["url"] is None
    assert doc["apps"] == [{"scope": "todo", "version": "1.0.0", "tools": 3}]
    assert doc["tools"] == 3 and doc["schema_version"]

    async def everything(s: ClientSession) -> None:
        assert await _names(s) == BOTH
        fetched = await s.call_tool("lineup-result", {"call_id": "f-first"})
        assert not fetched.is_error  # served again: its call is found

    # --all-installed: every installed app, with or without PATHs
    _stdio_session(apps, errors, ["--all-installed", "--db", db, "--max-wait", "0"], everything)
    assert "pomodoro 1.0.0 (2 tools), todo 1.0.0 (3 tools): 5 tools over stdio" in (
        errors.read_text()
    )


@contextmanager
def _http_server(apps: Path, *args: str) -> Iterator[tuple[str, list[str]]]:
    """A `lineup serve --http` process: `(url, the stderr lines up to its token line)`."""
    with serving_http(list(args), apps, TOKEN) as served:
        assert served.url, served.text
        yield served.url, served.said


def test_http_serve_with_fewer_apps_serves_only_those(apps: Path, tmp_path: Path) -> None:
    db = str(tmp_path / "h.db")
    with _http_server(
        apps, "todo", "focus", "--db", db, "--max-wait", "0", "--http", "127.0.0.1:0"
    ) as (
        url,
        _,
    ):

        async def first() -> None:
            async with http_session(url, TOKEN) as s:
                await _first(s)

        anyio.run(first)
    with _http_server(apps, "todo", "--db", db, "--max-wait", "0", "--http", "127.0.0.1:0") as (
        url,
        said,
    ):
        assert any(
            line.strip().endswith(f"todo 1.0.0 (3 tools): 3 tools at {url}") for line in said
        )

        async def second() -> None:
            async with http_session(url, TOKEN) as s:
                assert await _names(s) == TODO_ONLY
                await _refused_focus(s)

        anyio.run(second)


def test_a_bind_beyond_loopback_needs_allow_remote(apps: Path, tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    for extra in ([], ["--json"]):
        done = subprocess.run(
            [*LINEUP, "serve", "todo", "--db", str(db), "--http", "0.0.0.0:0", *extra],
            cwd=apps,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 2, done.stderr
        assert "Traceback" not in done.stderr
        if extra:
            error = json.loads(done.stdout.strip().splitlines()[-1])
            assert error["error"]["code"] == "usage_invalid", error
        else:
            assert "usage_invalid" in done.stderr and "--allow-remote" in done.stderr
    assert not db.exists()  # refused before any state was opened
    for bad in (["--allowed-host", "a b:80"], ["--allow-remote"]):  # the latter without --http
        done = subprocess.run(
            [*LINEUP, "serve", "todo", "--db", str(db), *bad],
            cwd=apps,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 2 and "usage_invalid" in done.stderr, done.stderr


def test_allow_remote_warns_answers_loopback_and_the_allowed_hosts(
    apps: Path, tmp_path: Path
) -> None:
    db = str(tmp_path / "w.db")
    args = ["todo", "--db", db, "--http", "0.0.0.0:0", "--allow-remote"]
    with _http_server(apps, *args, "--allowed-host", "mcp.example.test") as (url, said):
        assert any("in clear without TLS" in line and "TLS proxy" in line for line in said)
        port = url.rsplit(":", 1)[1].split("/", 1)[0]
        loopback = f"http://127.0.0.1:{port}/mcp"

        async def listed() -> set[str]:
            async with http_session(loopback, TOKEN) as s:
                return await _names(s)

        assert anyio.run(listed) == TODO_ONLY  # loopback answered (was 421)
        init = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "0"},
            },
        }
        headers = {
            "Authorization": f"Bearer {TOKEN}",
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
        }
        with httpx2.Client(timeout=30) as client:
            for name, status in (
                (f"mcp.example.test:{port}", 200),
                (f"evil.example.test:{port}", 421),
            ):
                got = client.post(loopback, json=init, headers={**headers, "Host": name})
                assert got.status_code == status, (name, got.status_code, got.text)


def test_lineup_dev_serves_only_its_project_over_mcp(apps: Path, tmp_path: Path) -> None:
    """An app installed earlier into the state `lineup dev` is given is not on its `/mcp`."""
    import re

    db = tmp_path / "dev.db"

    async def install_both(s: ClientSession) -> None:
        assert await _names(s) == BOTH

    _stdio_session(apps, tmp_path / "serve.txt", ["todo", "focus", "--db", str(db)], install_both)
    mcp_line = re.compile(r"MCP: (\S+)\s+\(Authorization: Bearer (\S+)\)")
    with lineup_process(["dev", "todo", "--db", str(db), "--no-open", "--port", "0"], apps) as proc:
        said = start_lines(proc, lambda line: mcp_line.search(line) is not None)
        found = mcp_line.search(said[-1]) if said else None
        assert found, "".join(said)
        url, token = found.group(1), found.group(2)

        async def listed() -> set[str]:
            async with http_session(url, token) as s:
                return await _names(s)

        assert anyio.run(listed) == TODO_ONLY
