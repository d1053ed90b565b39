"""Serving the dev Host: the Host origin on `127.0.0.1` (the asked port, or the next free
one) and the Surface origin on what `localhost` resolves to (both loopback families where
available, one port: the next free one after the Host's), one event loop."""

from __future__ import annotations

import contextlib
import errno
import hmac
import signal
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.cookies import CookieError, SimpleCookie
from typing import Any
from urllib.parse import parse_qs

from lineup_runtime_lite.serve._limits import (
    Authenticated,
    Headers,
    HttpLimits,
    bearer,
    raise_descriptor_limit,
    uvicorn_options,
)
from lineup_runtime_lite.web._devhost import DevHost
from lineup_runtime_lite.web._origins import COOKIE, Ports, host_app, surface_app
from lineup_sdk.errors import LineupError

__all__ = ["DEFAULT_PORT", "DevUrls", "bind_free", "bind_localhost", "serve_dev"]

DEFAULT_PORT = 8765
#: How many ports after the asked one are tried before giving up.
PORT_TRIES = 50


@dataclass(frozen=True)
class DevUrls:
    """Where the dev Host listens, and the URL that sets its cookie (with the token)."""

    host_origin: str
    surface_origin: str
    open_url: str
    mcp_url: str


def _tcp_socket(family: int) -> socket.socket:
    """A TCP socket that names its protocol: asyncio turns Nagle's algorithm off
    (`TCP_NODELAY`) only on connections whose socket says `IPPROTO_TCP`, and an accepted
    connection inherits what the listening socket says. With Nagle on, a bridge's second
    small answer in a row (a UI Action's outcome after its change frame) waits for the
    browser's delayed ACK, about 40 ms."""
    return socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)


def bind_free(port: int, *, exclude: int = -1) -> socket.socket:
    """A listening loopback socket on `port` or the next free one (`port` 0: any).

    Raises:
        LineupError: `usage_invalid` when none of the next ports is free.
    """
    candidates = [0] if port == 0 else range(port, min(port + PORT_TRIES, 65536))
    for candidate in candidates:
        if candidate == exclude:
            continue
        sock = _tcp_socket(socket.AF_INET)
        try:
            sock.bind(("127.0.0.1", candidate))
        except OSError:
            sock.close()
            continue
        sock.listen(128)
        return sock
    raise LineupError(
        "usage_invalid",
        f"no free port in {port}-{port + PORT_TRIES - 1} on 127.0.0.1",
        hint="pass --port N",
        exit_code=2,
    )


def _localhost_addresses() -> list[tuple[int, str]]:
    """`(family, address)` of what `localhost` resolves to, plus the loopback addresses of
    both families (`::1` is left out where IPv6 is not available)."""
    found: list[tuple[int, str]] = []
    with contextlib.suppress(OSError):
        for family, _, _, _, sockaddr in socket.getaddrinfo(
            "localhost", None, type=socket.SOCK_STREAM
        ):
            if family in (socket.AF_INET, socket.AF_INET6):
                found.append((family, str(sockaddr[0])))
    found += [(socket.AF_INET, "127.0.0.1")]
    if socket.has_ipv6:
        found += [(socket.AF_INET6, "::1")]
    unique: list[tuple[int, str]] = []
    for item in found:
        if item not in unique:
            unique.append(item)
    return unique


def _bind_all(addresses: list[tuple[int, str]], port: int) -> list[socket.socket] | None:
    """Listening sockets on `port` (0: one the first picks) for every address; None when the
    port is taken on one of them. An address its family cannot use is left out."""
    bound: list[socket.socket] = []
    for family, host in addresses:
        sock = _tcp_socket(family)
        try:
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind((host, port))
        except OSError as exc:
            sock.close()
            if exc.errno in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT) and host != "127.0.0.1":
                continue  # no such family here
            for s in bound:
                s.close()
            return None
        sock.listen(128)
        bound.append(sock)
        port = port or sock.getsockname()[1]
    return bound or None


def bind_localhost(port: int, *, exclude: int = -1) -> list[socket.socket]:
    """Listening sockets on one port for every address `localhost` names: `port` or the
    next free one (0: any).

    Raises:
        LineupError: `usage_invalid` when none of the next ports is free.
    """
    addresses = _localhost_addresses()
    candidates = [0] * 5 if port == 0 else range(port, min(port + PORT_TRIES, 65536))
    for candidate in candidates:
        if candidate == exclude:
            continue
        bound = _bind_all(addresses, candidate)
        if bound is not None:
            return bound
    raise LineupError(
        "usage_invalid",
        f"no free port in {port}-{port + PORT_TRIES - 1} on localhost",
        hint="pass --port N",
        exit_code=2,
    )


