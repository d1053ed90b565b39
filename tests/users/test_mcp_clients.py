"""`lineup serve` on the template projects, driven by four real MCP clients with their
default options, all at once: the official Python SDK, fastmcp's client, the TypeScript SDK
and the MCP Inspector CLI (SPEC 10 and 13.2). Each client has its own projects (from
`init_project`, as `lineup init` makes them) and its own `--db`; each case has a deadline.

Per client: tools/list, a plain call, an error, a replay by call_id; then a long-running
`pomodoro start` for one minute, which a client's default timeout (60 s for the TypeScript SDK
and the Inspector) would kill unless the server answers `pending` first (`--max-wait`, 45 s),
its final through `lineup-result`, and a replay that answers the stored final. Tool names are
looked up in tools/list, never spelled dotted or dashed here.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from mcp import MCPError

from lineup_build.init import init_project
from tests.users.mcp_clients_kit import (
    Answer,
    Driver,
    FastMcpDriver,
    InspectorDriver,
    PythonSdkDriver,
    TsSdkDriver,
    closing,
    kill_strays,
    locate_inspector,
    locate_ts_client,
)

pytestmark = pytest.mark.slow

CALL_ID = "io.lineup/call_id"
CLIENTS = ("python-sdk", "fastmcp", "ts-sdk", "inspector")
#: The cases that need SPEC 13.2's max-wait answer and `lineup-result` (issue 19).
LONG_CASES = ("long_running", "lineup_result", "long_replay")
CASES = ("list", "plain", "error", "replay", *LONG_CASES)

#: Deadlines (seconds). A first request builds both projects and starts the runtime.
OPEN_S = 90.0
QUICK_S = 60.0
#: The longest the server may hold a call without a progress token (`--max-wait` default)...
MAX_WAIT_S = 45
#: ...below the 60 s the TypeScript SDK and the Inspector wait by default.
CLIENT_TIMEOUT_S = 60.0
FOCUS_MINUTES = 1
LONG_S = 90.0  # a call with a progress token is held until the focus ends (60 s)
RESULT_S = 150.0  # from the start call to lineup-result's final
SUITE_S = 420.0


@dataclass
class Outcome:
    ok: bool = False
    detail: str = "not run"
    seconds: float = 0.0


@dataclass
class ClientRun:
    """What one client's run recorded: per case, and the run's own time window."""

    client: str
    unavailable: str | None = None
    cases: dict[str, Outcome] = field(default_factory=lambda: {c: Outcome() for c in CASES})
    started: float = 0.0
    ended: float = 0.0
    log: Path | None = None


@dataclass(frozen=True)
class Suite:
    runs: dict[str, ClientRun]
    wall_s: float  # the four runs, at once


def _method(names: list[str], method: str) -> str:
    """The listed name of `method` (dotted or dashed, whichever the server lists)."""
    found = [n for n in names if n.replace("-", ".") == method]
    assert len(found) == 1, f"{method} is not listed once in {names}"
    return found[0]


class Scenario:
    """One client's cases, in order; a case that needs an earlier one's answer fails with it."""

    def __init__(self, driver: Driver, run: ClientRun) -> None:
        self.d = driver
        self.run = run
        self.names: list[str] = []
        self.long_call_id = ""
        self.long_final: dict[str, Any] | None = None
        self.long_name = ""

    def case(self, name: str, body: Callable[[], None], needs: tuple[str, ...] = ()) -> None:
        outcome = self.run.cases[name]
        failed = [n for n in needs if not self.run.cases[n].ok]
        if failed:
            outcome.detail = f"not run: {', '.join(failed)} failed"
            return
        start = time.monotonic()
        try:
            body()
        except Exception as exc:
            outcome.detail = f"{type(exc).__name__}: {exc}"
        else:
            outcome.ok, outcome.detail = True, "ok"
        outcome.seconds = time.monotonic() - start

    def call(self, method: str, args: dict[str, Any], call_id: str = "", *, s: float) -> Answer:
        meta = {CALL_ID: call_id} if call_id else None
        name = method if method == "lineup-result" else _method(self.names, method)
        return self.d.call(name, args, meta, s)

    def all(self) -> None:
        self.case("list", self.list_tools)
        self.case("plain", self.plain, needs=("list",))
        self.case("error", self.error, needs=("list",))
        self.case("replay", self.replay, needs=("list",))
        self.case("long_running", self.long_running, needs=("list",))
        self.case("lineup_result", self.lineup_result, needs=("long_running",))
        self.case("long_replay", self.long_replay, needs=("lineup_result",))

    def list_tools(self) -> None:
        self.names = self.d.list_tools(OPEN_S)
        for method in ("todo.add", "todo.list", "todo.complete", "pomodoro.start"):
            _method(self.names, method)

    def plain(self) -> None:
        got = self.call("todo.add", {"title": f"milk for {self.run.client}"}, s=QUICK_S)
        assert got.raised is None and not got.is_error, got
        assert got.structured is not None, got
        assert got.structured["item"]["title"] == f"milk for {self.run.client}", got
        assert got.meta.get(CALL_ID), f"no minted call_id in _meta: {got}"

    def error(self) -> None:
        got = self.call("todo.complete", {"item_id": "no-such-item"}, s=QUICK_S)
        assert got.raised is None and got.is_error, got
        assert "app.not_found" in got.text, got

    def replay(self) -> None:
        call_id = f"{self.run.client}-add-1"
        first = self.call("todo.add", {"title": "eggs"}, call_id, s=QUICK_S)
        assert first.raised is None and not first.is_error, first
        assert first.meta.get(CALL_ID) == call_id, first
        again = self.call("todo.add", {"title": "eggs"}, call_id, s=QUICK_S)
        assert again.raised is None and not again.is_error, again
        assert again.structured == first.structured, (first, again)
        listed = self.call("todo.list", {}, s=QUICK_S)
        assert listed.structured is not None, listed
        ids = [item["id"] for item in listed.structured["items"]]
        assert ids.count(call_id) == 1, ids  # the replay added nothing

    def long_running(self) -> None:
        start = time.monotonic()
        got = self.call("pomodoro.start", {"minutes": FOCUS_MINUTES}, s=LONG_S)
        took = time.monotonic() - start
        assert got.raised is None, f"{took:.0f}s: {got.raised}"
        assert not got.is_error, got
        envelope = got.structured
        assert envelope is not None, got
        call_id = got.meta.get(CALL_ID)
        assert call_id and envelope.get("call_id") == call_id, got
        self.long_call_id = str(call_id)
        if self.d.sends_progress_token:
            # held until the final, with progress (SPEC 10): the focus ran its minute
            assert envelope["status"] == "final", envelope
            assert envelope["result"]["status"] == "completed", envelope
            self.long_final = envelope
        else:
            # held at most --max-wait, then a receipt: never the business result [TIS2-03]
            assert took < CLIENT_TIMEOUT_S, f"answered after {took:.0f}s"
            assert envelope["status"] == "pending", envelope
            assert "result" not in envelope and envelope.get("ends_at"), envelope
            assert isinstance(envelope.get("stage"), str), envelope

    def lineup_result(self) -> None:
        deadline = time.monotonic() + RESULT_S
        args = {"call_id": self.long_call_id, "wait_s": MAX_WAIT_S}
        while True:
            got = self.call("lineup-result", args, s=CLIENT_TIMEOUT_S)
            assert got.raised is None and not got.is_error, got
            envelope = got.structured
            assert envelope is not None and envelope["call_id"] == self.long_call_id, got
            if envelope["status"] == "final":
                break
            assert envelope["status"] == "pending" and "result" not in envelope, envelope
            assert time.monotonic() < deadline, f"still pending after {RESULT_S:.0f}s: {envelope}"
        assert envelope["result"]["status"] == "completed", envelope
        if self.long_final is not None:
            assert envelope == self.long_final
        self.long_final = envelope

    def long_replay(self) -> None:
        got = self.call("pomodoro.start", {"minutes": FOCUS_MINUTES}, self.long_call_id, s=QUICK_S)
        assert got.raised is None and not got.is_error, got
        assert got.structured == self.long_final, (got, self.long_final)
        assert got.meta.get(CALL_ID) == self.long_call_id, got


def _projects(root: Path) -> Path:
    root.mkdir(parents=True)
    init_project(root / "todo", template="todo")
    init_project(root / "pomodoro", template="pomodoro")
    return root


def _open(client: str, root: Path, log: Path, where: Any) -> Driver:
    args = ["serve", "todo", "pomodoro", "--db", str(root / "serve.db")]
    if client == "python-sdk":
        return PythonSdkDriver(root, args, log, OPEN_S)
    if client == "fastmcp":
        return FastMcpDriver(root, args, log, OPEN_S)
    if client == "ts-sdk":
        return TsSdkDriver(where, root, args, log, OPEN_S)
    return InspectorDriver(where, root, args, log)


def _locate(client: str) -> tuple[Any, str | None]:
    """Where the client is (for the Node ones), or why it cannot run here."""
    if client == "ts-sdk":
        found = locate_ts_client()
        return (None, found) if isinstance(found, str) else (found, None)
    if client == "inspector":
        binary = locate_inspector()
        why = "LINEUP_MCP_INSPECTOR is not set (.ci/run installs the Inspector and sets it)"
        return (binary, None) if binary else (None, why)
    return None, None


def _drive(run: ClientRun, root: Path, where: Any) -> None:
    run.started = time.monotonic()
    run.log = root / "clients.log"
    try:
        opened = time.monotonic()
        with closing(_open(run.client, root, run.log, where)) as driver:
            scenario = Scenario(driver, run)
            scenario.all()
    except Exception as exc:  # the client could not start: every case says so
        for outcome in run.cases.values():
            if outcome.detail == "not run":
                outcome.detail = f"client did not open ({time.monotonic() - opened:.0f}s): {exc}"
    finally:
        run.ended = time.monotonic()


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Suite]:
    """The four clients' runs, at once, each in a thread of its own."""
    root = tmp_path_factory.mktemp("clients")
    in_ci = os.environ.get("CI") == "true"
    results = {c: ClientRun(c) for c in CLIENTS}
    found: dict[str, Any] = {}
    for client in CLIENTS:  # all located (npm ci, if need be) before any starts
        where, why = _locate(client)
        if why is not None:
            assert not in_ci, f"{client} must run in CI: {why}"
            results[client].unavailable = why
        else:
            found[client] = (where, _projects(root / client))
    threads = []
    begun = time.monotonic()
    try:
        for client, (where, folder) in found.items():
            thread = threading.Thread(
                target=_drive, args=(results[client], folder, where), name=client, daemon=True
            )
            thread.start()
            threads.append(thread)
        for thread in threads:
            thread.join(timeout=max(0.0, begun + SUITE_S - time.monotonic()))
        late = [t.name for t in threads if t.is_alive()]
        assert not late, f"still running after {SUITE_S:.0f}s: {late}"
        wall = time.monotonic() - begun
        yield Suite(results, wall)
    finally:
        kill_strays(root)


