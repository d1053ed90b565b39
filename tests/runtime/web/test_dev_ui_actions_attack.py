"""An outside attack on the `lineup dev` Surface bridge's `act` (SPEC 17): malformed and
hostile messages are answered with a stable code (or ignored, for what is not a request),
persist nothing, and leave the bridge and the runtime serving."""

from __future__ import annotations

from typing import Any

import pytest

from lineup_runtime_lite.internals import engine_of
from lineup_runtime_lite.web.browser import DevServer
from tests.runtime.web.dev_ui_actions_kit import _act, _answers, _binding, _connect, _item, dev

__all__ = ["dev"]

pytest.importorskip("websockets", reason="the web extra (websockets) is not installed")


def _without(key: str) -> dict[str, Any]:
    msg = _act(1, "todo.toggle", {"id": "x"}, 1)
    del msg[key]
    return msg


MALFORMED: list[tuple[str, dict[str, Any], str]] = [
    ("no client", _without("client"), "invalid_params"),
    ("no seq", _without("seq"), "invalid_params"),
    ("no name", _without("name"), "invalid_params"),
    ("client int", {**_act(1, "todo.toggle", {"id": "x"}, 1), "client": 7}, "invalid_params"),
    ("client ':'", {**_act(1, "todo.toggle", {"id": "x"}, 1), "client": "a:b"}, "invalid_params"),
    ("client 65", {**_act(1, "todo.toggle", {"id": "x"}, 1), "client": "c" * 65}, "invalid_params"),
    ("client é", {**_act(1, "todo.toggle", {"id": "x"}, 1), "client": "é"}, "invalid_params"),
    ("seq 1.0", _act(1, "todo.toggle", {"id": "x"}, 1.0), "invalid_params"),  # type: ignore[arg-type]
    ("seq true", _act(1, "todo.toggle", {"id": "x"}, True), "invalid_params"),
    ("seq '1'", _act(1, "todo.toggle", {"id": "x"}, "1"), "invalid_params"),  # type: ignore[arg-type]
    ("seq null", _act(1, "todo.toggle", {"id": "x"}, None), "invalid_params"),  # type: ignore[arg-type]
    ("seq -1", _act(1, "todo.toggle", {"id": "x"}, -1), "invalid_params"),
    ("seq 2^53", _act(1, "todo.toggle", {"id": "x"}, 2**53), "invalid_params"),
    (
        "name list",
        {**_act(1, "todo.toggle", {"id": "x"}, 1), "name": ["todo.toggle"]},
        "invalid_params",
    ),
    ("params list", {**_act(1, "todo.toggle", {"id": "x"}, 1), "params": ["x"]}, "invalid_params"),
    ("params null", {**_act(1, "todo.toggle", {"id": "x"}, 1), "params": None}, "invalid_params"),
    ("a tool", _act(1, "todo.add", {"title": "x"}, 1), "unknown_action"),
]


@pytest.mark.parametrize(("msg", "want"), [m[1:] for m in MALFORMED], ids=[m[0] for m in MALFORMED])
def test_a_malformed_act_is_answered_once_with_its_code_and_the_bridge_serves(
    dev: DevServer, msg: dict[str, Any], want: str
) -> None:
    item = _item(dev)
    before = engine_of(dev.rt).store.dump()
    with _connect(dev, _binding(dev).token) as ws:
        [refused] = _answers(ws, msg)
        assert refused["error"]["code"] == want and "accepted" not in refused
        assert engine_of(dev.rt).store.dump() == before
        ok = _answers(ws, _act(2, "todo.toggle", {"id": item}, 1))
    assert ok[0]["accepted"] == 1 and ok[1]["outcome"]["revision"] == 2


def test_extra_fields_are_ignored_and_a_reused_id_answers_each_request(dev: DevServer) -> None:
    item = _item(dev)
    with _connect(dev, _binding(dev).token) as ws:
        first = _answers(ws, {**_act(5, "todo.toggle", {"id": item}, 1), "x": {"y": 1}})
        assert first[0]["accepted"] == 1
        # the same request id again for the next seq: answered on its own
        second = _answers(ws, _act(5, "todo.toggle", {"id": item}, 2))
        assert second[0]["accepted"] == 2 and second[1]["outcome"]["revision"] == 3


@pytest.mark.parametrize(
    "text",
    [
        "[" * 5_000 + "]" * 5_000,  # nesting past the parser's recursion
        '{"id": 1, "op": "act", "params": ' + '{"a":' * 5_000 + "1" + "}" * 5_001,
        "not json",
        "[1, 2]",
        '{"id": 1, "op": "act", "name": "todo.toggle", "client": "c1", "seq": 1e999}',
    ],
    ids=["deep array", "deep params", "not json", "not an object", "seq inf"],
)
def test_a_hostile_text_never_drops_the_bridge(dev: DevServer, text: str) -> None:
    item = _item(dev)
    with _connect(dev, _binding(dev).token) as ws:
        ws.send(text)
        ok = _answers(ws, _act(2, "todo.toggle", {"id": item}, 1))
    assert ok[0]["accepted"] == 1 and ok[1]["outcome"]["revision"] == 2


def test_ten_megabytes_of_params_are_refused_before_acceptance(dev: DevServer) -> None:
    item = _item(dev)
    before = engine_of(dev.rt).store.dump()
    with _connect(dev, _binding(dev).token) as ws:
        big = _act(1, "todo.rename", {"id": item, "title": "x" * 10_000_000}, 1)
        [refused] = _answers(ws, big)
        assert refused["error"]["code"] == "params_too_large" and "accepted" not in refused
        assert engine_of(dev.rt).store.dump() == before
        ok = _answers(ws, _act(2, "todo.toggle", {"id": item}, 1))
    assert ok[0]["accepted"] == 1
