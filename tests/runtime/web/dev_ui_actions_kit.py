"""What the tests of `lineup dev`'s Surface bridge share: a dev server running the todo
app (fixture `dev`), an item, a Binding, a bridge connection and its answers to an `act`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lineup_build.init import init_project
from lineup_runtime_lite import VirtualClock
from lineup_runtime_lite.web import Binding
from lineup_runtime_lite.web.browser import DevServer
from tests.runtime.serve_kit import address


@pytest.fixture()
def dev(tmp_path: Path) -> Iterator[DevServer]:
    project = tmp_path / "todo"
    init_project(project, template="todo")
    server = DevServer.start(project, clock=VirtualClock(), watch=False, db=tmp_path / "dev.db")
    try:
        yield server
    finally:
        server.stop()


def _item(dev: DevServer, title: str = "buy milk", conversation: str = "conv") -> str:
    msg = dev.rt.call(f"add-{conversation}-{title}", conversation, "todo.add", {"title": title})
    if msg["stage"] == "accepted":
        dev.rt.settle()
    return str(msg["call_id"])


def _binding(dev: DevServer, conversation: str = "conv") -> Binding:
    [s] = [s for s in dev.rt.sessions("todo") if s["conversation_id"] == conversation]
    binding: Binding = dev.host.surface_token(s["instance"])
    return binding


def _connect(dev: DevServer, token: str) -> Any:
    from websockets.sync.client import connect
    from websockets.typing import Origin

    host, port = address(dev.urls.surface_origin)
    return connect(f"ws://{host}:{port}/_lineup/bridge?token={token}", origin=Origin("null"))


def _answers(ws: Any, msg: dict[str, Any]) -> list[dict[str, Any]]:
    """Every answer to `msg` up to its last (an error or an outcome)."""
    ws.send(json.dumps(msg))
    out: list[dict[str, Any]] = []
    while True:
        answer = json.loads(ws.recv(timeout=10))
        if answer.get("id") != msg["id"] or "sub" in answer:
            continue
        out.append(answer)
        if "error" in answer or "outcome" in answer or "result" in answer:
            return out


def _act(i: int, name: str, params: dict[str, Any], seq: int, **extra: Any) -> dict[str, Any]:
    return {
        "id": i,
        "op": "act",
        "name": name,
        "params": params,
        "client": "c1",
        "seq": seq,
        **extra,
    }