def _log_tail(run: ClientRun) -> str:
    if run.log is None or not run.log.exists():
        return ""
    return "\n--- client and server stderr (tail) ---\n" + run.log.read_text()[-3000:]


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("case", CASES)
def test_a_default_client(suite: Suite, client: str, case: str) -> None:
    run = suite.runs[client]
    if run.unavailable is not None:
        pytest.skip(f"{client}: {run.unavailable}")
    outcome = run.cases[case]
    assert outcome.ok, f"{client} {case} ({outcome.seconds:.1f}s): {outcome.detail}{_log_tail(run)}"


def test_the_clients_ran_at_once(suite: Suite) -> None:
    ran = [r for r in suite.runs.values() if r.unavailable is None]
    assert ran
    print(f"four MCP clients at once: {suite.wall_s:.1f}s")  # shown with -s / -rA
    assert max(r.started for r in ran) < min(r.ended for r in ran), "the runs did not overlap"


def test_a_second_default_serve_of_one_folder_is_runtime_locked(tmp_path: Path) -> None:
    folder = _projects(tmp_path / "one")
    args = ["serve", "todo"]  # no --db: the state is todo/.lineup/serve.db
    first_log, second_log = tmp_path / "first.log", tmp_path / "second.log"
    try:
        with closing(PythonSdkDriver(folder, args, first_log, OPEN_S)) as first:
            assert "todo.add" in [n.replace("-", ".") for n in first.list_tools(QUICK_S)]
            with pytest.raises(ExceptionGroup) as refused:  # the SDK's task groups
                PythonSdkDriver(folder, args, second_log, OPEN_S).close()
            assert refused.group_contains(MCPError, match="Connection closed")
            said = second_log.read_text()
            assert "runtime_locked" in said and "--db" in said, said
            assert "Traceback" not in said, said
            # the first server is unharmed
            added = first.call(
                _method(first.list_tools(QUICK_S), "todo.add"), {"title": "a"}, None, QUICK_S
            )
            assert not added.is_error, added
    finally:
        kill_strays(tmp_path)
