"""The two origins of the web dev Host (SPEC 14, 16.3), as ASGI apps over a `DevHost`.

- The **Host origin** (`http://127.0.0.1:<port>`, and only that name) serves the Host page,
  its JSON API and `/mcp` (serve's bridge). A request needs the Host token: the
  `HttpOnly; SameSite=Strict` cookie set from `/?token=` once, or `Authorization: Bearer`;
  `Origin` is checked as `serve --http` does. On `localhost:<port>` a page `GET` is
  redirected to `127.0.0.1` before any cookie is set, anything else is 421: cookies ignore
  ports, so the cookie must live on a name the Surface origin never answers.
- The **Surface origin** (`http://localhost:<port>`, and only that name) serves
  `/_lineup/sdk.js` (with `Access-Control-Allow-Origin`, so a sandboxed frame can import
  it), `/s/<surface token>/...` (the instance's installed `surface/`, with a Content
  Security Policy) and the bridge `/_lineup/bridge`, whose upgrade needs `Origin: null`
  (a sandboxed frame) or this origin. It authenticates by the Surface token alone.
- A malformed token (non-ASCII, over 1 KiB) is refused like a wrong one.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import hmac
import json
import mimetypes
from importlib import resources
from typing import Any

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.websockets import WebSocket, WebSocketDisconnect

from lineup_build.surface import sdk_module
from lineup_runtime_lite.core.messages import ActionAccepted
from lineup_runtime_lite.web._devhost import MAX_TOKEN, Binding, BridgeLimits, Connection, DevHost
from lineup_sdk.errors import LineupError

__all__ = ["COOKIE", "host_app", "surface_app", "web_asset"]

COOKIE = "lineup_dev_token"
#: The Host origin's name and the Surface origin's: different hosts, so the Host token
#: cookie (cookies ignore ports) is never sent to a Surface.
HOST_NAME = "127.0.0.1"
SURFACE_NAME = "localhost"

#: The page a Surface is shown when its app has no `surface/index.html`.
NO_SURFACE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>No Surface</title></head>
<body><p>This MiniApp has no <code>surface/index.html</code>.</p>
<script type="module">import { sdk } from "/_lineup/sdk.js"; sdk.host.ready();</script>
</body></html>
"""


def web_asset(name: str) -> bytes:
    """A file shipped in this package (`sdk.js`, `host.html`, `host.js`, `host.css`)."""
    return resources.files("lineup_runtime_lite.web").joinpath(name).read_bytes()


def _error(status: int, code: str, message: str, hint: str | None = None) -> JSONResponse:
    body: dict[str, Any] = {"code": code, "message": message}
    if hint:
        body["hint"] = hint
    return JSONResponse(body, status_code=status)


def token_matches(given: str | None, expected: str) -> bool:
    """Whether `given` is the token (compared in constant time); a missing, non-ASCII or
    over-1-KiB one is simply not it."""
    if not given or len(given) > MAX_TOKEN:
        return False
    return hmac.compare_digest(given.encode("utf-8", "replace"), expected.encode("utf-8"))


def _header(scope: dict[str, Any], name: bytes) -> str | None:
    for key, value in scope.get("headers") or []:
        if key == name:
            return bytes(value).decode("latin-1")
    return None


def _lineup_error(exc: LineupError, status: int = 400) -> JSONResponse:
    return _error(status, exc.code, exc.message, exc.hint)


class Ports:
    """The two listening ports, known once both sockets are bound."""

    def __init__(self) -> None:
        self.host = 0
        self.surface = 0

    @property
    def host_origin(self) -> str:
        return f"http://{HOST_NAME}:{self.host}"

    @property
    def surface_origin(self) -> str:
        return f"http://{SURFACE_NAME}:{self.surface}"


async def no_icon(request: Request) -> Response:
    return Response(b"", status_code=204)


