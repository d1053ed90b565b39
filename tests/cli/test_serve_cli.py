"""`lineup serve` as a real process: the Python MCP client over stdio and over streamable
HTTP, a restart on the same database, the MCP Inspector CLI, and the missing extra."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp.types as mt
import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from lineup_build.init import init_project
from tests.cli_kit import LINEUP, serving_http
from tests.runtime.serve_kit import call_meta, http_session, until

CALL_ID = "io.lineup/call_id"
#: CI installs the MCP Inspector and names its binary here (see .ci/run).
INSPECTOR_ENV = "LINEUP_MCP_INSPECTOR"


@pytest.fixture(scope="module")
def apps(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("serve")
    init_project(root / "todo", template="todo", scope="todo")
    init_project(root / "focus", template="pomodoro", scope="pomodoro")
    return root


def _params(apps: Path, db: Path, *extra: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=LINEUP[0],
        args=[*LINEUP[1:], "serve", "todo", "focus", "--db", str(db), *extra],
        cwd=str(apps),
    )


class Progress:
    def __init__(self) -> None:
        self.messages: list[str] = []

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.messages.append(message or "")


async def _first_session(s: ClientSession) -> dict[str, Any]:
    tools = {t.name for t in (await s.list_tools()).tools}
    assert tools == {
        "todo-add",
        "todo-list",
        "todo-complete",
        "pomodoro-start",
        "pomodoro-interrupt",
        "lineup-result",
    }
    seen = Progress()
    added = await s.call_tool(
        "todo-add", {"title": "milk"}, progress_callback=seen, meta=call_meta({CALL_ID: "add-1"})
    )
    assert not added.is_error and added.structured_content is not None
    assert seen.messages[:1] == ["accepted (activation starting) · call_id add-1"]
    assert "activation_ready" in seen.messages
    again = await s.call_tool("todo-add", {"title": "milk"}, meta=call_meta({CALL_ID: "add-1"}))
    assert again.structured_content == added.structured_content
    conflict = await s.call_tool("todo-add", {"title": "eggs"}, meta=call_meta({CALL_ID: "add-1"}))
    assert conflict.is_error and "call_id_conflict" in conflict.content[0].text  # type: ignore[union-attr]
    bad = await s.call_tool("todo-add", {"title": ""})
    assert bad.is_error and "at /title" in bad.content[0].text  # type: ignore[union-attr]
    failed = await s.call_tool("todo-complete", {"item_id": "nope"})
    assert failed.is_error and "app.not_found" in failed.content[0].text  # type: ignore[union-attr]

    # a long-running start over a real clock: receipts as progress, then its final
    focus = Progress()
    box: dict[str, mt.CallToolResult] = {}

    async def start() -> None:
        box["r"] = await s.call_tool(
            "pomodoro-start",
            {"minutes": 1},
            progress_callback=focus,
            meta=call_meta({CALL_ID: "f1"}),
        )

    async with anyio.create_task_group() as tg:
        tg.start_soon(start)
        await until(lambda: any(m.startswith("started (") for m in focus.messages))
        assert "r" not in box
        stop = await s.call_tool("pomodoro-interrupt", {})
        assert stop.structured_content == {"status": "interrupted"}
    result = box["r"]
    assert result.structured_content is not None
    assert result.structured_content["status"] == "final"
    assert result.structured_content["result"]["status"] == "interrupted"
    return dict(added.structured_content)


def test_stdio_serve_restart_keeps_state_and_replays(apps: Path, tmp_path: Path) -> None:
    db = tmp_path / "serve.db"
    errors = tmp_path / "stderr.txt"

    async def first() -> dict[str, Any]:
        with errors.open("w") as err:
            async with (
                stdio_client(_params(apps, db), errlog=err) as (r, w),
                ClientSession(r, w) as s,
            ):
                await s.initialize()
                return await _first_session(s)

    added = anyio.run(first)
    log = errors.read_text()
    assert f"state in {db.resolve()}" in log and "5 tools over stdio" in log
    # every mechanism is enforced on this machine kind: nothing about the sandbox by default
    assert "sandbox" not in log

    async def second() -> None:
        with errors.open("w") as err:
            async with (
                stdio_client(_params(apps, db, "-v"), errlog=err) as (r, w),
                ClientSession(r, w) as s,
            ):
                await s.initialize()
                again = await s.call_tool(
                    "todo-add", {"title": "milk"}, meta=call_meta({CALL_ID: "add-1"})
                )
                assert again.structured_content == added
                listing = await s.call_tool("todo-list", {})
                assert listing.structured_content is not None
                assert [i["id"] for i in listing.structured_content["items"]] == ["add-1"]
                done = await s.call_tool(
                    "pomodoro-start", {"minutes": 1}, meta=call_meta({CALL_ID: "f1"})
                )
                assert done.structured_content is not None
                assert done.structured_content["result"]["status"] == "interrupted"

    anyio.run(second)
    log = errors.read_text()
    assert "(unchanged)" in log
    assert "lineup serve: sandbox (best_effort): files: landlock" in log  # -v: what is enforced


@pytest.fixture()
def http_server(apps: Path, tmp_path: Path) -> Iterator[str]:
    args = ["todo", "focus", "--db", str(tmp_path / "h.db"), "--http", "127.0.0.1:0"]
    with serving_http(args, apps, "cli-token-0123456789") as served:
        assert served.url.startswith("http://127.0.0.1:"), served.url
        yield served.url


def test_http_serve_through_the_python_client(http_server: str) -> None:
    async def main() -> None:
        async with http_session(http_server, "cli-token-0123456789") as s:
            names = {t.name for t in (await s.list_tools()).tools}
            assert "todo-add" in names
            seen = Progress()
            added = await s.call_tool(
                "todo-add",
                {"title": "tea"},
                progress_callback=seen,
                meta=call_meta({CALL_ID: "h1"}),
            )
            assert not added.is_error
            assert seen.messages[0] == "accepted (activation starting) · call_id h1"
            again = await s.call_tool("todo-add", {"title": "tea"}, meta=call_meta({CALL_ID: "h1"}))
            assert again.structured_content == added.structured_content
            bad = await s.call_tool("pomodoro-start", {"minutes": "25"})
            assert bad.is_error and "at /minutes" in bad.content[0].text  # type: ignore[union-attr]

    anyio.run(main)


def test_without_the_extra_serve_says_how_to_install_it(apps: Path, tmp_path: Path) -> None:
    code = "import sys; sys.modules['mcp'] = None\nfrom lineup_build.cli import main; main()"
    done = subprocess.run(
        [sys.executable, "-c", code, "serve", "todo", "--db", str(tmp_path / "x.db")],
        cwd=apps,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    from lineup_sdk import __version__

    # install lines that work before the distribution is on an index: a checkout, a wheel
    assert "usage_invalid" in done.stderr and 'pip install ".[mcp]"' in done.stderr
    assert f'pip install "lineup_sdk-{__version__}-py3-none-any.whl[mcp]"' in done.stderr
    assert "lineup-sdk[" not in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "x.db").exists()


def test_bad_arguments_are_usage_errors(apps: Path, tmp_path: Path) -> None:
    for extra in (["--http", "nonsense"], ["--tool-names", "underscore"]):
        done = subprocess.run(
            [*LINEUP, "serve", "todo", "--db", str(tmp_path / "x.db"), *extra],
            cwd=apps,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 2, done.stderr
        assert "usage_invalid" in done.stderr and "Traceback" not in done.stderr


def _inspector() -> str:
    path = os.environ.get(INSPECTOR_ENV)
    if not path:
        pytest.skip(f"{INSPECTOR_ENV} is not set (CI installs the MCP Inspector and sets it)")
    assert Path(path).exists(), f"{INSPECTOR_ENV}={path} does not exist"
    return path


def test_the_mcp_inspector_lists_and_calls(apps: Path, tmp_path: Path) -> None:
    inspector = _inspector()
    server = [*LINEUP, "serve", "todo", "focus", "--db", str(tmp_path / "i.db")]

    def run(*method: str) -> Any:
        done = subprocess.run(
            [inspector, "--cli", "--format", "json", "-q", *server, *method],
            cwd=apps,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, (done.stdout, done.stderr)
        doc = json.loads(done.stdout)
        return doc.get("result", doc)  # the Inspector wraps the MCP result

    listed = run("--method", "tools/list")
    names = {t["name"] for t in listed["tools"]}
    assert {"todo-add", "pomodoro-start"} <= names
    called = run(
        "--method", "tools/call", "--tool-name", "todo-add", "--tool-args-json", '{"title":"milk"}'
    )
    assert called["structuredContent"]["item"]["title"] == "milk"
    assert not called.get("isError")


def test_the_runtime_and_the_cli_load_without_the_mcp_sdk() -> None:
    code = (
        "import sys, lineup_runtime_lite, lineup_build.cli._app\n"
        "assert 'mcp' not in sys.modules, sorted(m for m in sys.modules if m.startswith('mcp'))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


class _RawStdio:
    """JSON-RPC lines by hand to a `lineup serve` process (the SDK client cannot create
    tasks: it checks every `tools/call` answer as a `CallToolResult`)."""

    def __init__(self, apps: Path, db: Path, log: Path) -> None:
        self._err = log.open("a")
        self.proc = subprocess.Popen(
            [*LINEUP, "serve", "todo", "focus", "--db", str(db)],
            cwd=apps,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._err,
            text=True,
        )
        self._next = 0
        init = self.request(
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "0"},
            },
        )
        assert init["result"]["capabilities"]["tasks"] == {
            "list": {},  # tasks/list: the tasks of the asking conversation
            "requests": {"tools": {"call": {}}},
        }
        self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def _send(self, body: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(body) + "\n")
        self.proc.stdin.flush()

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self._next += 1
        self._send({"jsonrpc": "2.0", "id": self._next, "method": method, "params": params})
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            doc: dict[str, Any] = json.loads(line)
            if doc.get("id") == self._next:
                return doc
        raise AssertionError("the server closed stdout")

    def close(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()
        self._err.close()


def test_a_task_survives_a_restart_of_the_real_server(apps: Path, tmp_path: Path) -> None:
    import time

    db, log = tmp_path / "t.db", tmp_path / "stderr.txt"
    first = _RawStdio(apps, db, log)
    try:
        created = first.request(
            "tools/call",
            {
                "name": "pomodoro-start",
                "arguments": {"minutes": 1},
                "task": {},
                "_meta": {CALL_ID: "task-1"},
            },
        )
        assert created["result"]["task"]["taskId"] == "task-1"
        deadline = time.monotonic() + 30  # waits for an event (the Host confirming), not a deadline
        while True:
            got = first.request("tasks/get", {"taskId": "task-1"})["result"]
            if got["statusMessage"].startswith("started"):
                break
            assert time.monotonic() < deadline, got
            time.sleep(0.02)
    finally:
        first.close()
    second = _RawStdio(apps, db, log)
    try:
        got = second.request("tasks/get", {"taskId": "task-1"})["result"]
        assert got["status"] == "working" and got["statusMessage"].startswith("started")
        stop = second.request("tools/call", {"name": "pomodoro-interrupt", "arguments": {}})
        assert stop["result"]["structuredContent"] == {"status": "interrupted"}
        done = second.request("tasks/get", {"taskId": "task-1"})["result"]
        assert done["status"] == "completed"
        payload = second.request("tasks/result", {"taskId": "task-1"})["result"]
        assert payload["structuredContent"]["result"]["status"] == "interrupted"
    finally:
        second.close()


def test_stdio_from_a_terminal_falls_back_to_the_sdks_transport(apps: Path, tmp_path: Path) -> None:
    # the fast path needs pipes; a terminal (or a file) on stdin goes through the SDK's own
    # transport, with the same answers
    import pty
    import select

    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    lines = [
        init,
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [*LINEUP, "serve", "todo", "--db", str(tmp_path / "f.db")],
        cwd=apps,
        stdin=slave,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        bufsize=0,
    )
    os.close(slave)
    try:
        for doc in lines:
            os.write(master, json.dumps(doc).encode() + b"\n")
        assert proc.stdout is not None
        out = b""
        while out.count(b"\n") < 2:  # bounded: a server that never answers fails, not hangs
            ready, _, _ = select.select([proc.stdout], [], [], 60)
            assert ready, f"no answer from lineup serve within 60 s: {out!r}"
            chunk = os.read(proc.stdout.fileno(), 65536)
            assert chunk, f"lineup serve closed its stdout: {out!r}"
            out += chunk
        answers = [json.loads(line) for line in out.splitlines()[:2]]
    finally:
        os.close(master)
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
    assert [a.get("id") for a in answers] == [1, 2]
    assert {t["name"] for t in answers[1]["result"]["tools"]} >= {"todo-add", "todo-list"}


def test_a_stdin_line_over_the_limit_is_a_parse_error_and_the_server_goes_on(
    apps: Path, tmp_path: Path
) -> None:
    import threading

    from lineup_runtime_lite.internals import MAX_LINE

    proc = subprocess.Popen(
        [*LINEUP, "serve", "todo", "--db", str(tmp_path / "rt.db")],
        cwd=str(apps),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdin is not None and proc.stdout is not None
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    huge = b'{"jsonrpc": "2.0", "id": 2, "method": "ping", "params": {"x": "' + b"x" * MAX_LINE

    def feed() -> None:
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(init).encode() + b"\n")
        proc.stdin.flush()
        proc.stdin.write(huge + b'"}}\n')
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 3, "method": "ping"}).encode() + b"\n")
        proc.stdin.flush()

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    try:
        answers = [json.loads(proc.stdout.readline()) for _ in range(3)]
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)
        proc.stdout.close()
        writer.join(timeout=60)
    assert answers[0]["id"] == 1 and "result" in answers[0]
    assert answers[1] == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32700, "message": f"Parse error: a line over {MAX_LINE} bytes"},
    }
    assert answers[2]["id"] == 3 and answers[2]["result"] == {}
