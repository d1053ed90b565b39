"""What the containment tests share: the hostile app's scope and version, a call's final
AgentMessage, its result or error code, the app's worker and its log."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lineup_runtime_lite import Runtime
from lineup_runtime_lite.core.messages import AgentMessage
from lineup_runtime_lite.internals import engine_of
from lineup_runtime_lite.processes.proctree import tree_pids
from tests.sandbox_kit import poll

SCOPE, VERSION = "hostile", "1.0.0"


_ids = itertools.count(1)


def final(rt: Runtime, conversation: str, method: str, params: Any) -> AgentMessage:
    """Call `method` and return its final AgentMessage (activating the session if needed)."""
    call_id = f"c{next(_ids)}"
    msg = rt.call(call_id, conversation, method, params)
    if msg["stage"] == "accepted":
        rt.settle()
        found = [m for m in rt.outbox.all() if m["id"] in (f"{call_id}:result", f"{call_id}:error")]
        assert len(found) == 1, found
        msg = found[0]
    return msg


def result(rt: Runtime, conversation: str, method: str, params: Any | None = None) -> Any:
    msg = final(rt, conversation, method, params or {})
    assert msg["kind"] == "result", msg
    return msg["result"]


def error_code(msg: Mapping[str, Any]) -> str:
    assert msg["kind"] == "error", msg
    return str(msg["error"]["code"])


def worker(rt: Runtime, scope: str = SCOPE) -> Any:
    """The app version's worker (under `isolation="session"`: the one session worker up)."""
    workers = engine_of(rt).workers
    if (scope, VERSION) in workers:
        return workers[scope, VERSION]
    (only,) = [w for key, w in workers.items() if key[:2] == (scope, VERSION)]
    return only


def worker_of(rt: Runtime, conversation: str, scope: str = SCOPE) -> Any:
    """The worker serving `conversation` (its App session's under `isolation="session"`)."""
    workers = engine_of(rt).workers
    if (scope, VERSION) in workers:
        return workers[scope, VERSION]
    (sid,) = [
        s["app_session_id"]
        for s in rt.sessions(scope)
        if s["conversation_id"] == conversation and s["version"] == VERSION
    ]
    return workers[scope, VERSION, sid]


def host_pid(root: int, named: int) -> int:
    """The host's pid of the process in `root`'s tree that a worker named `named`, by what
    its own `/proc` says: a cold worker sees the host's `/proc` (the host's number), one
    forked from a warm image its image's procfs (the image namespace's number, the
    next-to-last of three in `NSpid`: host, image, the worker's own)."""
    for pid in tree_pids(root):
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        nspid = next((ln.split()[1:] for ln in status.splitlines() if ln.startswith("NSpid:")), [])
        if str(named) in (*nspid[:1], *(nspid[-2:-1] if len(nspid) >= 3 else ())):
            return pid
    raise AssertionError(f"no process {named} in the tree of {root}")


def log_path(rt: Runtime, scope: str = SCOPE) -> Path:
    return engine_of(rt).logs_dir / f"{scope}-{VERSION}.log"


def log_line(rt: Runtime, prefix: str) -> str | None:
    """The first worker-log line starting with `prefix`, polled for (bounded)."""

    def find() -> str | None:
        try:
            text = log_path(rt).read_text(errors="replace")
        except FileNotFoundError:
            return None
        return next((line for line in text.splitlines() if line.startswith(prefix)), None)

    found = poll(find)
    assert found is not None, f"no {prefix!r} line in the worker log"
    return str(found)


def needs_warm_image() -> None:
    """For a test of the warm image itself: a runtime without CAP_SYS_PTRACE (not run as
    root) never has one, its sessions start cold (that path is tested on its own), so the
    test skips there, saying so; CI runs as root and fails instead of skipping."""
    import os

    import pytest

    from lineup_sdk.sandbox.forks import CAP_SYS_PTRACE, has_capability

    if has_capability(CAP_SYS_PTRACE):
        return
    reason = "the warm image needs CAP_SYS_PTRACE (run as root); sessions start cold here"
    if os.environ.get("CI"):
        pytest.fail(f"{reason}: CI must run the warm-image tests", pytrace=False)
    pytest.skip(reason)