# -- the Host origin -----------------------------------------------------------------------
def host_app(dev: DevHost, ports: Ports, mcp_app: Any | None) -> Any:
    """The Host origin's ASGI app (`mcp_app`: serve's `http_app`, mounted at `/mcp`)."""
    from starlette.applications import Starlette
    from starlette.routing import Route

    def authorized(request: Request) -> bool:
        token = dev.host_token
        if token_matches(request.cookies.get(COOKIE), token):
            return True
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        return scheme == "Bearer" and token_matches(given, token)

    def misplaced(scope: dict[str, Any]) -> Response | None:
        """None when the request may go on; else the answer: a page `GET` on `localhost`
        redirected to `127.0.0.1` (before any cookie), 421 for anything else on that name,
        403 for a foreign Host or Origin."""
        host = _header(scope, b"host")
        right = f"{ports.host_origin}/"
        if host == f"{SURFACE_NAME}:{ports.host}":
            page_get = scope["type"] == "http" and scope["method"] in ("GET", "HEAD")
            if page_get and scope.get("path") == "/":
                query = bytes(scope.get("query_string") or b"").decode("latin-1")
                return RedirectResponse(right + (f"?{query}" if query else ""), 307)
            return _error(
                421,
                "usage_invalid",
                f"this dev Host answers on {right} only, not on {SURFACE_NAME}",
                hint=f"open {right} (the URL lineup dev printed)",
            )
        if host != f"{HOST_NAME}:{ports.host}":
            return PlainTextResponse("403: foreign Host", status_code=403)
        origin = _header(scope, b"origin")
        if origin is not None and origin != ports.host_origin:
            return PlainTextResponse("403: foreign Origin", status_code=403)
        return None

    async def page(request: Request) -> Response:
        given = request.query_params.get("token")
        if given is not None:
            if not token_matches(given, dev.host_token):
                return PlainTextResponse("wrong token", status_code=401)
            response = RedirectResponse("/", status_code=303)  # the token leaves the URL
            response.set_cookie(COOKIE, dev.host_token, httponly=True, samesite="strict", path="/")
            return response
        if not authorized(request):
            return PlainTextResponse(
                "401: open the URL lineup dev printed (it carries the token once)", status_code=401
            )
        html = web_asset("host.html").decode("utf-8")
        csp = (
            "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
            f"frame-src {ports.surface_origin}; connect-src {ports.host_origin}; "
            "frame-ancestors 'none'"
        )
        return Response(html, media_type="text/html", headers={"content-security-policy": csp})

    async def asset(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in ("host.js", "host.css"):
            return PlainTextResponse("not found", status_code=404)
        kind = "text/javascript" if name.endswith(".js") else "text/css"
        return Response(web_asset(name), media_type=kind)

    async def state(request: Request) -> Response:
        since = request.query_params.get("since", "0")
        body = await anyio.to_thread.run_sync(dev.state, int(since) if since.isdigit() else 0)
        return JSONResponse(body)

    async def surface(request: Request) -> Response:
        try:
            binding = await anyio.to_thread.run_sync(
                dev.surface_token, request.query_params.get("instance", "")
            )
        except LineupError as exc:
            return _lineup_error(exc, 404)
        return JSONResponse({"url": f"{ports.surface_origin}/s/{binding.token}/index.html"})

    async def body_of(request: Request) -> dict[str, Any]:
        try:
            body = await request.json()
        except ValueError:
            raise LineupError("usage_invalid", "the request body is not JSON") from None
        if not isinstance(body, dict):
            raise LineupError("usage_invalid", "the request body is not a JSON object")
        return body

    async def call(request: Request) -> Response:
        try:
            body = await body_of(request)
            answer = await anyio.to_thread.run_sync(
                dev.call, body.get("conversation"), body.get("method"), body.get("params", {})
            )
        except LineupError as exc:
            return _lineup_error(exc)
        return JSONResponse(answer)

    async def host_event(request: Request) -> Response:
        try:
            body = await body_of(request)
            applied = await anyio.to_thread.run_sync(
                dev.panel, str(body.get("button")), str(body.get("instance"))
            )
        except LineupError as exc:
            return _lineup_error(exc)
        return JSONResponse({"applied": applied})

    async def fault(request: Request) -> Response:
        if not dev.faults:
            return PlainTextResponse("not found", status_code=404)
        try:
            body = await body_of(request)
            count = dev.fault(
                str(body.get("fault")), body.get("instance"), int(body.get("count", 1))
            )
        except (LineupError, ValueError, TypeError) as exc:
            if isinstance(exc, LineupError):
                return _lineup_error(exc)
            return _error(400, "usage_invalid", "count must be an integer")
        return JSONResponse({"bridges": count})

    api = Starlette(
        routes=[
            Route("/", page),
            Route("/favicon.ico", no_icon),
            Route("/_lineup/{name}", asset),
            Route("/_lineup/api/state", state),
            Route("/_lineup/api/surface", surface),
            Route("/_lineup/api/call", call, methods=["POST"]),
            Route("/_lineup/api/host", host_event, methods=["POST"]),
            Route("/_lineup/api/fault", fault, methods=["POST"]),
        ]
    )

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            if mcp_app is not None:
                await mcp_app(scope, receive, send)
                return
            await api(scope, receive, send)
            return
        path = str(scope.get("path", ""))
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})  # no bridge here
            return
        refused = misplaced(scope)
        if mcp_app is not None and (path == "/mcp" or path.startswith("/mcp/")):
            if refused is not None and refused.status_code == 421:
                await refused(scope, receive, send)  # on `localhost`: the name is wrong
                return
            await mcp_app(scope, receive, send)  # bearer token, Host and Origin: as serve
            return
        if refused is not None:
            await refused(scope, receive, send)
            return
        if scope["type"] == "http":
            request = Request(scope, receive)
            if path != "/" and not authorized(request):
                await _error(401, "unauthorized", "send the Host token (its cookie)")(
                    scope, receive, send
                )
                return
        await api(scope, receive, send)

    return app


