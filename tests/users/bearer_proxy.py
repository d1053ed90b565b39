"""A loopback HTTP proxy that adds `Authorization: Bearer <token>` to every request and
forwards everything else as sent (method, path, body, `Host`, `Origin`), streaming each
answer back as it comes (SSE included). The MCP conformance suite sends no headers of its
own; this lets it test `lineup serve --http` as served, defaults untouched (SPEC 18.1).

Run: `python -m tests.users.bearer_proxy UPSTREAM_URL TOKEN` — it prints `listening on
http://127.0.0.1:PORT` on stdout once it listens, and serves until terminated.
"""

from __future__ import annotations

import socket
import sys
from typing import Any

import anyio
import httpx2 as httpx
import uvicorn

__all__ = ["proxy_app"]

#: hop-by-hop headers a proxy never forwards (RFC 9110 7.6.1), plus the lengths it recomputes
_HOP = {
    b"connection",
    b"keep-alive",
    b"proxy-connection",
    b"transfer-encoding",
    b"te",
    b"trailer",
    b"upgrade",
    b"content-length",
}


def proxy_app(upstream: str, token: str, *, cut_post_streams_after: int | None = None) -> Any:
    """The ASGI app: each request to `upstream` (scheme, host and port) with the token.

    `cut_post_streams_after` (tests): end each POST's SSE answer after that many events, as a
    dropped connection would, so a client must resume it with `Last-Event-ID`."""
    client = httpx.AsyncClient(base_url=upstream, timeout=httpx.Timeout(None))

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await client.aclose()
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = [
            (k.decode("latin-1"), v.decode("latin-1"))
            for k, v in scope["headers"]
            if k.lower() not in _HOP and k.lower() != b"authorization"
        ]
        headers.append(("authorization", f"Bearer {token}"))
        path = scope["raw_path"].decode("latin-1") or "/"
        if scope.get("query_string"):
            path += "?" + scope["query_string"].decode("latin-1")
        request = client.build_request(scope["method"], path, headers=headers, content=body)
        response = await client.send(request, stream=True)
        try:
            await send(
                {
                    "type": "http.response.start",
                    "status": response.status_code,
                    "headers": [(k, v) for k, v in response.headers.raw if k.lower() not in _HOP],
                }
            )

            cut = (
                cut_post_streams_after
                if scope["method"] == "POST"
                and response.headers.get("content-type", "").startswith("text/event-stream")
                else None
            )

            async def pump() -> None:
                buffered = b""
                async for chunk in response.aiter_raw():
                    if cut is None:
                        await send({"type": "http.response.body", "body": chunk, "more_body": True})
                        continue
                    buffered += chunk
                    sep = b"\r\n\r\n" if b"\r\n" in buffered else b"\n\n"
                    if buffered.count(sep) >= cut:  # pass the first `cut` events, no more
                        head = sep.join(buffered.split(sep)[:cut]) + sep
                        await send({"type": "http.response.body", "body": head, "more_body": True})
                        buffered = b""
                        break
                await send({"type": "http.response.body", "body": buffered})
                tg.cancel_scope.cancel()

            async def watch() -> None:
                # the client went away (a dropped stream): close the upstream one too
                while (await receive())["type"] != "http.disconnect":
                    pass
                tg.cancel_scope.cancel()

            async with anyio.create_task_group() as tg:
                tg.start_soon(pump)
                tg.start_soon(watch)
        finally:
            await response.aclose()

    return app


def main(argv: list[str]) -> None:
    upstream, token = argv
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    print(f"listening on http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(
        proxy_app(upstream, token),
        log_level="warning",
        lifespan="on",
        server_header=False,
        date_header=False,
    )
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main(sys.argv[1:])
