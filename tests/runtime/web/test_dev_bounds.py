"""`lineup dev` bounded and honest at its edges (SPEC 16.3), without a browser: raw HTTP and
the `websockets` client against both origins.

- The Surface bridge: a client that stops reading is closed (1008) once its answers pass the
  queue's bound; at most 16 subscriptions per bridge (`limit_exceeded`); `ready` counts once
  per page load; the timeline keeps the last 1,000 entries per conversation.
- Origins: the bridge's `Origin` rule; the Host origin answers only `127.0.0.1:<port>` (a
  page `GET` on `localhost` is redirected before any cookie, anything else 421); the Surface
  origin only `localhost:<port>`; the CSPs name the exact origins.
- Tokens: a wrong or malformed Host token (non-ASCII, over 1 KiB; URL, cookie, header) or
  Surface token is refused with 401/403, never a 500.
"""

from __future__ import annotations

import http.client
import json
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from lineup_runtime_lite import VirtualClock
from lineup_runtime_lite.web.browser import DevServer
from tests.conftest import MakeApp
from tests.runtime.raw_ws import RawWebSocket
from tests.runtime.serve_kit import address
from tests.sandbox_kit import poll

pytest.importorskip("websockets", reason="the web extra (websockets) is not installed")

FILL = '''
@tools.tool("demo.fill", activation="app_ready")
async def fill(ctx: ToolContext, size: int) -> int:
    """Store `size` bytes of session data."""
    snap = await ctx.session_data.get()
    await ctx.session_data.replace({"blob": "x" * size}, expected_revision=snap.revision)
    return size
'''


@pytest.fixture()
def dev(make_app: MakeApp) -> Iterator[DevServer]:
    app = make_app(FILL)
    server = DevServer.start(app.root, clock=VirtualClock(), watch=False)
    try:
        yield server
    finally:
        server.stop()


def _instance(dev: DevServer, size: int = 10, conversation: str = "conv") -> str:
    msg = dev.rt.call(f"fill-{conversation}", conversation, "demo.fill", {"size": size})
    if msg["stage"] == "accepted":
        dev.rt.settle()
    for s in dev.rt.sessions("demo"):
        if s["conversation_id"] == conversation:
            return str(s["instance"])
    raise AssertionError("no session")


def _answers_then_close(ws: RawWebSocket) -> tuple[int, int]:
    """Frames read from `ws` up to its close frame: `(how many came before it, its close
    code)`."""
    answers = 0
    while True:
        opcode, payload = ws.frame()
        if opcode == 8:
            return answers, int.from_bytes(payload[:2], "big")
        answers += 1


def _bridge_url(dev: DevServer, token: str) -> str:
    host, port = address(dev.urls.surface_origin)
    return f"ws://{host}:{port}/_lineup/bridge?token={token}"


def _connect(dev: DevServer, token: str, **kw: Any) -> Any:
    from websockets.sync.client import connect
    from websockets.typing import Origin

    return connect(_bridge_url(dev, token), origin=Origin("null"), **kw)


def _ask(ws: Any, msg: dict[str, Any]) -> dict[str, Any]:
    ws.send(json.dumps(msg))
    while True:
        answer = json.loads(ws.recv(timeout=10))
        if answer.get("id") == msg["id"] and "sub" not in answer:
            return dict(answer)


def _http(
    origin: str, method: str, path: str, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], str]:
    """One request with exactly these headers (`Host` included when given)."""
    host, port = address(origin)
    conn = http.client.HTTPConnection(host, port, timeout=10)
    try:
        given = dict(headers or {})
        conn.putrequest(method, path, skip_host="Host" in given, skip_accept_encoding=True)
        for name, value in given.items():
            conn.putheader(name, value.encode("utf-8") if isinstance(value, str) else value)
        conn.endheaders()
        resp = conn.getresponse()
        body = resp.read().decode("utf-8", "replace")
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, body
    finally:
        conn.close()


