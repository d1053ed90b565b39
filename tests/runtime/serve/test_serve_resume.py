"""Resumable response streams (SPEC 18.1): a `tools/call` stream over streamable HTTP opens
with a priming event (an id, empty data, `retry`) on every revision up to 2025-11-25,
2025-03-26 included; each event's id encodes `(message index, call_id)`; a client whose
stream dropped mid-call `GET`s with `Last-Event-ID` and receives every remaining event once,
none twice, the final last — replayed from the facts already stored. After a restart the old
session id answers 404, and a re-initialized client's repeat `tools/call` with the same
`io.lineup/call_id` replays every stage once, then the final.

A long-running pomodoro on a virtual clock, driven by raw HTTP (the SSE ids and `retry` are
what is tested, and a dropped connection is a closed response)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from lineup_build.build import build_project
from lineup_build.init import init_project
from lineup_build.signing import SigningKey
from lineup_build.trust import TrustStore
from lineup_runtime_lite import HostSimulator, Runtime, VirtualClock
from lineup_runtime_lite.internals import RETRY_MS
from lineup_runtime_lite.serve import Bridge, ServeOptions
from tests.runtime.serve_kit import TOKEN, HttpServer, advance, open_runtime

OPTIONS = ServeOptions(heartbeat_s=30.0, poll_s=0.01)
CALL_ID = "io.lineup/call_id"
MIN = 60_000


@pytest.fixture(scope="module")
def focus_bundle(tmp_path_factory: pytest.TempPathFactory, rt_key: SigningKey) -> Path:
    root = tmp_path_factory.mktemp("focus-resume") / "pomodoro"
    init_project(root, template="pomodoro")
    result = build_project(root, signing_key=rt_key)
    assert result.ok and result.bundle is not None
    return result.bundle


class Http:
    """Raw streamable HTTP with the bearer token: one MCP session."""

    def __init__(self, client: httpx2.AsyncClient, url: str, version: str) -> None:
        self.client, self.url, self.version = client, url, version
        self.session = ""

    def headers(self, **extra: str) -> dict[str, str]:
        out = {
            "Authorization": f"Bearer {TOKEN}",
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
            "MCP-Protocol-Version": self.version,
        }
        if self.session:
            out["Mcp-Session-Id"] = self.session
        return {**out, **extra}

    async def initialize(self) -> None:
        body = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": self.version,
                "capabilities": {},
                "clientInfo": {"name": "resume", "version": "0"},
            },
        }
        got = await self.client.post(self.url, json=body, headers=self.headers())
        assert got.status_code == 200, got.text
        self.session = got.headers["mcp-session-id"]
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        sent = await self.client.post(self.url, json=note, headers=self.headers())
        assert sent.status_code == 202

    @asynccontextmanager
    async def call(
        self, request_id: int, name: str, args: dict[str, Any], meta: dict[str, Any]
    ) -> AsyncIterator[AsyncIterator[dict[str, Any]]]:
        body = {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "tools/call",
            "params": {"name": name, "arguments": args, "_meta": meta},
        }
        async with self.client.stream(
            "POST", self.url, json=body, headers=self.headers()
        ) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            yield events(response)

    @asynccontextmanager
    async def resume(self, last_event_id: str) -> AsyncIterator[AsyncIterator[dict[str, Any]]]:
        headers = self.headers(**{"Last-Event-ID": last_event_id})
        async with self.client.stream("GET", self.url, headers=headers) as response:
            assert response.status_code == 200, await response.aread()
            yield events(response)


async def events(response: httpx2.Response) -> AsyncIterator[dict[str, Any]]:
    """SSE events as `{id, data, retry}` (data parsed as JSON when not empty)."""
    event: dict[str, Any] = {}
    async for line in response.aiter_lines():
        if not line:
            if event:
                yield event
            event = {}
            continue
        key, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if key == "data":
            event["data"] = json.loads(value) if value else ""
        elif key in ("id", "retry"):
            event[key] = value
    if event:
        yield event


@asynccontextmanager
async def _session(url: str, version: str = "2025-11-25") -> AsyncIterator[Http]:
    """An initialized session on a client of its own."""
    async with httpx2.AsyncClient(timeout=httpx2.Timeout(30)) as client:
        http = Http(client, url, version)
        await http.initialize()
        yield http


async def _all(
    opened: AbstractAsyncContextManager[AsyncIterator[dict[str, Any]]],
    seconds: float = 30,
    meanwhile: Callable[[], Coroutine[Any, Any, None]] | None = None,
) -> list[dict[str, Any]]:
    """Every event of a call's or a resume's stream, to its end (within `seconds`), with
    `meanwhile` run alongside once the stream is open."""
    got: list[dict[str, Any]] = []
    with anyio.fail_after(seconds):
        async with opened as stream, anyio.create_task_group() as tg:
            if meanwhile is not None:
                tg.start_soon(meanwhile)
            async for event in stream:
                got.append(event)
    return got


def _stages(rt: Runtime, call_id: str) -> list[str]:
    """The call's stored stages but the final (none before the call exists)."""
    record = rt.call_record(call_id)
    if record is None:
        return []
    return [str(m["stage"]) for m in record["messages"] if m["kind"] not in ("result", "error")]