# -- the Surface origin --------------------------------------------------------------------
_CORS = {"access-control-allow-origin": "*"}


def _surface_csp(ports: Ports) -> str:
    s = ports.surface_origin
    ws = s.replace("http://", "ws://", 1)
    return (
        f"default-src 'none'; script-src {s} 'unsafe-inline'; style-src {s} 'unsafe-inline'; "
        f"img-src {s} data:; font-src {s}; connect-src {s} {ws}; "
        f"frame-ancestors {ports.host_origin}; base-uri 'none'; form-action 'none'"
    )


def surface_app(dev: DevHost, ports: Ports) -> Any:
    """The Surface origin's ASGI app."""
    from starlette.applications import Starlette
    from starlette.routing import Route, WebSocketRoute

    async def sdk_js(request: Request) -> Response:
        # the page's one SDK instance when it has one (a built document inlines it)
        return Response(sdk_module(), media_type="text/javascript", headers=dict(_CORS))

    async def app_info(request: Request) -> Response:
        binding = dev.binding(request.query_params.get("token", ""))
        if binding is None:
            return JSONResponse(
                {"code": "usage_invalid", "message": "unknown Surface token"},
                status_code=401,
                headers=dict(_CORS),
            )
        info = await anyio.to_thread.run_sync(dev.app_info, binding)
        return JSONResponse(info, headers=dict(_CORS))

    async def page(request: Request) -> Response:
        binding = dev.binding(request.path_params["token"])
        if binding is None:
            return PlainTextResponse("401: unknown Surface token", status_code=401)
        rel = request.path_params["path"] or "index.html"
        headers = {"content-security-policy": _surface_csp(ports), "cache-control": "no-store"}
        try:  # only a file the build's manifest lists, its hash checked (SPEC 16.1)
            data = await anyio.to_thread.run_sync(dev.surface_file, binding, rel)
        except LineupError as exc:
            refused = _error(409, exc.code, exc.message, exc.hint)
            refused.headers.update(headers)
            return refused
        if data is None:
            if rel == "index.html":
                return Response(NO_SURFACE, media_type="text/html", headers=headers)
            return PlainTextResponse("not found", status_code=404)
        kind = mimetypes.guess_type(rel)[0] or "application/octet-stream"
        if rel.endswith((".js", ".mjs")):
            kind = "text/javascript"
        # a sandboxed frame's module scripts are CORS fetches from an opaque origin
        return Response(data, media_type=kind, headers={**headers, **_CORS})

    async def bridge(ws: WebSocket) -> None:
        # a sandboxed frame's Origin is `null`; a page of this origin sends its own; any
        # other page (or none: not a browser frame) is refused before the upgrade (403)
        if ws.headers.get("origin") not in ("null", ports.surface_origin):
            await ws.close(code=1008)
            return
        binding = dev.binding(ws.query_params.get("token", ""))
        if binding is None:
            await ws.close(code=1008)
            return
        await ws.accept()
        await _SurfaceBridge(dev, binding, ws).run()

    routes = Starlette(
        routes=[
            Route("/_lineup/sdk.js", sdk_js),
            Route("/favicon.ico", no_icon),
            Route("/_lineup/app", app_info),
            Route("/s/{token}/{path:path}", page),
            WebSocketRoute("/_lineup/bridge", bridge),
        ]
    )

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket"):
            # Origin is `null` for a sandboxed frame, so the Host header is checked here
            # (DNS rebinding; only `localhost`, never the Host origin's name, so the Host
            # token cookie is never sent here); the Surface token does the rest
            host = _header(scope, b"host")
            if host != f"{SURFACE_NAME}:{ports.surface}":
                if scope["type"] == "websocket":
                    await send({"type": "websocket.close", "code": 1008})
                    return
                if host == f"{HOST_NAME}:{ports.surface}":
                    right = f"{ports.surface_origin}/"
                    await _error(421, "usage_invalid", f"Surfaces are served on {right} only")(
                        scope, receive, send
                    )
                    return
                await PlainTextResponse("403: foreign Host", status_code=403)(scope, receive, send)
                return
        await routes(scope, receive, send)

    return app