# -- the bridge bounded --------------------------------------------------------------------
def test_a_client_that_stops_reading_is_closed_1008_and_its_queue_dropped(
    dev: DevServer,
) -> None:
    # catches: the bound dropped from `_SurfaceBridge._enqueue` (web/_origins.py)
    binding = dev.host.surface_token(_instance(dev, size=800 * 1024))
    host, port = address(dev.urls.surface_origin)
    ws = RawWebSocket(host, port, f"/_lineup/bridge?token={binding.token}")
    try:
        assert ws.status == 101
        assert poll(lambda: dev.host._connections, within_s=10)  # the bridge is up
        for i in range(1, 121):  # ~96 MB of answers, far over 16 MiB, never read meanwhile
            ws.send_text(json.dumps({"id": i, "op": "get"}))
        assert poll(lambda: not dev.host._connections, within_s=30)  # closed, queue dropped
        answers, code = _answers_then_close(ws)  # what was on the wire, then the close frame
        assert code == 1008
        assert answers <= 80  # of 120: the rest was dropped with the queue
    finally:
        ws.close()
    # the Host is fine: a fresh bridge answers
    with _connect(dev, binding.token) as fresh:
        assert len(_ask(fresh, {"id": 1, "op": "get"})["result"]["data"]["blob"]) == 800 * 1024


@pytest.mark.parametrize(
    ("limits", "size", "gets"),
    [
        ({"frames": 1 << 30, "wire_bytes": 4 << 20}, 800 * 1024, 40),
        ({"frames": 8, "wire_bytes": 1 << 30}, 8 * 1024, 3000),
    ],
    ids=["bytes", "frames"],
)
def test_each_bound_alone_closes_an_unread_bridge(
    dev: DevServer, limits: dict[str, int], size: int, gets: int
) -> None:
    # catches: either half of the per-bridge bound dropped from `_SurfaceBridge._enqueue`
    from lineup_runtime_lite.web import BridgeLimits

    dev.host.bridge_limits = BridgeLimits(all_wire_bytes=1 << 40, **limits)
    binding = dev.host.surface_token(_instance(dev, size=size))
    host, port = address(dev.urls.surface_origin)
    ws = RawWebSocket(host, port, f"/_lineup/bridge?token={binding.token}")
    try:
        assert poll(lambda: dev.host._connections, within_s=10)
        for i in range(1, gets + 1):
            ws.send_text(json.dumps({"id": i, "op": "get"}))
        assert poll(lambda: not dev.host._connections, within_s=30)
        answers, code = _answers_then_close(ws)
        assert code == 1008
        assert answers < gets
    finally:
        ws.close()


def test_many_unread_bridges_share_one_bound(dev: DevServer) -> None:
    # catches: the `all_wire_bytes` check dropped from `_SurfaceBridge._enqueue`
    from lineup_runtime_lite.web import BridgeLimits

    dev.host.bridge_limits = BridgeLimits(wire_bytes=1 << 30, all_wire_bytes=8 << 20)
    binding = dev.host.surface_token(_instance(dev, size=800 * 1024))
    host, port = address(dev.urls.surface_origin)
    clients = [RawWebSocket(host, port, f"/_lineup/bridge?token={binding.token}") for _ in "ab"]
    try:
        assert poll(lambda: len(dev.host._connections) == 2, within_s=10)
        for ws in clients:
            for i in range(1, 41):  # 32 MB each, never read meanwhile
                ws.send_text(json.dumps({"id": i, "op": "get"}))
        assert poll(lambda: not dev.host._connections, within_s=30)
        for ws in clients:
            answers, code = _answers_then_close(ws)
            assert code == 1008
            assert answers < 40
        assert dev.host.bridge_bytes == 0  # every queue dropped, nothing counted twice
    finally:
        for ws in clients:
            ws.close()


def test_a_client_that_reads_gets_every_answer(dev: DevServer) -> None:
    binding = dev.host.surface_token(_instance(dev, size=200 * 1024))
    with _connect(dev, binding.token) as ws:
        for i in range(1, 201):  # 40 MB through one bridge, read as it comes
            assert _ask(ws, {"id": i, "op": "get"})["result"]["revision"] == 1