def _host_credential(dev: DevHost) -> Authenticated:
    """The Host origin: the Host token as bearer (`/mcp`), cookie or `?token=`."""
    bearer_ok = bearer(dev.host_token)

    def check(path: str, query: bytes, headers: Headers) -> bool:
        if bearer_ok(path, query, headers):
            return True
        cookies = SimpleCookie()
        with contextlib.suppress(CookieError, UnicodeDecodeError):
            cookies.load(dict(headers).get(b"cookie", b"").decode("latin-1"))
        given = cookies[COOKIE].value if COOKIE in cookies else ""
        given = given or parse_qs(query.decode("latin-1")).get("token", [""])[0]
        return hmac.compare_digest(given.encode(), dev.host_token.encode())

    return check


def _surface_credential(dev: DevHost) -> Authenticated:
    """The Surface origin: a live Surface token in the path (`/s/<token>/...`) or query."""

    def check(path: str, query: bytes, headers: Headers) -> bool:
        parts = path.split("/")
        token = parts[2] if len(parts) > 2 and parts[1] == "s" else ""
        token = token or parse_qs(query.decode("latin-1")).get("token", [""])[0]
        return bool(token) and dev.binding(token) is not None

    return check


def _on_stop_signals(event: threading.Event) -> dict[int, Any]:
    """Make SIGINT and SIGTERM set `event` (main thread only); the handlers replaced."""
    if threading.current_thread() is not threading.main_thread():
        return {}

    def stop_requested(sig: int, frame: Any) -> None:
        event.set()

    return {sig: signal.signal(sig, stop_requested) for sig in (signal.SIGINT, signal.SIGTERM)}


def serve_dev(
    dev: DevHost,
    port: int = DEFAULT_PORT,
    *,
    mcp_app: Callable[[str], Any] | None = None,
    on_ready: Callable[[DevUrls], None] | None = None,
    stop: threading.Event | None = None,
    limits: HttpLimits | None = None,
) -> None:
    """Serve the Host page (and `/mcp`, `mcp_app(token)`) and the Surface origin until
    interrupted or `stop` is set, both with the HTTP limits of SPEC 13.2 (a connection
    counts as authenticated once it shows the Host token, or on the Surface origin a
    Surface token). `on_ready` runs once both listen."""
    import anyio
    import uvicorn

    host_sock = bind_free(port)
    host_port = host_sock.getsockname()[1]
    try:
        surface_socks = bind_localhost(host_port + 1 if port else 0, exclude=host_port)
    except BaseException:
        host_sock.close()
        raise
    ports = Ports()
    ports.host = host_port
    ports.surface = surface_socks[0].getsockname()[1]
    mcp = mcp_app(dev.host_token) if mcp_app is not None else None
    raise_descriptor_limit()

    class Server(uvicorn.Server):
        """A server that leaves the signals to `serve_dev` (two servers each capturing
        them re-raise SIGINT at each other: a forced exit, a lifespan cancelled)."""

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

    servers = [
        Server(
            uvicorn.Config(
                host_app(dev, ports, mcp),
                log_level="warning",
                lifespan="on" if mcp is not None else "off",
                **uvicorn_options(limits or HttpLimits(), _host_credential(dev)),
            )
        ),
        Server(
            uvicorn.Config(
                surface_app(dev, ports),
                log_level="warning",
                lifespan="off",
                ws="websockets-sansio",
                **uvicorn_options(limits or HttpLimits(), _surface_credential(dev)),
            )
        ),
    ]
    urls = DevUrls(
        ports.host_origin,
        ports.surface_origin,
        f"{ports.host_origin}/?token={dev.host_token}",
        f"{ports.host_origin}/mcp",
    )

    async def main() -> None:
        async with anyio.create_task_group() as tg:

            async def watch() -> None:
                while not any(s.should_exit for s in servers):
                    if (stop is not None and stop.is_set()) or interrupted.is_set():
                        break
                    await anyio.sleep(0.05)
                for s in servers:
                    s.should_exit = True

            async def ready() -> None:
                while not all(s.started for s in servers):
                    if any(s.should_exit for s in servers):
                        return
                    await anyio.sleep(0.01)
                if on_ready is not None:
                    on_ready(urls)

            async def timeline() -> None:  # receipts and results reach the page live
                while not any(s.should_exit for s in servers):
                    await anyio.to_thread.run_sync(dev.poll)
                    await anyio.sleep(0.2)

            tg.start_soon(watch)
            tg.start_soon(ready)
            tg.start_soon(timeline)
            async with anyio.create_task_group() as inner:
                inner.start_soon(lambda: servers[0].serve(sockets=[host_sock]))
                inner.start_soon(lambda: servers[1].serve(sockets=surface_socks))
            tg.cancel_scope.cancel()

    # Ctrl-C (SIGINT to the whole foreground group) or SIGTERM: a graceful stop of both
    # servers, never asyncio's KeyboardInterrupt through uvicorn's lifespan (a traceback).
    # Installed before the loop starts, so asyncio leaves SIGINT to it; uvicorn's own
    # handlers chain back to it when each server ends.
    interrupted = threading.Event()
    previous = _on_stop_signals(interrupted)
    try:
        anyio.run(main)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        host_sock.close()
        for sock in surface_socks:
            sock.close()
