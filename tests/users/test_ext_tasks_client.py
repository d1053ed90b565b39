"""`lineup serve` driven by the MCP tasks extension's own requester,
`@modelcontextprotocol/ext-tasks` on the `@modelcontextprotocol/client` SDK (SPEC 13.2: the
2026-07-28 tasks extension, SEP-2663), through `ext_tasks/requester.mjs`.

The requester runs once for the module against the pomodoro template (as `lineup init` makes
it) with a `--db` of its own, and reports what it saw in one JSON line: a focus called as a
task and followed until the Host started it, a second focus in the same conversation (a final
error), the extension's cancel and update, a hand-off of the running task, a server restart,
the task resumed from its reference, the focus ended with `pomodoro interrupt` (an event, so
no test waits on a real-clock deadline), the task settled, and a plain replay by call_id.

The requester's packages come from LINEUP_EXT_TASKS_DIR, a folder where `npm ci` ran on
`ext_tasks/package.json` and `package-lock.json` (`.ci/run` does it); without it the module
skips, except in CI (`CI` set), where it fails.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lineup_build.init import init_project
from tests.users.mcp_clients_kit import HERE, kill_strays, lineup_command

pytestmark = pytest.mark.slow

#: CI runs `npm ci` for ext_tasks/ into a folder and names it here (see .ci/run).
EXT_TASKS_ENV = "LINEUP_EXT_TASKS_DIR"
SOURCE = HERE / "ext_tasks"
PACKAGES = ("@modelcontextprotocol/ext-tasks", "@modelcontextprotocol/client")
CALL_ID = "io.lineup/call_id"
LINEUP_ERROR = "io.lineup/error"
TASKS = "io.modelcontextprotocol/tasks"
CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
FOCUS_ID = "ext-tasks-focus"  # the call_ids requester.mjs gives its two focus calls
SECOND_ID = "ext-tasks-second"
#: The whole run: two server starts (each with the client's server/discover probe on a
#: sibling process), a handful of polls at the server's 1 s interval.
RUN_S = 240.0


def _install_hint() -> str:
    return (
        f"{EXT_TASKS_ENV} is not set: run `npm ci` in a copy of {SOURCE.relative_to(HERE.parents[1])}"
        f" (package.json, package-lock.json) and set {EXT_TASKS_ENV} to that folder (.ci/run does)"
    )


def locate_requester() -> Path:
    """The folder with the requester's node_modules, requester.mjs copied in; skips (fails
    in CI) when there is none."""
    named = os.environ.get(EXT_TASKS_ENV)
    in_ci = bool(os.environ.get("CI"))
    why = None
    if shutil.which("node") is None:
        why = "node is not on PATH"
    elif not named:
        why = _install_hint()
    if why is not None:
        if in_ci:
            pytest.fail(f"the ext-tasks requester must run in CI: {why}")
        pytest.skip(why)
    assert named is not None
    folder = Path(named)
    for package in PACKAGES:
        assert (folder / "node_modules" / package / "package.json").is_file(), (
            f"{EXT_TASKS_ENV}={named} holds no node_modules/{package}"
        )
    script = folder / "requester.mjs"
    wanted = (SOURCE / "requester.mjs").read_bytes()
    if not script.exists() or script.read_bytes() != wanted:
        script.write_bytes(wanted)
    return folder


def test_the_pins_are_the_lock_files() -> None:
    """package.json pins exact versions, and package-lock.json resolves them."""
    manifest = json.loads((SOURCE / "package.json").read_text())
    lock = json.loads((SOURCE / "package-lock.json").read_text())
    assert manifest["dependencies"] == {
        "@modelcontextprotocol/client": "2.3.1",
        "@modelcontextprotocol/ext-tasks": "0.2.2",
    }
    for package, version in manifest["dependencies"].items():
        assert lock["packages"][f"node_modules/{package}"]["version"] == version
    assert "node_modules/" in (SOURCE / ".gitignore").read_text().split()


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One requester run: its JSON report (the servers' stderr is in `requester.log`)."""
    folder = locate_requester()
    root = tmp_path_factory.mktemp("ext-tasks")
    init_project(root / "focus", template="pomodoro")
    log = root / "requester.log"
    argv = ["node", str(folder / "requester.mjs"), lineup_command(), "serve", "focus"]
    argv += ["--db", str(root / "serve.db")]
    env = {**os.environ, "LINEUP_REQUESTER_TIMEOUT_MS": str(int((RUN_S - 30) * 1000))}
    with log.open("w") as err:
        proc = subprocess.Popen(
            argv,
            cwd=root,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            env=env,
            start_new_session=True,
        )
    try:
        try:
            out, _ = proc.communicate(timeout=RUN_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the requester ran over {RUN_S:.0f}s\n{log.read_text()[-3000:]}")
        lines = [line for line in out.splitlines() if line.strip()]
        assert lines, f"no report (exit {proc.returncode})\n{log.read_text()[-3000:]}"
        doc: dict[str, Any] = json.loads(lines[-1])
        assert not doc["errors"], f"{doc['errors']}\n{log.read_text()[-3000:]}"
        assert proc.returncode == 0, f"exit {proc.returncode}\n{log.read_text()[-3000:]}"
        yield doc
    finally:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        kill_strays(root)


def _wire(report: dict[str, Any], method: str, **params: Any) -> list[dict[str, Any]]:
    """The coordinator's exchanges of `method` whose params hold `params`."""
    return [
        w
        for w in report["wire"]
        if w["method"] == method
        and all((w.get("params") or {}).get(k) == v for k, v in params.items())
    ]


def test_the_requester_negotiates_the_extension(report: dict[str, Any]) -> None:
    # both server starts: the 2026-07-28 revision, where tasks are the extension
    assert report["connections"] == [{"protocol": "2026-07-28", "era": "modern"}] * 2
    assert report["generation"] == "v2"  # ext-tasks saw the server's extension, not legacy tasks
    assert report["capabilities"]["execution"] is True
    # every request of the extension's own path opted in, per request
    assert report["wire"]
    for exchange in report["wire"]:
        caps = exchange["params"]["_meta"][CLIENT_CAPABILITIES]
        assert caps["extensions"] == {TASKS: {}}, exchange


def test_a_long_running_call_is_a_task_that_goes_working_then_completed(
    report: dict[str, Any],
) -> None:
    focus = report["focus"]
    assert focus["kind"] == "task" and focus["task_id"] == FOCUS_ID  # task id = call_id
    (created,) = [
        w for w in _wire(report, "tools/call") if w["params"]["_meta"][CALL_ID] == FOCUS_ID
    ]
    answer = created["answer"]["result"]
    assert answer["resultType"] == "task" and answer["taskId"] == FOCUS_ID
    assert answer["_meta"][CALL_ID] == FOCUS_ID
    assert "result" not in answer and "content" not in answer  # a receipt, never the result
    sequence = [s["status"] for s in focus["statuses"] + report["resumed"]["statuses"]]
    assert sequence[-1] == "completed" and set(sequence[:-1]) == {"working"}, sequence
    assert focus["statuses"][-1]["message"].startswith("started"), focus
    assert report["resumed"]["outcome"] == "completed"


def test_the_task_result_is_what_the_tool_answers(report: dict[str, Any]) -> None:
    result = report["resumed"]["result"]
    replay = report["replay"]  # a plain tools/call by the same call_id: the stored final
    assert "resultType" not in replay or replay["resultType"] == "complete", replay
    assert result["isError"] is False and not replay.get("isError")
    assert result["structuredContent"] == replay["structuredContent"]
    assert result["content"] == replay["content"]
    assert result["_meta"][CALL_ID] == replay["_meta"][CALL_ID] == FOCUS_ID
    envelope = result["structuredContent"]
    assert envelope["status"] == "final" and envelope["call_id"] == FOCUS_ID
    assert envelope["result"]["status"] == "interrupted"  # ended by pomodoro interrupt
    assert report["interrupt"]["structuredContent"] == {"status": "interrupted"}
    assert json.loads(result["content"][0]["text"]) == envelope


def test_an_error_final_is_a_completed_task_with_its_code(report: dict[str, Any]) -> None:
    second = report["second"]
    assert second["kind"] == "task" and second["task_id"] == SECOND_ID
    # SPEC 13.2, as the extension says: `failed` is for protocol errors only; a tool's
    # final error is a completed task whose result has isError
    assert second["outcome"] == "completed", second
    assert [s["status"] for s in second["statuses"]] == ["completed"], second
    result = second["result"]
    assert result["isError"] is True
    assert result["_meta"][LINEUP_ERROR]["code"] == "pomodoro_already_active"
    assert result["_meta"][CALL_ID] == SECOND_ID
    assert "pomodoro_already_active" in result["content"][0]["text"]


def test_cancel_and_update_are_refused_and_the_focus_runs_on(report: dict[str, Any]) -> None:
    assert report["capabilities"]["cancellation"] is True  # the extension offers cancel...
    cancel = report["cancel"]
    assert cancel["ok"] is False, cancel  # ...and lineup refuses it (SPEC 10, 13.2)
    assert cancel["error"]["code"] == -32602 and "interrupt" in cancel["error"]["message"]
    update = report["update"]
    assert update["ok"] is False and update["error"]["code"] == -32602, update
    assert report["after_cancel"]["status"] == "working", report["after_cancel"]
    # the requester's own cancels (on close too) never ended the focus: it was still
    # working after the restart, until pomodoro interrupt. A cancel sent while the
    # connection closes may get no answer, or the client's own "Connection closed"
    # (-32000); every one the server answered is a refusal.
    answered = [e for e in _wire(report, "tasks/cancel") if "answer" in e]
    from_server = [e for e in answered if not _closed_locally(e["answer"])]
    assert from_server, report
    for exchange in from_server:
        assert exchange["answer"]["error"]["code"] == -32602, exchange
    assert report["resumed"]["statuses"][0]["status"] == "working"


def _closed_locally(answer: dict[str, Any]) -> bool:
    """The client's own answer to a request it could not send (its connection closed)."""
    error = answer.get("error") or {}
    return error.get("code") == -32000 and error.get("message") == "Connection closed"


def test_the_task_is_resumed_after_a_restart(report: dict[str, Any]) -> None:
    resumed = report["resumed"]
    assert resumed["kind"] == "task" and resumed["error"] is None, resumed
    gets = _wire(report, "tasks/get", taskId=FOCUS_ID)
    assert gets and gets[-1]["answer"]["result"]["status"] == "completed"
    assert gets[-1]["answer"]["result"]["resultType"] == "complete"