def test_at_most_16_subscriptions_per_bridge(dev: DevServer) -> None:
    binding = dev.host.surface_token(_instance(dev))
    with _connect(dev, binding.token) as ws:
        for i in range(1, 13):
            assert _ask(ws, {"id": i, "op": "subscribe"}) == {"id": i, "result": {}}
        for i in range(13, 17):  # operations subscriptions count too
            assert _ask(ws, {"id": i, "op": "subscribe", "what": "operations"})["result"] == {}
        refused = _ask(ws, {"id": 17, "op": "subscribe"})
        assert refused["error"]["code"] == "limit_exceeded", refused
        refused = _ask(ws, {"id": 18, "op": "subscribe", "what": "operations"})
        assert refused["error"]["code"] == "limit_exceeded", refused
        # a flood of subscribes: each refused, none adds a listener
        for i in range(1000, 3000):
            ws.send(json.dumps({"id": i, "op": "subscribe"}))
        codes: set[int] = set()
        while len(codes) < 2000:
            answer = json.loads(ws.recv(timeout=10))
            if "error" in answer:
                assert answer["error"]["code"] == "limit_exceeded"
                codes.add(answer["id"])
        # the same id twice would leak the first: refused
        again = _ask(ws, {"id": 3, "op": "subscribe"})
        assert again["error"]["code"] == "usage_invalid", again
        assert _ask(ws, {"id": 19, "op": "unsubscribe", "sub": 2})["result"] == {}
        assert _ask(ws, {"id": 20, "op": "subscribe"})["result"] == {}
        # a change reaches each of the 16 once, no more
        dev.rt.call("fill-2", "conv", "demo.fill", {"size": 11})
        dev.rt.settle()
        seen: set[int] = set()
        while len(seen) < 12:
            frame = json.loads(ws.recv(timeout=10))
            if frame.get("frame") == "session_data.changed":
                assert frame["sub"] not in seen
                seen.add(frame["sub"])
        assert seen == {1, *range(3, 13), 20}


def _surface_loaded(dev: DevServer, instance: str) -> int:
    timeline = dev.host.state()["timeline"]
    return sum(
        1 for e in timeline if e.get("event") == "surface_loaded" and e["instance"] == instance
    )


def test_ready_counts_once_per_page_load(dev: DevServer) -> None:
    instance = _instance(dev)
    binding = dev.host.surface_token(instance)
    with _connect(dev, binding.token) as ws:
        answers = [_ask(ws, {"id": i, "op": "ready", "load": "load-1"}) for i in range(1, 301)]
    assert all(a["result"] == {"applied": False} for a in answers[1:])  # ignored
    assert _surface_loaded(dev, instance) == 1
    # the same load after a bridge reconnect: still the one load
    with _connect(dev, binding.token) as ws:
        assert _ask(ws, {"id": 1, "op": "ready", "load": "load-1"})["result"]["applied"] is False
        # a reload (a new page load) counts again, once
        for i in range(2, 50):
            _ask(ws, {"id": i, "op": "ready", "load": "load-2"})
    assert _surface_loaded(dev, instance) == 2
    # a client that names no load: its bridge is its load
    for _ in range(2):
        with _connect(dev, binding.token) as ws:
            for i in range(1, 20):
                _ask(ws, {"id": i, "op": "ready"})
    assert _surface_loaded(dev, instance) == 4


def test_the_timeline_keeps_the_last_1000_entries_per_conversation(dev: DevServer) -> None:
    host = dev.host
    before = host.state()["timeline_next"]
    for i in range(2_500):
        host._note({"source": "host", "event": "x", "conversation_id": "a", "n": i})
    host._note({"source": "host", "event": "x", "conversation_id": "b", "n": 0})
    state = host.state(before)
    mine = [e["n"] for e in state["timeline"] if e.get("conversation_id") == "a"]
    assert mine == list(range(1_500, 2_500))  # the last 1,000, oldest first
    assert [e["n"] for e in state["timeline"] if e.get("conversation_id") == "b"] == [0]
    assert state["timeline_next"] == before + 2_501
    assert host.state(state["timeline_next"])["timeline"] == []


# -- origins --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("origin", "accepted"),
    [
        ("null", True),
        ("own", True),
        ("http://evil.example", False),
        ("host", False),
        ("http://127.0.0.1:{s}", False),
        (None, False),
    ],
    ids=["null", "own", "foreign", "the-host-origin", "surface-port-by-ip", "none"],
)
def test_the_bridge_accepts_only_a_sandboxed_frame_or_its_own_origin(
    dev: DevServer, origin: str | None, accepted: bool
) -> None:
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect
    from websockets.typing import Origin

    binding = dev.host.surface_token(_instance(dev))
    _, port = address(dev.urls.surface_origin)
    named = {"own": dev.urls.surface_origin, "host": dev.urls.host_origin}.get(origin or "", origin)
    given = Origin(named.format(s=port)) if named is not None else None
    if accepted:
        with connect(_bridge_url(dev, binding.token), origin=given) as ws:
            assert _ask(ws, {"id": 1, "op": "get"})["result"]["revision"] == 1
        return
    with pytest.raises(InvalidStatus) as refused:
        connect(_bridge_url(dev, binding.token), origin=given)
    assert refused.value.response.status_code == 403