def _stage_of(event: dict[str, Any]) -> str:
    return str(event["data"]["params"]["message"]).split(" · ")[0].split(" (")[0]


def _run(tmp_path: Path, trust: TrustStore, bundle: Path, main: Any) -> None:
    rt, clock = open_runtime(tmp_path / "rt.db", trust, [bundle])
    server = HttpServer(Bridge(rt, OPTIONS)).start()
    try:
        anyio.run(main, rt, clock, server.url)
    finally:
        server.stop()
        rt.close()


@pytest.mark.parametrize("version", ["2025-03-26", "2025-06-18", "2025-11-25"])
def test_a_dropped_stream_resumes_with_every_remaining_event_once_the_final_last(
    tmp_path: Path, trust: TrustStore, focus_bundle: Path, version: str
) -> None:
    async def main(rt: Runtime, clock: VirtualClock, url: str) -> None:
        async with _session(url, version) as http:
            meta = {"progressToken": "p1", CALL_ID: "focus-1"}
            seen: list[dict[str, Any]] = []
            async with http.call(7, "pomodoro-start", {"minutes": 1}, meta) as stream:
                async for event in stream:
                    seen.append(event)
                    if event["data"] and _stage_of(event) == "accepted":
                        break  # the connection drops here, mid-call
            priming = seen[0]
            assert priming == {"id": "0.focus-1", "data": "", "retry": str(RETRY_MS)}
            assert seen[1]["id"] == "1.focus-1"
            # the call goes on while no stream is open: the Host starts the focus, it ends
            with anyio.fail_after(30):
                while "started" not in _stages(rt, "focus-1"):
                    await anyio.sleep(0.01)
            await advance(clock, MIN)
            with anyio.fail_after(30):
                while (rec := rt.call_record("focus-1")) is None or rec["messages"][-1][
                    "kind"
                ] not in ("result", "error"):
                    await anyio.sleep(0.01)
            replayed = await _all(http.resume(seen[-1]["id"]))
            stored = _stages(rt, "focus-1")
            got = [e for e in replayed if e["data"]]
            assert got, "nothing replayed"
            final = got[-1]["data"]
            assert final["id"] == 7 and final["result"]["structuredContent"]["status"] == "final"
            progress = [_stage_of(e) for e in got[:-1]]
            before = [_stage_of(e) for e in seen[1:]]
            assert before + progress == stored  # every stage once, none twice, in order
            ids = [int(e["id"].split(".")[0]) for e in seen[1:] + got]
            assert ids == sorted(ids) and len(set(ids)) == len(ids)
            assert got[-1]["id"] == f"{len(stored) + 1}.focus-1"
            # resuming after the final replays nothing more than the final (ids are exact)
            again = await _all(http.resume(got[-1]["id"]))
            assert [e for e in again if e["data"]] == [got[-1]]

    _run(tmp_path, trust, focus_bundle, main)


