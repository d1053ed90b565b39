"""Transports for the bridge: stdio (the protocol alone on stdout) and streamable HTTP
(loopback by default, `Host`/`Origin` checked, a bearer token required)."""

from __future__ import annotations

import hmac
import ipaddress
import json
import re
import secrets
import socket
import threading
from collections.abc import Callable, Iterable
from typing import Any

from lineup_runtime_lite.serve._bridge import Bridge
from lineup_runtime_lite.serve._limits import (
    HttpLimits,
    bearer,
    raise_descriptor_limit,
    uvicorn_options,
)
from lineup_runtime_lite.serve._resume import (
    SCOPE_CALL_ID,
    SCOPE_STREAMS,
    streams_of,
    tools_call_of,
    usable_call_id,
)
from lineup_runtime_lite.serve._resume import install as install_resume

__all__ = [
    "LOOPBACK",
    "REMOTE_WARNING",
    "check_bind",
    "check_host_name",
    "http_app",
    "is_loopback",
    "serve_http",
    "serve_stdio",
]

LOOPBACK = ("127.0.0.1", "localhost", "::1")
#: Addresses that bind every interface (loopback among them).
WILDCARD = ("0.0.0.0", "::")
#: What `serve --http` says when it binds beyond loopback (SPEC 16.3).
REMOTE_WARNING = (
    "listening beyond loopback: the bearer token and every call travel in clear without "
    "TLS; put a TLS proxy in front of this server"
)
_HOST_NAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9.-]{0,252})|[0-9A-Fa-f:.]{2,45}")


