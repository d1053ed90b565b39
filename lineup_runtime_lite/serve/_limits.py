"""HTTP limits below the ASGI layer (SPEC 13.2): `serve --http` and `lineup dev` cannot be
starved by connections that never finish a request or never authenticate.

uvicorn has no timer for the request head or body of its own (its keep-alive timer starts
only after a response) and its `limit_concurrency` answers 503 to everyone, so the limits
live in its HTTP protocol, where the header phase is visible (a middleware is not called
until the head is complete):

- **head**: from accept — or from the first byte of the next request on a kept-alive
  connection — until the request head is complete (default 10 s);
- **body**: from the head until the request body is complete (default 30 s);
- **idle**: a connection with no request in progress closes after 60 s (uvicorn's
  keep-alive timer, armed after each response). A request in progress — a long-running
  answer, an SSE stream, a task result — is never cut;
- A connection upgraded to a WebSocket leaves these limits to its own protocol.
- **unauthenticated**: at most 64 connections that have not yet sent a request with the
  bearer token; one more closes the oldest of them, so idle attackers can never hold the
  slots (and descriptors) a legitimate client needs. A connection that authenticated once
  stays counted as authenticated.

`raise_descriptor_limit()` lifts the soft `RLIMIT_NOFILE` to the hard limit at start.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import resource
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Authenticated",
    "HttpLimits",
    "bearer",
    "guarded_protocol",
    "raise_descriptor_limit",
    "uvicorn_options",
]


@dataclass(frozen=True)
class HttpLimits:
    """The HTTP limits of one server (seconds; connection count)."""

    head_s: float = 10.0
    body_s: float = 30.0
    idle_s: float = 60.0
    unauthenticated: int = 64


def raise_descriptor_limit() -> int:
    """Raise the soft descriptor limit to the hard one; returns the soft limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        with contextlib.suppress(OSError, ValueError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


Headers = list[tuple[bytes, bytes]]
#: Whether a request (its decoded path, query string and headers) carries a credential.
Authenticated = Callable[[str, bytes, Headers], bool]


def bearer(token: str) -> Authenticated:
    """A request is authenticated when it carries `Authorization: Bearer <token>`."""
    expected = f"Bearer {token}".encode()

    def check(path: str, query: bytes, headers: Headers) -> bool:
        return hmac.compare_digest(dict(headers).get(b"authorization", b""), expected)

    return check


def guarded_protocol(limits: HttpLimits, authenticated: Authenticated) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol with the limits above; a connection counts as authenticated
    once `authenticated(path, query, headers)` holds for a request on it."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    strangers: OrderedDict[int, Guarded] = OrderedDict()

    class Guarded(H11Protocol):
        _timer: asyncio.TimerHandle | None = None
        _authenticated = False
        _phase = "head"

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            strangers[id(self)] = self
            while len(strangers) > limits.unauthenticated:
                _, oldest = strangers.popitem(last=False)
                oldest._close()
            self._arm("head", limits.head_s)

        def connection_lost(self, exc: Exception | None) -> None:
            strangers.pop(id(self), None)
            self._disarm()
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            if self._phase == "idle":  # the first byte of the next request: its head timer
                self._arm("head", limits.head_s)
            super().data_received(data)
            if self.transport.get_protocol() is not self:  # upgraded to a WebSocket
                self._disarm()  # its own protocol keeps it alive or ends it from here
                strangers.pop(id(self), None)
                return
            self._follow()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
                self._disarm()
                self._phase = "idle"  # uvicorn's keep-alive timer is the idle timeout now

        def _follow(self) -> None:
            """Move the timer with the request: head → body → in progress."""
            state = self.conn.their_state
            if state is h11.IDLE:
                return  # still reading a head: its timer runs on
            if not self._authenticated and self.headers is not None:
                self._check_token()
            if state is h11.SEND_BODY:
                if self._phase != "body":
                    self._arm("body", limits.body_s)
            elif self._phase in ("head", "body"):
                self._disarm()
                self._phase = "busy"

        def _check_token(self) -> None:
            scope = self.scope
            if authenticated(str(scope["path"]), bytes(scope["query_string"]), self.headers):
                self._authenticated = True
                strangers.pop(id(self), None)

        def _arm(self, phase: str, seconds: float) -> None:
            self._disarm()
            self._phase = phase
            self._timer = self.loop.call_later(seconds, self._close)

        def _disarm(self) -> None:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

        def _close(self) -> None:
            self._disarm()
            strangers.pop(id(self), None)
            if self.transport is not None and not self.transport.is_closing():
                self.transport.close()

    return Guarded


def uvicorn_options(limits: HttpLimits, authenticated: Authenticated) -> dict[str, Any]:
    """The `uvicorn.Config` keyword arguments that put these limits in force."""
    return {"http": guarded_protocol(limits, authenticated), "timeout_keep_alive": limits.idle_s}
