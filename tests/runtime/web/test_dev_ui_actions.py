"""UI Actions over `lineup dev`'s Surface bridge without a browser (SPEC 17, 16.3): `act`
answered twice, a rejection before acceptance answered once, the Surface token's `act`
scope (its own instance, while that instance is its App session's), and the timeline's `ui`
entries with their origin."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lineup_build.init import init_project
from lineup_runtime_lite import VirtualClock
from lineup_runtime_lite.web import Binding
from lineup_runtime_lite.web.browser import DevServer
from tests.runtime.web.dev_ui_actions_kit import _act, _answers, _binding, _connect, _item, dev

__all__ = ["dev"]

pytest.importorskip("websockets", reason="the web extra (websockets) is not installed")


def test_act_is_answered_accepted_then_with_its_outcome(dev: DevServer) -> None:
    item = _item(dev)
    with _connect(dev, _binding(dev).token) as ws:
        accepted, outcome = _answers(ws, _act(1, "todo.toggle", {"id": item}, 1))
    assert accepted == {"id": 1, "accepted": 1, "action_id": "c1:1"}
    assert outcome == {
        "id": 1,
        "outcome": {
            "action_id": "c1:1",
            "result": {"id": item, "title": "buy milk", "done": True},
            "revision": 2,
        },
    }
    # the timeline: the action beside the call, origin `ui`, with its outcome
    entries = dev.host.state()["timeline"]
    [ui] = [e for e in entries if e["source"] == "ui"]
    assert ui["origin"] == "ui" and ui["action_id"] == "c1:1" and ui["revision"] == 2
    assert {e["origin"] for e in entries} >= {"agent", "ui"}
    assert all(e["origin"] in ("agent", "ui", "host", "runtime", "build") for e in entries)


def test_a_resend_is_answered_both_ways_again_and_applied_once(dev: DevServer) -> None:
    item = _item(dev)
    with _connect(dev, _binding(dev).token) as ws:
        first = _answers(ws, _act(1, "todo.toggle", {"id": item}, 1))
    with _connect(dev, _binding(dev).token) as ws:  # a new bridge: the SDK resends
        again = _answers(ws, _act(7, "todo.toggle", {"id": item}, 1))
    assert [sorted(a) for a in again] == [["accepted", "action_id", "id"], ["id", "outcome"]]
    assert again[1]["outcome"] == first[1]["outcome"]
    assert dev.rt.surface("conv", "todo").get().data["items"][0]["done"] is True


@pytest.mark.parametrize(
    ("name", "params", "seq", "code"),
    [
        ("todo.rename", {"id": "x", "title": ""}, 1, "invalid_params"),
        ("todo.add", {"title": "x"}, 1, "unknown_action"),  # an Agent tool
        ("pomodoro.start", {}, 1, "unknown_action"),  # another app's
        ("todo.toggle", {"id": "x"}, 2, "action_out_of_order"),
        ("todo.toggle", {"id": "x"}, 0, "invalid_params"),
    ],
)
def test_a_rejection_before_acceptance_is_answered_once(
    dev: DevServer, name: str, params: dict[str, Any], seq: int, code: str
) -> None:
    item = _item(dev)
    with _connect(dev, _binding(dev).token) as ws:
        [refused] = _answers(ws, _act(1, name, params, seq))
        assert refused["error"]["code"] == code and "accepted" not in refused
        # nothing persisted, no seq used: seq 1 is the next one
        ok = _answers(ws, _act(2, "todo.toggle", {"id": item}, 1))
    assert ok[0]["accepted"] == 1 and ok[1]["outcome"]["revision"] == 2
    [ui, _] = [e for e in dev.host.state()["timeline"] if e["source"] == "ui"]
    assert ui["error"]["code"] == code and ui["action_id"] is None


def test_a_business_refusal_is_the_outcome_and_the_queue_goes_on(dev: DevServer) -> None:
    item = _item(dev)
    with _connect(dev, _binding(dev).token) as ws:
        accepted, refused = _answers(ws, _act(1, "todo.delete", {"id": "gone"}, 1))
        assert accepted["accepted"] == 1
        assert refused["error"]["code"] == "app.not_found" and refused["action_id"] == "c1:1"
        ok = _answers(ws, _act(2, "todo.delete", {"id": item}, 2))
    assert ok[1]["outcome"]["result"] == {"id": item, "count": 0}


@pytest.mark.parametrize("key", ["instance", "conversation", "scope"])
def test_a_surface_token_acts_only_for_its_own_instance(dev: DevServer, key: str) -> None:
    mine, theirs = _item(dev, "mine"), _item(dev, "theirs", conversation="other")
    other = _binding(dev, "other")
    named = {"instance": other.instance, "conversation": "other", "scope": "pomodoro"}[key]
    with _connect(dev, _binding(dev).token) as ws:
        [refused] = _answers(ws, _act(1, "todo.toggle", {"id": theirs}, 1, **{key: named}))
        assert refused["error"]["code"] == "usage_invalid"
        # naming its own is fine
        own = {"instance": _binding(dev).instance, "conversation": "conv", "scope": "todo"}[key]
        ok = _answers(ws, _act(2, "todo.toggle", {"id": mine}, 1, **{key: own}))
    assert ok[1]["outcome"]["revision"] == 2
    assert dev.rt.surface("other", "todo").get().data["items"][0]["done"] is False


def test_a_token_whose_instance_is_no_longer_its_sessions_cannot_act(dev: DevServer) -> None:
    item = _item(dev)
    live = _binding(dev)
    # a token of an earlier instance of the same conversation's App session
    stale = Binding("stale-token", live.conversation_id, live.scope, "inst_earlier")
    dev.host._bindings[stale.token] = stale
    with _connect(dev, stale.token) as ws:
        [refused] = _answers(ws, _act(1, "todo.toggle", {"id": item}, 1))
    assert refused["error"]["code"] == "app_not_running"
    assert dev.rt.surface("conv", "todo").get().revision == 1


def test_replace_is_still_refused_on_the_bridge(dev: DevServer) -> None:
    _item(dev)
    with _connect(dev, _binding(dev).token) as ws:
        [refused] = _answers(ws, {"id": 1, "op": "replace", "data": {}, "expected_revision": 1})
    assert refused["error"]["code"] == "usage_invalid"
    assert "act" in refused["error"]["message"]


def test_the_dev_servers_connections_send_without_nagles_delay() -> None:
    """A bridge answers an action twice in quick succession (and a change frame beside it):
    with Nagle's algorithm on, the second small write waits for the browser's delayed ACK
    (~40 ms). The listening sockets name TCP, so asyncio sets TCP_NODELAY on what they
    accept."""
    import asyncio
    import socket

    from lineup_runtime_lite.internals import bind_localhost
    from lineup_runtime_lite.web import bind_free

    async def accepted_nodelay(listening: socket.socket) -> int:
        seen: list[int] = []

        async def on_client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            sock = writer.get_extra_info("socket")
            seen.append(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        server = await asyncio.start_server(on_client, sock=listening)
        async with server:
            host, port = listening.getsockname()[:2]
            _, writer = await asyncio.open_connection(host, port)
            while not seen:
                await asyncio.sleep(0.01)
            writer.close()
        return seen[0]

    assert asyncio.run(accepted_nodelay(bind_free(0))) != 0
    first, *others = bind_localhost(0)
    for sock in others:
        sock.close()
    assert asyncio.run(accepted_nodelay(first)) != 0


def test_a_bridge_holds_a_bounded_number_of_unanswered_actions(tmp_path: Path) -> None:
    """Actions waiting for their outcomes are bounded per bridge (`limit_exceeded` beyond,
    nothing persisted); an answered one makes room again."""
    from lineup_runtime_lite.web import BridgeLimits

    project = tmp_path / "todo"
    init_project(project, template="todo")
    actions = project / "todo_app" / "actions.py"
    actions.write_text(
        actions.read_text()
        + '''

@actions.action("todo.wait", timeout_s=10)
async def wait(ctx: ActionContext, seconds: float) -> None:
    """Wait a while.

    Args:
        seconds: How long.
    """
    import asyncio

    await asyncio.sleep(seconds)
'''
    )
    server = DevServer.start(project, clock=VirtualClock(), watch=False, db=tmp_path / "dev.db")
    try:
        server.host.bridge_limits = BridgeLimits(actions=2)
        _item(server)
        with _connect(server, _binding(server).token) as ws:
            for seq in (1, 2):
                ws.send(json.dumps(_act(seq, "todo.wait", {"seconds": 0.5}, seq)))
                while json.loads(ws.recv(timeout=10)).get("accepted") != seq:
                    pass
            [refused] = _answers(ws, _act(3, "todo.wait", {"seconds": 0}, 3))
            assert refused["error"]["code"] == "limit_exceeded"
            # nothing persisted, no seq used: once an outcome is in, seq 3 is accepted
            while "outcome" not in json.loads(ws.recv(timeout=10)):
                pass
            accepted, _ = _answers(ws, _act(4, "todo.wait", {"seconds": 0}, 3))
            assert accepted["accepted"] == 3
    finally:
        server.stop()
