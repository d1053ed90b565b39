"""`Runtime.call_many`: several Agent calls accepted in one runtime turn, answered in order,
before anything they start can progress (scenario `calls = [...]`)."""

from __future__ import annotations

from pathlib import Path

from lineup_runtime_lite import Runtime
from tests.runtime.conftest import message, ready


def test_the_first_starts_and_the_rest_queue(rt: Runtime, todo_bundle: Path) -> None:
    rt.install(todo_bundle)
    answers = rt.call_many(
        [(f"a{i}", "conv", "todo.add", {"title": f"item {i}"}) for i in range(1, 6)]
    )
    assert [(m["id"], m.get("activation")) for m in answers] == [
        ("a1:accepted", "starting"),
        *((f"a{i}:accepted", "queued") for i in range(2, 6)),
    ]
    rt.settle()
    counts = [message(rt, f"a{i}:result")["result"]["count"] for i in range(1, 6)]
    assert counts == [1, 2, 3, 4, 5]  # delivered in arrival order
    results = [m["id"] for m in rt.outbox.all() if m["stage"] == "result"]
    assert results == [f"a{i}:result" for i in range(1, 6)]


def test_rejections_and_ready_sessions_answer_in_place(probe: Runtime) -> None:
    ready(probe)
    answers = probe.call_many(
        [
            ("e1", "conv", "probe.echo", {"text": "one"}),
            ("bad", "conv", "probe.echo", {"txt": "typo"}),
            ("nope", "conv", "probe.nothing", {}),
            ("e2", "conv", "probe.echo", {"text": "two"}),
        ]
    )
    assert [m["id"] for m in answers] == ["e1:result", "bad:error", "nope:error", "e2:result"]
    assert [m.get("error", {}).get("code") for m in answers] == [
        None,
        "invalid_params",
        "unknown_method",
        None,
    ]


def test_an_empty_turn_answers_nothing(probe: Runtime) -> None:
    assert probe.call_many([]) == []