def test_the_dev_urls_name_127_0_0_1_for_the_host_and_localhost_for_surfaces(
    dev: DevServer,
) -> None:
    urls = dev.urls
    assert urls.host_origin.startswith("http://127.0.0.1:")
    assert urls.surface_origin.startswith("http://localhost:")
    assert urls.open_url == f"{urls.host_origin}/?token={dev.host.host_token}"
    assert urls.mcp_url == f"{urls.host_origin}/mcp"
    binding = dev.host.surface_token(_instance(dev))
    status, _, _ = _http(urls.surface_origin, "GET", f"/s/{binding.token}/index.html")
    assert status == 200


def test_localhost_on_the_host_port_is_redirected_before_any_cookie(dev: DevServer) -> None:
    _, port = address(dev.urls.host_origin)
    token = dev.host.host_token
    on_localhost = {"Host": f"localhost:{port}"}
    status, headers, _ = _http(dev.urls.host_origin, "GET", f"/?token={token}", on_localhost)
    assert status in (307, 308)
    assert headers["location"] == f"http://127.0.0.1:{port}/?token={token}"
    assert "set-cookie" not in headers
    status, headers, _ = _http(dev.urls.host_origin, "GET", "/", on_localhost)
    assert status in (307, 308) and headers["location"] == f"http://127.0.0.1:{port}/"
    assert "set-cookie" not in headers
    # anything else on that name: 421 naming the right URL (the cookie would not be sent)
    cookie = {**on_localhost, "Cookie": f"lineup_dev_token={token}"}
    for method, path in [
        ("GET", "/_lineup/api/state"),
        ("POST", "/_lineup/api/call"),
        ("POST", "/mcp"),
        ("GET", "/mcp"),
        ("GET", "/_lineup/host.js"),
    ]:
        status, headers, body = _http(dev.urls.host_origin, method, path, cookie)
        assert status == 421, (method, path, status, body)
        assert f"http://127.0.0.1:{port}/" in body and "set-cookie" not in headers
    bearer = {**on_localhost, "Authorization": f"Bearer {token}"}
    assert _http(dev.urls.host_origin, "POST", "/mcp", bearer)[0] == 421
    # on 127.0.0.1 the page sets the cookie
    status, headers, _ = _http(
        dev.urls.host_origin, "GET", f"/?token={token}", {"Host": f"127.0.0.1:{port}"}
    )
    assert status == 303 and "lineup_dev_token=" in headers["set-cookie"]
    assert "httponly" in headers["set-cookie"].lower()


def test_the_surface_origin_answers_only_localhost(dev: DevServer) -> None:
    _, port = address(dev.urls.surface_origin)
    binding = dev.host.surface_token(_instance(dev))
    for name in (f"127.0.0.1:{port}", "evil.example", f"localhost:{port + 1}"):
        status, _, _ = _http(
            dev.urls.surface_origin, "GET", f"/s/{binding.token}/index.html", {"Host": name}
        )
        assert status in (403, 421), name
    status, _, _ = _http(
        dev.urls.surface_origin,
        "GET",
        f"/s/{binding.token}/index.html",
        {"Host": f"localhost:{port}"},
    )
    assert status == 200


def test_the_surface_origin_listens_on_what_localhost_resolves_to(dev: DevServer) -> None:
    _, port = address(dev.urls.surface_origin)
    families = {a[0] for a in socket.getaddrinfo("localhost", port, type=socket.SOCK_STREAM)}
    assert families
    for family in families:
        addr = socket.getaddrinfo("localhost", port, family, socket.SOCK_STREAM)[0][4]
        with socket.socket(family, socket.SOCK_STREAM) as s:
            s.settimeout(5)
            s.connect(addr)  # refused would raise


def test_the_csps_name_the_exact_origins(dev: DevServer) -> None:
    token = dev.host.host_token
    status, headers, _ = _http(
        dev.urls.host_origin, "GET", "/", {"Cookie": f"lineup_dev_token={token}"}
    )
    assert status == 200
    host_csp = _directives(headers["content-security-policy"])
    assert host_csp["frame-src"] == [dev.urls.surface_origin]
    assert host_csp["connect-src"] == [dev.urls.host_origin]
    assert host_csp["frame-ancestors"] == ["'none'"]
    binding = dev.host.surface_token(_instance(dev))
    status, headers, _ = _http(dev.urls.surface_origin, "GET", f"/s/{binding.token}/index.html")
    surface_csp = _directives(headers["content-security-policy"])
    ws_origin = dev.urls.surface_origin.replace("http://", "ws://", 1)
    assert surface_csp["connect-src"] == [dev.urls.surface_origin, ws_origin]
    assert surface_csp["frame-ancestors"] == [dev.urls.host_origin]