def test_a_resume_while_the_call_runs_follows_it_to_the_final(
    tmp_path: Path, trust: TrustStore, focus_bundle: Path
) -> None:
    async def main(rt: Runtime, clock: VirtualClock, url: str) -> None:
        async with _session(url) as http:
            meta = {"progressToken": "p2", CALL_ID: "focus-2"}
            async with http.call(3, "pomodoro-start", {"minutes": 1}, meta) as stream:
                async for event in stream:
                    last = event["id"]
                    if event["data"] and _stage_of(event) == "started":
                        break

            async def finish() -> None:
                await advance(clock, MIN)

            replayed = await _all(http.resume(last), meanwhile=finish)
            got = [e for e in replayed if e["data"]]
            assert got and got[-1]["data"]["id"] == 3
            assert got[-1]["data"]["result"]["structuredContent"]["status"] == "final"
            assert all("result" not in e["data"] for e in got[:-1])

    _run(tmp_path, trust, focus_bundle, main)


def test_a_call_id_with_a_line_break_never_reaches_an_event_id(
    tmp_path: Path, trust: TrustStore, focus_bundle: Path
) -> None:
    async def main(rt: Runtime, clock: VirtualClock, url: str) -> None:
        async with _session(url) as http:
            meta = {"progressToken": "p5", CALL_ID: "x\nevent: forged\ndata: {}"}
            got = await _all(http.call(5, "pomodoro-start", {"minutes": 1}, meta))
            assert all("\n" not in e.get("id", "") and "forged" not in e.get("id", "") for e in got)
            (answer,) = [e for e in got if e["data"]]
            assert answer["data"]["result"]["isError"] is True  # invalid_params, as always
            assert "invalid_params" in json.dumps(answer["data"])

    _run(tmp_path, trust, focus_bundle, main)


def test_an_unknown_event_id_replays_nothing(
    tmp_path: Path, trust: TrustStore, focus_bundle: Path
) -> None:
    async def main(rt: Runtime, clock: VirtualClock, url: str) -> None:
        async with _session(url) as http:
            for last in ("3.someone-elses-call", "garbage", "x1"):
                got = await _all(http.resume(last), seconds=10)
                assert [e for e in got if e.get("data")] == []

    _run(tmp_path, trust, focus_bundle, main)


def test_another_session_cannot_resume_a_sessions_call(
    tmp_path: Path, trust: TrustStore, focus_bundle: Path
) -> None:
    async def main(rt: Runtime, clock: VirtualClock, url: str) -> None:
        async with httpx2.AsyncClient(timeout=httpx2.Timeout(30)) as client:
            owner, other = Http(client, url, "2025-11-25"), Http(client, url, "2025-11-25")
            await owner.initialize()
            await other.initialize()
            meta = {"progressToken": "p4", CALL_ID: "focus-4"}
            async with owner.call(1, "pomodoro-start", {"minutes": 1}, meta) as stream:
                async for event in stream:
                    if event["data"]:
                        break
            got = await _all(other.resume("0.focus-4"), seconds=10)
            assert [e for e in got if e.get("data")] == []

    _run(tmp_path, trust, focus_bundle, main)


