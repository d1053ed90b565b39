"""The 2026-07-28 tasks extension (SEP-2663) against real `lineup serve` processes: raw
JSON-RPC on the per-request envelope over stdio, the MCP Inspector CLI on
`--protocol-era modern` (the `@modelcontextprotocol/ext-tasks` requester drives it in
tests/users/test_ext_tasks_client.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from lineup_build.init import init_project

CALL_ID = "io.lineup/call_id"
TASKS = "io.modelcontextprotocol/tasks"
LINEUP = [sys.executable, "-c", "from lineup_build.cli import main; main()"]
INSPECTOR_ENV = "LINEUP_MCP_INSPECTOR"


@pytest.fixture(scope="module")
def apps(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("serve-tasks")
    init_project(root / "focus", template="pomodoro")
    return root


def _missing(what: str) -> None:
    """Skip locally, fail in CI: CI installs every client these tests drive."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{what} (CI must install it, see .ci/run)")
    pytest.skip(what)


class ModernStdio:
    """JSON-RPC lines on 2026-07-28 to a `lineup serve` process: each request carries the
    envelope; `tasks` says whether it declares the tasks extension."""

    def __init__(self, apps: Path, db: Path, log: Path) -> None:
        self._err = log.open("a")
        self.proc = subprocess.Popen(
            [*LINEUP, "serve", "focus", "--db", str(db)],
            cwd=apps,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._err,
            text=True,
        )
        self._next = 0

    def request(
        self, method: str, params: dict[str, Any] | None = None, *, tasks: bool = True
    ) -> dict[str, Any]:
        self._next += 1
        params = dict(params or {})
        params["_meta"] = {
            **params.get("_meta", {}),
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": (
                {"extensions": {TASKS: {}}} if tasks else {}
            ),
        }
        body = {"jsonrpc": "2.0", "id": self._next, "method": method, "params": params}
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(body) + "\n")
        self.proc.stdin.flush()
        for line in self.proc.stdout:
            doc: dict[str, Any] = json.loads(line)
            if doc.get("id") == self._next:
                return doc
        raise AssertionError("the server closed stdout")

    def tool_name(self, method: str) -> str:
        for t in self.request("tools/list")["result"]["tools"]:
            if t["name"] in (method, method.replace(".", "-")):
                return str(t["name"])
        raise AssertionError(f"{method} is not listed")

    def wait_started(self, task_id: str) -> dict[str, Any]:
        deadline = time.monotonic() + 30  # waits for an event (the Host confirming)
        while True:
            got: dict[str, Any] = self.request("tasks/get", {"taskId": task_id})["result"]
            if got["statusMessage"].startswith("started"):
                return got
            assert time.monotonic() < deadline, got
            time.sleep(0.02)

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


def test_the_inspector_on_modern_gets_the_plain_result_and_tasks_survive_a_restart(
    apps: Path, tmp_path: Path
) -> None:
    inspector = os.environ.get(INSPECTOR_ENV)
    if not inspector or not Path(inspector).exists():
        _missing(f"{INSPECTOR_ENV} does not name the MCP Inspector")
    assert inspector is not None
    db, log = tmp_path / "t.db", tmp_path / "stderr.txt"
    first = ModernStdio(apps, db, log)
    try:
        start = first.tool_name("pomodoro.start")
        call = {"name": start, "arguments": {"minutes": 25}, "_meta": {CALL_ID: "ext-1"}}
        created = first.request("tools/call", call)["result"]
        assert created["resultType"] == "task" and created["taskId"] == "ext-1"
        first.wait_started("ext-1")
    finally:
        first.close()

    # the Inspector does not opt in on its own tools/call: it gets the plain result — here
    # the final error of a second focus in the same (default) conversation
    def inspect(*method: str, exit_code: int = 0) -> Any:
        done = subprocess.run(
            [
                *(inspector, "--cli", "--format", "json", "-q", "--protocol-era", "modern"),
                *(*LINEUP, "serve", "focus", "--db", str(db), *method),
            ],
            cwd=apps,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == exit_code, (done.stdout, done.stderr)
        doc = json.loads(done.stdout)
        return doc.get("result", doc)

    listed = inspect("--method", "tools/list")
    assert all("execution" not in t for t in listed["tools"])  # no 2025-11-25 taskSupport
    again = inspect(
        "--method",
        "tools/call",
        "--tool-name",
        start,
        "--tool-args-json",
        '{"minutes":5}',
        exit_code=5,  # the Inspector's exit code for a result with isError: true
    )
    assert again["resultType"] == "complete" and "taskId" not in again
    assert again["isError"] is True
    assert again["_meta"]["io.lineup/error"]["code"] == "pomodoro_already_active"

    second = ModernStdio(apps, db, log)  # a restarted server answers from the database
    try:
        got = second.request("tasks/get", {"taskId": "ext-1"})["result"]
        assert got["status"] == "working" and got["statusMessage"].startswith("started")
        refused = second.request("tasks/get", {"taskId": "ext-1"}, tasks=False)
        assert refused["error"]["code"] == -32003
        update = second.request("tasks/update", {"taskId": "ext-1", "inputResponses": {}})
        assert update["error"]["code"] == -32602
        stop = second.request("tools/call", {"name": second.tool_name("pomodoro.interrupt")})
        assert stop["result"]["structuredContent"] == {"status": "interrupted"}
        done = second.request("tasks/get", {"taskId": "ext-1"})["result"]
        assert done["status"] == "completed" and done["result"]["isError"] is False
        # a task's result is the long-running tool's envelope, its business result inside
        assert done["result"]["structuredContent"]["status"] == "final"
        assert done["result"]["structuredContent"]["result"]["status"] == "interrupted"
    finally:
        second.close()
