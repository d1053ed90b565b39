"""`lineup dev` cannot be starved either (SPEC 13.2's HTTP limits on both of its origins):
slow heads and idle strangers are closed on the Host origin and the Surface origin while
the Host page and a Surface are served, and a Surface's bridge (a WebSocket) outlives the
head and body timers. Under `--isolation session` the dev Host serves as well.

No browser is needed here: raw sockets, `urllib` and the `websockets` client."""

from __future__ import annotations

import json
import socket
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lineup_build.init import init_project
from lineup_runtime_lite import VirtualClock
from lineup_runtime_lite.internals import engine_of
from lineup_runtime_lite.serve import HttpLimits
from lineup_runtime_lite.web.browser import DevServer
from tests.runtime.serve_kit import address, socket_closed
from tests.sandbox_kit import poll

pytest.importorskip("websockets", reason="the web extra (websockets) is not installed")

LIMITS = HttpLimits(head_s=0.3, body_s=0.3, unauthenticated=8)


@pytest.fixture()
def dev(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[DevServer]:
    init_project(tmp_path / "todo", template="todo")
    options: dict[str, Any] = getattr(request, "param", {})
    server = DevServer.start(
        tmp_path / "todo", clock=VirtualClock(), watch=False, limits=LIMITS, **options
    )
    try:
        yield server
    finally:
        server.stop()


def _page(dev: DevServer) -> int:
    token = dev.host.host_token
    req = urllib.request.Request(
        dev.urls.host_origin + "/", headers={"Cookie": f"lineup_dev_token={token}"}
    )
    with urllib.request.urlopen(req, timeout=10) as answer:
        return int(answer.status)


def _instance(dev: DevServer) -> str:
    msg = dev.rt.call("c1", "conv", "todo.add", {"title": "milk"})
    if msg["stage"] == "accepted":
        dev.rt.settle()
    (session,) = dev.rt.sessions("todo")
    return str(session["instance"])


def test_slow_heads_on_both_origins_are_closed_while_the_host_page_is_served(
    dev: DevServer,
) -> None:
    slow = [
        socket.create_connection(address(origin), timeout=5)
        for origin in (dev.urls.host_origin, dev.urls.surface_origin)
        for _ in range(20)
    ]
    try:
        for s in slow:
            s.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        assert _page(dev) == 200
        assert poll(lambda: all(socket_closed(s) for s in slow), within_s=10)
    finally:
        for s in slow:
            s.close()


def test_a_surface_bridge_outlives_the_head_and_body_timers(dev: DevServer) -> None:
    from websockets.sync.client import connect
    from websockets.typing import Origin

    binding = dev.host.surface_token(_instance(dev))
    host, port = address(dev.urls.surface_origin)
    with connect(
        f"ws://{host}:{port}/_lineup/bridge?token={binding.token}", origin=Origin("null")
    ) as ws:
        started = time.monotonic()
        while time.monotonic() - started < 1.0:  # several head and body timeouts
            time.sleep(0.05)
        ws.send(json.dumps({"id": 1, "op": "get"}))
        answer = json.loads(ws.recv(timeout=10))
    assert answer["id"] == 1 and answer["result"]["data"] is not None, answer


@pytest.mark.parametrize("dev", [{"isolation": "session"}], indirect=True)
def test_the_dev_host_serves_under_session_isolation(dev: DevServer) -> None:
    _instance(dev)
    msg = dev.rt.call("c2", "other", "todo.add", {"title": "eggs"})
    if msg["stage"] == "accepted":
        dev.rt.settle()
    assert len(engine_of(dev.rt).workers) == 2  # one worker per App session
    assert _page(dev) == 200
