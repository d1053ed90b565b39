"""Several nodes on one PostgreSQL database, for the coordination tests: a node with a short
lease, polling for an event, a call's final message, and who owns which App session."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg

from lineup_build.trust import TrustStore
from lineup_runtime_lite import Runtime
from lineup_runtime_lite.core.messages import AgentMessage

LEASE_S = 1.0


FINAL = ("result", "error")


def node(url: str, tmp_path: Path, trust: TrustStore, name: str, **options: Any) -> Runtime:
    return Runtime.open(
        url,
        trust=trust,
        apps_dir=tmp_path / f"apps-{name}",
        node_id=name,
        node_lease_s=LEASE_S,
        **options,
    )


def until(check: Callable[[], Any], *, timeout: float = 30.0, what: str = "") -> Any:
    """Poll `check` until it returns something true (an event, not a deadline: the timeout
    only bounds a broken test)."""
    end = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        assert time.monotonic() < end, f"never happened: {what or check}"
        time.sleep(0.01)


def final_of(rt: Runtime, call_id: str) -> AgentMessage | None:
    found = [m for m in rt.outbox.all() if m["call_id"] == call_id and m["stage"] in FINAL]
    assert len(found) <= 1, found
    return found[0] if found else None


def owners(url: str) -> dict[str, str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT app_session_id, node_id FROM owners").fetchall()
    return {str(a): str(b) for a, b in rows}