def is_loopback(host: str) -> bool:
    """Whether binding `host` keeps the server on this machine (`localhost`, 127.0.0.0/8,
    `::1`)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_bind(host: str, allow_remote: bool) -> None:
    """Refuse an address beyond loopback unless `allow_remote` (SPEC 16.3).

    Raises:
        LineupError: `usage_invalid` for a non-loopback address without `allow_remote`.
    """
    from lineup_sdk.errors import LineupError

    if not allow_remote and not is_loopback(host):
        raise LineupError(
            "usage_invalid",
            f"--http {host} listens beyond loopback, where the bearer token would travel "
            "in clear without TLS",
            hint="bind 127.0.0.1, or pass --allow-remote with a TLS proxy in front "
            "(--allowed-host NAME for the names clients use)",
            exit_code=2,
        )


def check_host_name(name: str) -> str:
    """An `--allowed-host` value: a host name or an IP address, without a port.

    Raises:
        LineupError: `usage_invalid` for anything else.
    """
    from lineup_sdk.errors import LineupError

    bare = name[1:-1] if name.startswith("[") and name.endswith("]") else name
    if not _HOST_NAME.fullmatch(bare) or (":" in bare and not _is_ip(bare)):
        raise LineupError(
            "usage_invalid",
            f"--allowed-host {name!r} must be a host name or an IP address, without a port",
            hint="e.g. --allowed-host mcp.example.org",
            exit_code=2,
        )
    return bare.lower()


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


#: The longest stdin line (one JSON-RPC message) read; a longer one is answered -32700.
MAX_LINE = 64 << 20
#: The answer to a line over `MAX_LINE` (its id cannot be read: JSON-RPC says null).
OVERLONG_ANSWER = (
    json.dumps(
        {
            "jsonrpc": "2.0",
            "id": None,
            "error": {"code": -32700, "message": f"Parse error: a line over {MAX_LINE} bytes"},
        }
    )
    + "\n"
)


async def serve_stdio(bridge: Bridge) -> None:
    """Serve one client over this process's stdin/stdout until stdin closes.

    When both are pipes (how MCP clients start servers), the protocol runs on the event
    loop's own pipe transports: the SDK's default wraps each line read, write and flush in a
    thread round trip, which costs a ping tool call more than everything LineUp adds. fd 0
    and fd 1 are handed over first — fd 0 then reads the null device and fd 1 writes to
    stderr — so a stray `print()` can never corrupt the protocol.
    """
    from mcp.server.stdio import stdio_server

    pipes = _claim_stdio_pipes()
    if pipes is None:
        async with stdio_server() as (read_stream, write_stream):
            await bridge.run(read_stream, write_stream)
        return
    rfd, wfd, restore = pipes
    try:
        out = await _LoopWriter.open(wfd)
        # a line over the limit is answered here and skipped; the server goes on (SPEC 13.3)
        lines = await _LoopLines.open(rfd, lambda: out.write_now(OVERLONG_ANSWER))
        stdin: Any = lines
        stdout: Any = out
        try:
            async with stdio_server(stdin=stdin, stdout=stdout) as (read_stream, write_stream):
                await bridge.run(read_stream, write_stream)
        finally:
            lines.close()
            out.close()
    finally:
        restore()


def _is_pipe(fd: int) -> bool:
    import os
    import stat

    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def _claim_stdio_pipes() -> tuple[int, int, Callable[[], None]] | None:
    """Private duplicates of fd 0 and fd 1 (None unless both are pipes or sockets); fd 0
    is pointed at the null device and fd 1 at stderr until `restore()`."""
    import os
    import sys

    if not (_is_pipe(0) and _is_pipe(1)):
        return None
    sys.stdout.flush()
    rfd, wfd = os.dup(0), os.dup(1)
    saved_in, saved_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)

    def restore() -> None:
        os.dup2(saved_in, 0)
        os.dup2(saved_out, 1)
        os.close(saved_in)
        os.close(saved_out)

    return rfd, wfd, restore


class _LoopLines:
    """Text lines of a pipe, read by the event loop (an async iterator, no threads). A line
    over `limit` bytes is dropped as it streams in (never held whole) and `overlong()` is
    called for it."""

    def __init__(self, reader: Any, transport: Any, overlong: Callable[[], None]) -> None:
        self._reader, self._transport, self._overlong = reader, transport, overlong

    @classmethod
    async def open(cls, fd: int, overlong: Callable[[], None], limit: int = MAX_LINE) -> _LoopLines:
        import asyncio

        from lineup_sdk.bridge import connect_lines

        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=limit, loop=loop)
        transport, _ = await connect_lines(
            loop, lambda: asyncio.StreamReaderProtocol(reader, loop=loop), fd
        )
        return cls(reader, transport, overlong)

    def __aiter__(self) -> _LoopLines:
        return self

    async def __anext__(self) -> str:
        import asyncio

        while True:
            try:
                line: bytes = await self._reader.readuntil(b"\n")
            except asyncio.IncompleteReadError as end:  # the last line, without a newline
                if not end.partial:
                    raise StopAsyncIteration from None
                line = end.partial
            except asyncio.LimitOverrunError as over:
                ended = await self._drop_line(over.consumed)
                self._overlong()
                if not ended:
                    raise StopAsyncIteration from None
                continue
            return line.decode("utf-8", "replace")

    async def _drop_line(self, seen: int) -> bool:
        """Drop the rest of an overlong line; False when the pipe ended inside it."""
        import asyncio

        while True:
            try:
                await self._reader.readexactly(seen)
                await self._reader.readuntil(b"\n")
                return True
            except asyncio.LimitOverrunError as over:
                seen = over.consumed
            except asyncio.IncompleteReadError:
                return False

    def close(self) -> None:
        self._transport.close()


class _LoopWriter:
    """Text written to a pipe by the event loop, with flow control (no threads)."""

    def __init__(self, writer: Any) -> None:
        self._writer = writer

    @classmethod
    async def open(cls, fd: int) -> _LoopWriter:
        import asyncio
        import os

        loop = asyncio.get_running_loop()
        transport, protocol = await loop.connect_write_pipe(
            lambda: asyncio.StreamReaderProtocol(asyncio.StreamReader(loop=loop), loop=loop),
            os.fdopen(fd, "wb", buffering=0),
        )
        return cls(asyncio.StreamWriter(transport, protocol, None, loop))

    async def write(self, text: str) -> None:
        self._writer.write(text.encode("utf-8"))

    def write_now(self, text: str) -> None:
        """Queue a whole line at once (between two of the SDK's, never inside one)."""
        self._writer.write(text.encode("utf-8"))

    async def flush(self) -> None:
        await self._writer.drain()

    def close(self) -> None:
        self._writer.close()


#: What a request without the right bearer token is told: where the token is (no OAuth).
UNAUTHORIZED_TEXT = (
    "send Authorization: Bearer <token>, the token lineup serve printed on its start line "
    "(or the value of LINEUP_SERVE_TOKEN when the server was started with it set)"
)
UNAUTHORIZED_BODY = json.dumps(
    {"error": "invalid_token", "error_description": UNAUTHORIZED_TEXT}
).encode()
UNAUTHORIZED_CHALLENGE = (
    f'Bearer realm="lineup serve", error="invalid_token", error_description="{UNAUTHORIZED_TEXT}"'
).encode()


async def _answer(send: Any, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                *headers,
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def _authority(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def http_app(bridge: Bridge, host: str, token: str, allowed_hosts: Iterable[str] = ()) -> Any:
    """The ASGI app: the SDK's streamable HTTP endpoint at `/mcp`, behind a bearer check.

    It answers the `Host` names of its address (every loopback name for a loopback or
    wildcard address) and `allowed_hosts`; any other is refused (421)."""
    from mcp.server.transport_security import TransportSecuritySettings

    names = {host} if host not in WILDCARD else set()
    if is_loopback(host) or host in WILDCARD:
        names |= set(LOOPBACK)
    names |= {check_host_name(h) for h in allowed_hosts}
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[f"{_authority(h)}:*" for h in sorted(names)],
        allowed_origins=[
            f"{scheme}://{_authority(h)}:*" for h in sorted(names) for scheme in ("http", "https")
        ],
    )
    inner = bridge.server.streamable_http_app(host=host, transport_security=security)
    manager = bridge.server._session_manager
    install_resume(bridge, manager)
    expected = f"Bearer {token}".encode()

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            if str(scope.get("path", "")).startswith("/.well-known/"):
                # no OAuth here: a client that looks for its metadata finds none (SPEC 13.2)
                await _answer(send, 404, b'{"error":"not_found"}', [])
                return
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(given, expected):
                await _answer(
                    send, 401, UNAUTHORIZED_BODY, [(b"www-authenticate", UNAUTHORIZED_CHALLENGE)]
                )
                return
            if scope.get("method") == "POST":
                receive = await _note_call(scope, receive, manager)
        await inner(scope, receive, send)

    return app


#: The longest POST body read ahead to find a `tools/call`'s call_id (larger ones pass on
#: unread, to the SDK's own limit).
PEEK_LIMIT = 1 << 20


async def _note_call(scope: dict[str, Any], receive: Any, manager: Any) -> Any:
    """Before a POST reaches the SDK: when it is one `tools/call` of a live session, tell
    the session's `CallStreams` which call its stream follows (minting the call_id here
    when the request names none, for the bridge to use), so the priming event's id names
    it. Returns the `receive` that hands the SDK the same body."""
    headers = dict(scope.get("headers") or [])
    streams = streams_of(manager, headers.get(b"mcp-session-id", b"").decode("latin-1"))
    if streams is None:
        return receive
    held: list[dict[str, Any]] = []
    size, complete = 0, False
    while size <= PEEK_LIMIT:
        message = await receive()
        held.append(message)
        if message["type"] != "http.request":
            break
        size += len(message.get("body", b""))
        if not message.get("more_body"):
            complete = True
            break
    if complete and size <= PEEK_LIMIT:
        found = tools_call_of(b"".join(m.get("body", b"") for m in held))
        if found is not None:
            request_id, call_id = found
            if call_id is None:
                call_id = f"mcp_{secrets.token_hex(12)}"
                scope[SCOPE_CALL_ID] = call_id
            if usable_call_id(call_id):  # never a newline into an SSE id
                streams.expect(request_id, call_id)
                scope[SCOPE_STREAMS] = streams

    async def replay() -> dict[str, Any]:
        if held:
            return held.pop(0)
        return await receive()  # type: ignore[no-any-return]

    return replay


def serve_http(
    bridge: Bridge,
    host: str,
    port: int,
    token: str,
    *,
    on_ready: Callable[[str], None] | None = None,
    stop: threading.Event | None = None,
    limits: HttpLimits | None = None,
    allow_remote: bool = False,
    allowed_hosts: Iterable[str] = (),
) -> None:
    """Serve streamable HTTP at `http://HOST:PORT/mcp` until interrupted (or `stop` is set),
    with the HTTP limits of SPEC 13.2 (`serve._limits`; defaults unless `limits`).

    `on_ready(url)` runs once the socket listens (with port 0, the URL names the real port).
    An address beyond loopback needs `allow_remote` (SPEC 16.3); `allowed_hosts` adds the
    `Host` names the server answers.

    Raises:
        LineupError: `usage_invalid` for a refused address, a bad host name, or an address
            it cannot listen on.
    """
    import anyio
    import uvicorn

    check_bind(host, allow_remote)
    allowed = [check_host_name(h) for h in allowed_hosts]
    raise_descriptor_limit()
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        from lineup_sdk.errors import LineupError

        raise LineupError(
            "usage_invalid", f"cannot listen on {host}:{port}: {exc.strerror}", exit_code=2
        ) from None
    sock.listen(128)
    real_port = sock.getsockname()[1]
    url = f"http://{_authority(host)}:{real_port}/mcp"
    config = uvicorn.Config(
        http_app(bridge, host, token, allowed),
        log_level="warning",
        lifespan="on",
        **uvicorn_options(limits or HttpLimits(), bearer(token)),
    )
    server = uvicorn.Server(config)

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            if stop is not None:

                async def watch() -> None:
                    while not stop.is_set() and not server.should_exit:
                        await anyio.sleep(0.05)
                    server.should_exit = True

                tg.start_soon(watch)
            if on_ready is not None:

                async def ready() -> None:
                    while not server.started and not server.should_exit:
                        await anyio.sleep(0.01)
                    if server.started:
                        on_ready(url)

                tg.start_soon(ready)
            await server.serve(sockets=[sock])
            tg.cancel_scope.cancel()

    try:
        anyio.run(main)
    finally:
        sock.close()
