"""`tests.users.bearer_proxy`, the conformance suite's loopback proxy, on its own: in front
of an upstream that answers 401 without the bearer token (as `lineup serve --http` does),
it adds the token — in place of any the client sent — and forwards the request as sent
(method, path, query, body, `Host`, `Origin`), and hands the answer back as it came
(status, headers, an SSE stream; cut after N events when asked). Two loopback servers in
threads, stopped by each test."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from typing import Any

import httpx2 as httpx
import pytest
import uvicorn

from tests.users.bearer_proxy import proxy_app

TOKEN = "t0ken"
EVENTS = [f"id: {n}\ndata: event {n}\n\n" for n in (1, 2, 3)]


async def upstream(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """401 without `Authorization: Bearer TOKEN`; else `/sse` streams three events and any
    other path answers 418 with what it received, as JSON."""
    if scope["type"] == "lifespan":
        while (message := await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    headers: dict[str, list[str]] = {}
    for k, v in scope["headers"]:
        headers.setdefault(k.decode("latin-1"), []).append(v.decode("latin-1"))
    if headers.get("authorization") != [f"Bearer {TOKEN}"]:
        await send({"type": "http.response.start", "status": 401, "headers": []})
        await send({"type": "http.response.body", "body": b"no token"})
        return
    if scope["path"] == "/sse":
        start = [(b"content-type", b"text/event-stream")]
        await send({"type": "http.response.start", "status": 200, "headers": start})
        for event in EVENTS:
            await send({"type": "http.response.body", "body": event.encode(), "more_body": True})
        await send({"type": "http.response.body", "body": b""})
        return
    seen = {
        "method": scope["method"],
        "path": scope["raw_path"].decode(),
        "query": scope["query_string"].decode(),
        "body": body.decode(),
        "headers": headers,
    }
    start = [(b"content-type", b"application/json"), (b"x-upstream", b"yes")]
    await send({"type": "http.response.start", "status": 418, "headers": start})
    await send({"type": "http.response.body", "body": json.dumps(seen).encode()})


class Served:
    """An ASGI app on a loopback port, in a thread."""

    def __init__(self, app: Any) -> None:
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        config = uvicorn.Config(app, log_level="warning", lifespan="on")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True
        )
        self._thread.start()
        while not self._server.started:  # an event (the thread's start), bounded below
            self._thread.join(0.01)
            assert self._thread.is_alive(), "the server did not start"

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=30)
        self._sock.close()


@pytest.fixture()
def up() -> Iterator[Served]:
    served = Served(upstream)
    try:
        yield served
    finally:
        served.stop()


def proxied(up: Served, **options: Any) -> Served:
    return Served(proxy_app(up.url, TOKEN, **options))


def test_the_proxy_adds_the_token_and_forwards_the_request_as_sent(up: Served) -> None:
    assert httpx.get(up.url + "/mcp").status_code == 401  # the upstream needs the token
    proxy = proxied(up)
    try:
        sent = {"origin": "http://localhost:5173", "authorization": "Bearer wrong"}
        got = httpx.post(proxy.url + "/mcp/x?a=1&b=2", content=b'{"n": 1}', headers=sent)
    finally:
        proxy.stop()
    # the answer as it came: status and headers
    assert got.status_code == 418 and got.headers["x-upstream"] == "yes"
    seen = got.json()
    assert (seen["method"], seen["path"], seen["query"]) == ("POST", "/mcp/x", "a=1&b=2")
    assert seen["body"] == '{"n": 1}'
    headers = seen["headers"]
    assert headers["authorization"] == [f"Bearer {TOKEN}"]  # the client's own replaced
    assert headers["origin"] == ["http://localhost:5173"]
    assert headers["host"] == [proxy.url.removeprefix("http://")]  # as the client sent it


def test_the_proxy_streams_an_sse_answer_and_cuts_a_post_stream_when_asked(up: Served) -> None:
    whole = proxied(up)
    try:
        assert httpx.post(whole.url + "/sse").text == "".join(EVENTS)
    finally:
        whole.stop()
    cutting = proxied(up, cut_post_streams_after=2)
    try:
        with httpx.stream("POST", cutting.url + "/sse") as got:
            assert got.headers["content-type"] == "text/event-stream"
            text = "".join(got.iter_text())
        assert text == "".join(EVENTS[:2])  # the first two events, then the stream ends
        assert httpx.get(cutting.url + "/sse").text == "".join(EVENTS)  # a GET is not cut
    finally:
        cutting.stop()