def _directives(csp: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for part in csp.split(";"):
        words = part.split()
        if words:
            out[words[0]] = words[1:]
    return out


# -- the Surface origin's path check (round-3 gap) -------------------------------------------
def test_a_surface_path_never_leaves_surface(dev: DevServer) -> None:
    # catches: `surface_file` serving a path the build's manifest does not list
    # (web/_devhost.py, `AsyncRuntime.app_file`)
    binding = dev.host.surface_token(_instance(dev))
    session = dev.host._session_of(binding)
    assert session is not None
    root = dev.host.apps_dir / binding.scope / session["version"]
    assert not (root / "surface").exists()  # the demo app has no surface/: one is planted
    (root / "surface").mkdir()
    (root / "surface" / "index.html").write_text("<p>planted surface</p>")
    (root / "secret.txt").write_text("SECRET")
    for path in (
        f"/s/{binding.token}/%2e%2e/secret.txt",
        f"/s/{binding.token}/%2E%2E/secret.txt",
        f"/s/{binding.token}/..%2fsecret.txt",
        f"/s/{binding.token}/sub/%2e%2e/%2e%2e/secret.txt",
    ):
        status, _, body = _http(dev.urls.surface_origin, "GET", path)
        assert status == 404 and "SECRET" not in body, (path, status)
    status, _, body = _http(dev.urls.surface_origin, "GET", f"/s/{binding.token}/index.html")
    assert status == 200 and "planted" not in body  # the page for an app without a Surface


# -- tokens ---------------------------------------------------------------------------------
def test_a_wrong_host_token_cookie_is_refused(dev: DevServer) -> None:
    # catches: `authorized` accepting any non-empty cookie (web/_origins.py)
    token = dev.host.host_token
    wrong = ("y" if token.startswith("x") else "x") + token[1:]  # never the token itself
    for path in ("/", "/_lineup/api/state"):
        status, _, _ = _http(
            dev.urls.host_origin, "GET", path, {"Cookie": f"lineup_dev_token={wrong}"}
        )
        assert status == 401, path
        status, _, _ = _http(
            dev.urls.host_origin, "GET", path, {"Cookie": f"lineup_dev_token={token}"}
        )
        assert status == 200, path


MALFORMED = ["é" * 8, "x" * 2048, "\u2603" + "a" * 1100, "tok%00en"]


@pytest.mark.parametrize("bad", MALFORMED, ids=["non-ascii", "over-1k", "both", "nul"])
def test_a_malformed_host_token_is_refused_like_a_wrong_one(dev: DevServer, bad: str) -> None:
    from urllib.parse import quote

    origin = dev.urls.host_origin
    tries = [
        ("GET", f"/?token={quote(bad)}", {}),
        ("GET", "/", {"Cookie": f"lineup_dev_token={bad}"}),
        ("GET", "/_lineup/api/state", {"Cookie": f"lineup_dev_token={bad}"}),
        ("GET", "/_lineup/api/state", {"Authorization": f"Bearer {bad}"}),
        ("POST", "/mcp", {"Authorization": f"Bearer {bad}"}),
    ]
    for method, path, headers in tries:
        status, _, body = _http(origin, method, path, headers)
        assert status in (401, 403), (method, path, headers, status, body)
        assert "Traceback" not in body


@pytest.mark.parametrize("bad", MALFORMED, ids=["non-ascii", "over-1k", "both", "nul"])
def test_a_malformed_surface_token_is_refused_like_a_wrong_one(dev: DevServer, bad: str) -> None:
    from urllib.parse import quote

    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect
    from websockets.typing import Origin

    origin = dev.urls.surface_origin
    for path in (f"/s/{quote(bad)}/index.html", f"/_lineup/app?token={quote(bad)}"):
        status, _, body = _http(origin, "GET", path)
        assert status in (401, 403), (path, status, body)
        assert "Traceback" not in body
    with pytest.raises(InvalidStatus) as refused:
        connect(_bridge_url(dev, quote(bad)), origin=Origin("null"))
    assert refused.value.response.status_code in (401, 403)