class _SurfaceBridge:
    """One Surface's bridge: `get`, `subscribe`, `unsubscribe`, `ready` and `act` of its
    instance.

    `act` is answered twice (SPEC 17): `{id, accepted: seq, action_id}` once the action is
    persisted (or `{id, error}`: a rejection before acceptance, nothing persisted), then
    `{id, outcome: {action_id, result, revision}}` or `{id, action_id, error}`.

    Answers and frames (pushed from listener threads too) wait, encoded, in one bounded
    queue that one sender task empties in order; a client that lets it pass its bound
    (frames or encoded bytes: `BridgeLimits`) is closed with 1008 and the queue dropped
    (SPEC 16.3). At most `subscriptions` bridge subscriptions at once."""

    ALLOWED = ("get", "subscribe", "unsubscribe", "ready", "act")

    def __init__(self, dev: DevHost, binding: Binding, ws: WebSocket) -> None:
        self.dev, self.binding, self.ws = dev, binding, ws
        self.limits: BridgeLimits = dev.bridge_limits
        self.loop = asyncio.get_running_loop()
        self.queue: collections.deque[str] = collections.deque()
        self.queued_bytes = 0
        self.wake = asyncio.Event()
        #: Set when the bridge is to close: its WebSocket close code.
        self.closing: int | None = None
        self.closed = asyncio.Event()
        self.conn = Connection(binding, self._push_threadsafe)
        self.conn.close_requested = lambda: self._call_soon(self._close, 4000)
        self.unsubscribe: dict[int, Any] = {}
        #: The outcomes this bridge still waits for (cancelled when it closes).
        self.outcomes: set[asyncio.Task[None]] = set()

    # -- the bounded queue -----------------------------------------------------------------
    def _call_soon(self, fn: Any, *args: Any) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is gone: the connection is over
            self.loop.call_soon_threadsafe(fn, *args)

    def _push_threadsafe(self, msg: dict[str, Any]) -> None:
        """From any thread: encode here (a listener's thread), queue on the loop."""
        changed = msg.get("frame") == "session_data.changed"
        self._call_soon(self._enqueue, json.dumps(msg), changed)

    def _enqueue(self, text: str, changed: bool = False) -> None:
        if self.closing is not None:
            return
        if changed and self.conn.drop_changed > 0:
            self.conn.drop_changed -= 1  # the fault seam drops it on the way
            return
        self.queue.append(text)
        self.queued_bytes += len(text)  # json.dumps is ASCII: characters are bytes
        self.dev.bridge_bytes += len(text)
        limits = self.limits
        if (
            len(self.queue) > limits.frames
            or self.queued_bytes > limits.wire_bytes
            or self.dev.bridge_bytes > limits.all_wire_bytes
        ):
            self._close(1008)  # the client stopped reading
            return
        self.wake.set()

    def _close(self, code: int) -> None:
        if self.closing is None:
            self.closing = code
        self._drop_queue()
        self.closed.set()

    def _drop_queue(self) -> None:
        self.queue.clear()
        self.dev.bridge_bytes -= self.queued_bytes
        self.queued_bytes = 0

    async def _send_loop(self) -> None:
        while self.closing is None:
            if not self.queue:
                self.wake.clear()
                await self.wake.wait()
                continue
            text = self.queue.popleft()
            self.queued_bytes -= len(text)
            self.dev.bridge_bytes -= len(text)
            await self.ws.send_text(text)

    async def _receive_loop(self) -> None:
        with contextlib.suppress(WebSocketDisconnect, RuntimeError):
            while self.closing is None:
                text = await self.ws.receive_text()
                if self.closing is None:
                    await self._handle(text)
                    # let the sender drain what this answered: a burst of cheap requests
                    # from a client that reads must not look like one that does not
                    await asyncio.sleep(0)

    async def run(self) -> None:
        self.dev.attach(self.conn)
        tasks = [
            asyncio.ensure_future(self._send_loop()),
            asyncio.ensure_future(self._receive_loop()),
            asyncio.ensure_future(self.closed.wait()),
        ]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in [*tasks, *self.outcomes]:
                task.cancel()
            self.outcomes.clear()
            self.dev.detach(self.conn)
            self._drop_queue()
            for off in list(self.unsubscribe.values()):
                await anyio.to_thread.run_sync(off)
            self.unsubscribe.clear()
            if self.closing is not None:
                await self._send_close(self.closing)

    async def _send_close(self, code: int) -> None:
        """The close frame, once the client reads again; after `close_grace_s` without
        that, the connection is dropped."""
        reason = "the client stopped reading" if code == 1008 else ""
        try:
            await asyncio.wait_for(
                self.ws.close(code=code, reason=reason), self.limits.close_grace_s
            )
        except Exception:  # the grace ran out, or the connection is already gone
            _abort(self.ws)

    def _reply(
        self,
        req_id: Any,
        result: Any = None,
        error: LineupError | None = None,
        **extra: Any,
    ) -> None:
        if error is not None:
            self._enqueue(json.dumps({"id": req_id, **extra, "error": _error_body(error)}))
        else:
            self._enqueue(json.dumps({"id": req_id, **extra, "result": result}))

    async def _handle(self, text: str) -> None:
        try:
            msg = json.loads(text)
        except (ValueError, RecursionError):  # not a request (nesting past the parser too)
            return
        if not isinstance(msg, dict):
            return
        req_id, op = msg.get("id"), msg.get("op")
        b, dev = self.binding, self.dev
        try:
            if op not in self.ALLOWED:
                raise LineupError(
                    "usage_invalid",
                    "the Surface bridge allows only get, subscribe, ready and act "
                    f"(not {str(op)[:40]!r})",
                    hint="Agent tools are called by the Agent; foreground is the Host's",
                )
            what = msg.get("what", "session_data")
            if op == "get":
                if what == "operations":
                    ops = await anyio.to_thread.run_sync(dev.operations, b)
                    self._reply(req_id, {"operations": ops})
                else:
                    surface = dev.rt.surface(b.conversation_id, b.scope)

                    def encoded() -> str:  # off the loop: an answer may be a MiB
                        snap = surface.get()
                        result = {"revision": snap.revision, "data": snap.data}
                        return json.dumps({"id": req_id, "result": result})

                    self._enqueue(await anyio.to_thread.run_sync(encoded))
            elif op == "subscribe":
                await self._subscribe(req_id, what)
            elif op == "act":
                await self._act(req_id, msg)
            elif op == "unsubscribe":
                raw = msg.get("sub")
                sub: int = raw if isinstance(raw, int) else -1
                self.conn.operation_subs.discard(sub)
                off = self.unsubscribe.pop(sub, None)
                if off is not None:
                    await anyio.to_thread.run_sync(off)
                self._reply(req_id, {})
            else:  # ready: once per page load (the SDK names its load; else this bridge)
                load = msg.get("load")
                if not (isinstance(load, str) and 0 < len(load) <= 64 and load.isascii()):
                    load = self.conn.load
                applied = await anyio.to_thread.run_sync(dev.ready, b, load)
                self._reply(req_id, {"applied": applied})
        except LineupError as exc:
            self._reply(req_id, error=exc)

    async def _act(self, req_id: Any, msg: dict[str, Any]) -> None:
        """A UI Action of this instance (SPEC 17): accepted (persisted) before the next
        message is read, so a client's actions are accepted in the order it sent them;
        the outcome is answered when it commits, while the bridge reads on."""
        b, dev = self.binding, self.dev
        for key, own in (
            ("conversation", b.conversation_id),
            ("scope", b.scope),
            ("instance", b.instance),
        ):
            if key in msg and msg[key] != own:
                raise LineupError(
                    "usage_invalid",
                    f"a Surface token acts only for its own instance (not this {key})",
                    hint="a Surface asks for the actions of the instance it shows",
                )
        name, params, client, seq = (
            msg.get("name"),
            msg.get("params", {}),
            msg.get("client"),
            msg.get("seq"),
        )
        surface = dev.rt.surface(b.conversation_id, b.scope)
        try:
            if len(self.outcomes) >= self.limits.actions:
                raise LineupError(
                    "limit_exceeded",
                    f"at most {self.limits.actions} UI Actions waiting for their outcomes "
                    "per Surface bridge",
                    hint="wait for some outcomes before asking for more actions",
                )
            await anyio.to_thread.run_sync(dev.check_live, b)
            accepted, outcome = await surface.asubmit(name, params, client_id=client, seq=seq)
        except LineupError as exc:
            dev.action_noted(b, name, client, seq, error=exc, accepted=False)
            raise
        self._enqueue(
            json.dumps(
                {"id": req_id, "accepted": accepted["seq"], "action_id": accepted["action_id"]}
            )
        )
        task = asyncio.ensure_future(self._outcome(req_id, accepted, outcome, msg))
        self.outcomes.add(task)
        task.add_done_callback(self.outcomes.discard)

    async def _outcome(
        self, req_id: Any, accepted: ActionAccepted, outcome: Any, msg: dict[str, Any]
    ) -> None:
        b, dev = self.binding, self.dev
        name, params, client, seq = (
            msg.get("name"),
            msg.get("params", {}),
            msg["client"],
            msg["seq"],
        )
        while True:
            try:
                done = await outcome
            except LineupError as exc:
                if exc.code == "action_pending":  # the wait ran out, not the action
                    surface = dev.rt.surface(b.conversation_id, b.scope)
                    try:
                        _, outcome = await surface.asubmit(name, params, client_id=client, seq=seq)
                    except LineupError as again:
                        exc = again
                    else:
                        continue
                dev.action_noted(b, name, client, seq, error=exc)
                self._reply(req_id, error=exc, action_id=accepted["action_id"])
                return
            dev.action_noted(b, name, client, seq, outcome=done)
            self._enqueue(json.dumps({"id": req_id, "outcome": done}))
            return

    async def _subscribe(self, req_id: Any, what: str) -> None:
        if not isinstance(req_id, int):
            raise LineupError("usage_invalid", "subscribe needs an integer id")
        if req_id in self.unsubscribe or req_id in self.conn.operation_subs:
            raise LineupError("usage_invalid", f"subscription {req_id} exists already")
        if len(self.unsubscribe) + len(self.conn.operation_subs) >= self.limits.subscriptions:
            raise LineupError(
                "limit_exceeded",
                f"at most {self.limits.subscriptions} subscriptions per Surface bridge",
                hint="the Surface SDK shares one bridge subscription per kind among all "
                "listeners; unsubscribe what is no longer needed",
            )
        b = self.binding
        if what == "operations":
            self.conn.operation_subs.add(req_id)
            ops = await anyio.to_thread.run_sync(self.dev.operations, b)
            self._reply(req_id, {})
            self._enqueue(json.dumps({"sub": req_id, "frame": "operations", "operations": ops}))
            return
        push = self._push_threadsafe

        def listener(kind: str, snap: Any) -> None:
            push({"sub": req_id, "frame": kind, "revision": snap.revision, "data": snap.data})

        surface = self.dev.rt.surface(b.conversation_id, b.scope)
        self.unsubscribe[req_id] = await anyio.to_thread.run_sync(surface.subscribe, listener)
        self._reply(req_id, {})


def _error_body(error: LineupError) -> dict[str, Any]:
    body: dict[str, Any] = {"code": error.code, "message": error.message}
    if error.hint:
        body["hint"] = error.hint
    if error.details is not None:
        body["details"] = error.details
    return body


def _abort(ws: WebSocket) -> None:
    """Drop a connection whose client never read its close frame (uvicorn's protocol is
    the `send` of a WebSocket served directly; anything else is left to its own timers)."""
    transport = getattr(getattr(ws._send, "__self__", None), "transport", None)
    abort = getattr(transport, "abort", None)
    if callable(abort):
        abort()