def test_after_a_restart_the_old_session_is_404_and_a_repeat_call_replays_every_stage_once(
    tmp_path: Path, trust: TrustStore, focus_bundle: Path
) -> None:
    db = tmp_path / "rt.db"
    rt, clock = open_runtime(db, trust, [focus_bundle])
    server = HttpServer(Bridge(rt, OPTIONS)).start()
    old_session = ""
    meta = {"progressToken": "p3", CALL_ID: "focus-3"}

    async def first() -> None:
        nonlocal old_session
        async with _session(server.url) as http:
            old_session = http.session
            async with http.call(1, "pomodoro-start", {"minutes": 1}, meta) as stream:
                async for event in stream:
                    if event["data"] and _stage_of(event) == "started":
                        break

    try:
        anyio.run(first)
    finally:
        server.stop()
        rt.close()
    clock = VirtualClock(clock.now_ms())
    rt = Runtime.open(db, trust=trust, clock=clock, host=HostSimulator(policy="auto"))
    server = HttpServer(Bridge(rt, OPTIONS)).start()

    async def second() -> None:
        async with httpx2.AsyncClient(timeout=httpx2.Timeout(30)) as client:
            http = Http(client, server.url, "2025-11-25")
            http.session = old_session
            gone = await client.get(
                server.url, headers=http.headers(**{"Last-Event-ID": "1.focus-3"})
            )
            assert gone.status_code == 404
            http.session = ""
            await http.initialize()

            # the focus ends only once the repeat call replayed its `started` stage: ended
            # before the repeat arrives, the call is final and answers with the final alone
            got: list[dict[str, Any]] = []
            ended = False
            with anyio.fail_after(30):
                async with (
                    http.call(2, "pomodoro-start", {"minutes": 1}, meta) as stream,
                    anyio.create_task_group() as tg,
                ):
                    async for event in stream:
                        got.append(event)
                        note = event.get("data") or {}
                        if not ended and "method" in note and _stage_of(event) == "started":
                            ended = True
                            tg.start_soon(advance, clock, MIN)
            data = [e for e in got if e["data"]]
            assert data[-1]["data"]["id"] == 2
            assert data[-1]["data"]["result"]["structuredContent"]["status"] == "final"
            stages = [_stage_of(e) for e in data[:-1]]
            assert stages == _stages(rt, "focus-3")

    try:
        anyio.run(second)
    finally:
        server.stop()
        rt.close()


class Proxy:
    """`tests.users.bearer_proxy` in a thread, cutting every POST stream after `cut` events."""

    def __init__(self, upstream: str, cut: int) -> None:
        import socket
        import threading

        import uvicorn

        from tests.users.bearer_proxy import proxy_app

        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}/mcp"
        app = proxy_app(upstream.removesuffix("/mcp"), TOKEN, cut_post_streams_after=cut)
        config = uvicorn.Config(app, log_level="warning", lifespan="on")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=30)
        self._sock.close()


class Seen:
    def __init__(self) -> None:
        self.messages: list[str] = []

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.messages.append(message or "")


def test_the_python_client_resumes_a_dropped_stream_by_itself(
    tmp_path: Path, trust: TrustStore, focus_bundle: Path
) -> None:
    """The official Python client, its POST stream cut after the priming event and the first
    progress: it reconnects with `Last-Event-ID` (after the server's `retry`) and gets every
    remaining stage once, then the final."""
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    from tests.runtime.serve_kit import call_meta

    async def main(rt: Runtime, clock: VirtualClock, url: str) -> None:
        proxy = Proxy(url, cut=2)
        try:
            client = httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=120))
            async with (
                client,
                streamable_http_client(proxy.url, http_client=client) as (r, w),
                ClientSession(r, w) as s,
            ):
                await s.initialize()
                seen = Seen()
                async with anyio.create_task_group() as tg:

                    async def finish() -> None:
                        while "started" not in _stages(rt, "focus-py"):
                            await anyio.sleep(0.01)
                        await advance(clock, MIN)

                    tg.start_soon(finish)
                    with anyio.fail_after(60):
                        done = await s.call_tool(
                            "pomodoro-start",
                            {"minutes": 1},
                            progress_callback=seen,
                            meta=call_meta({CALL_ID: "focus-py"}),
                        )
                assert not done.is_error
                assert done.structured_content is not None
                assert done.structured_content["status"] == "final"
                stages = [m.split(" · ")[0].split(" (")[0] for m in seen.messages]
                assert stages == _stages(rt, "focus-py")  # each once, in order
        finally:
            proxy.stop()

    _run(tmp_path, trust, focus_bundle, main)
