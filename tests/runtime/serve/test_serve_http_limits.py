"""`lineup serve --http` cannot be starved (SPEC 13.2, HTTP limits): connections that never
finish their head, never send their body, idle, or never authenticate are closed below the
ASGI layer while a legitimate client (the real `mcp` client over streamable HTTP) is served,
and a request in progress — a long-running answer — outlives the idle timeout.

The limits are set small here (fractions of a second) so the tests poll for their effect
within a bounded loop; the defaults (10 s, 30 s, 60 s, 64) are asserted on their own.
"""

from __future__ import annotations

import resource
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp.types as mt
import pytest

from lineup_build.trust import TrustStore
from lineup_runtime_lite import HostSimulator, Runtime, VirtualClock
from lineup_runtime_lite.internals import raise_descriptor_limit
from lineup_runtime_lite.serve import Bridge, HttpLimits, ServeOptions
from tests.runtime.serve_kit import (
    TOKEN,
    HttpServer,
    address,
    advance,
    call_meta,
    http_session,
    socket_closed,
)
from tests.sandbox_kit import poll

QUICK = ServeOptions(poll_s=0.01, heartbeat_s=0.05)
CALL_ID = "io.lineup/call_id"


@pytest.fixture()
def served(
    tmp_path: Path, trust: TrustStore, pomodoro_bundle: Path, request: pytest.FixtureRequest
) -> Iterator[tuple[HttpServer, Runtime, VirtualClock]]:
    limits: HttpLimits = getattr(request, "param", HttpLimits())
    clock = VirtualClock()
    rt = Runtime.open(tmp_path / "rt.db", trust=trust, clock=clock, host=HostSimulator("auto"))
    rt.install(pomodoro_bundle)
    server = HttpServer(Bridge(rt, QUICK), limits=limits).start()
    try:
        yield server, rt, clock
    finally:
        server.stop()
        rt.close()


def _connect(url: str, first: bytes = b"") -> socket.socket:
    s = socket.create_connection(address(url), timeout=5)
    if first:
        s.sendall(first)
    return s


def _tools(url: str) -> list[str]:
    async def main() -> list[str]:
        with anyio.fail_after(30):
            async with http_session(url) as session:
                return [t.name for t in (await session.list_tools()).tools]

    return anyio.run(main)


PARTIAL_HEAD = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "


@pytest.mark.parametrize("served", [HttpLimits(head_s=0.3)], indirect=True)
def test_slowloris_heads_are_closed_while_a_legitimate_client_is_served(
    served: tuple[HttpServer, Runtime, VirtualClock],
) -> None:
    server, _, _ = served
    slow = [_connect(server.url, PARTIAL_HEAD) for _ in range(40)]
    try:
        assert "pomodoro-start" in _tools(server.url)  # served while they hang
        for s in slow:  # keep trickling bytes: the head timer runs from accept regardless
            s.sendall(b"a")
        assert poll(lambda: all(socket_closed(s) for s in slow), within_s=10)
    finally:
        for s in slow:
            s.close()


@pytest.mark.parametrize("served", [HttpLimits(body_s=0.3)], indirect=True)
def test_a_body_that_never_arrives_issocket_closed(
    served: tuple[HttpServer, Runtime, VirtualClock],
) -> None:
    server, _, _ = served
    head = (
        b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Authorization: Bearer " + TOKEN.encode() + b"\r\nContent-Length: 1000\r\n\r\n{"
    )
    s = _connect(server.url, head)
    try:
        assert poll(lambda: socket_closed(s), within_s=10)
    finally:
        s.close()


@pytest.mark.parametrize("served", [HttpLimits(head_s=60, unauthenticated=8)], indirect=True)
def test_idle_strangers_never_hold_the_slots_an_authenticated_client_needs(
    served: tuple[HttpServer, Runtime, VirtualClock],
) -> None:
    server, _, _ = served
    idle = [_connect(server.url) for _ in range(30)]  # connect, then say nothing
    try:
        assert "pomodoro-start" in _tools(server.url)
        # only the newest 8 strangers (at most) are still open; the older were closed
        assert poll(lambda: sum(not socket_closed(s) for s in idle) <= 8, within_s=10)
        assert all(socket_closed(s) for s in idle[:20])
    finally:
        for s in idle:
            s.close()


@pytest.mark.parametrize("served", [HttpLimits(idle_s=0.3)], indirect=True)
def test_an_idle_kept_alive_connection_is_closed_after_its_response(
    served: tuple[HttpServer, Runtime, VirtualClock],
) -> None:
    server, _, _ = served
    request = b"GET /.well-known/oauth-protected-resource HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"  # any complete request: a 404 answer, then the connection is kept alive
    s = _connect(server.url, request)
    try:
        s.settimeout(10)
        assert s.recv(65536).startswith(b"HTTP/1.1 404")
        assert poll(lambda: socket_closed(s), within_s=10)
    finally:
        s.close()


@pytest.mark.parametrize("served", [HttpLimits(head_s=0.2, idle_s=0.2)], indirect=True)
def test_a_long_running_answer_outlives_the_idle_timeout(
    served: tuple[HttpServer, Runtime, VirtualClock],
) -> None:
    server, rt, clock = served

    async def main() -> dict[str, Any]:
        with anyio.fail_after(60):
            async with http_session(server.url) as session:
                waited: dict[str, Any] = {}

                async def fetch() -> None:  # held open up to --max-wait (45 s) for its final
                    meta = call_meta({CALL_ID: "focus-1"})
                    res = await session.call_tool("pomodoro-start", {"minutes": 1}, meta=meta)
                    assert isinstance(res, mt.CallToolResult) and res.structured_content, res
                    waited.update(res.structured_content)

                async with anyio.create_task_group() as tg:
                    tg.start_soon(fetch)
                    started = time.monotonic()
                    # the request stays in progress for many idle timeouts...
                    while time.monotonic() - started < 1.0:
                        await anyio.sleep(0.05)
                    assert not waited
                    assert poll(lambda: "started" in _stages(rt, "focus-1"))
                    await advance(clock, 60_000)  # ...until the focus ends
                return waited

    final = anyio.run(main)
    assert final["status"] == "final" and final["result"]["status"] == "completed", final


def _stages(rt: Runtime, call_id: str) -> list[str]:
    record = rt.call_record(call_id)
    return [m["stage"] for m in record["messages"]] if record else []


def test_the_defaults_are_spec_13_2s() -> None:
    assert HttpLimits() == HttpLimits(head_s=10, body_s=30, idle_s=60, unauthenticated=64)


def test_the_descriptor_soft_limit_is_raised_to_the_hard_one() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(1024, hard), hard))
        assert raise_descriptor_limit() == resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        if hard != resource.RLIM_INFINITY:
            assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] == hard
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
