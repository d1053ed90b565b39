"""Routing a call (SPEC 5.2): rejections, idempotency, activation, early-call queue."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lineup_runtime_lite import Runtime, VirtualClock
from tests.runtime.conftest import message, ready


def stages(rt: Runtime, call_id: str) -> list[str]:
    return [m["stage"] for m in rt.outbox.all() if m["call_id"] == call_id]


def test_inventory_hides_delivery_internals(probe: Runtime) -> None:
    inv = {t["method"]: t for t in probe.inventory()}
    assert "probe.echo" in inv
    for tool in inv.values():
        assert set(tool) == {
            "method",
            "app_scope",
            "description",
            "input_schema",
            "result_schema",
            "activation",
            "long_running",
        }


def test_first_call_starts_activation_then_ready_then_result(probe: Runtime) -> None:
    msg = probe.call("c1", "conv", "probe.echo", {"text": "hello"})
    assert msg["stage"] == "accepted" and msg["activation"] == "starting"
    assert set(msg) == {"id", "call_id", "app_scope", "kind", "stage", "at", "activation"}
    probe.settle()
    assert stages(probe, "c1") == ["accepted", "activation_ready", "result"]
    final = message(probe, "c1:result")
    assert final["result"] == "hello"
    # a ready session answers at once with only the final item
    now = probe.call("c2", "conv", "probe.echo", {"text": "again"})
    assert now["kind"] == "result" and now["result"] == "again"
    assert stages(probe, "c2") == ["result"]


def test_rejections_persist_nothing(probe: Runtime) -> None:
    ready(probe)
    before = probe.store_dump()
    unknown = probe.call("r1", "conv", "probe.nope", {})
    assert unknown["error"]["code"] == "unknown_method"
    bad = probe.call("r2", "conv", "probe.echo", {"text": 2, "extra": True})
    assert bad["error"]["code"] == "invalid_params"
    details = bad["error"]["details"]
    assert {d["path"] for d in details} == {"/text", "/extra"}
    assert all({"path", "message", "expected", "value"} <= set(d) for d in details)
    missing = probe.call("r3", "conv", "probe.echo", {})
    assert missing["error"]["details"][0]["path"] == "/text"
    coerced = probe.call("r4", "conv", "probe.write", {"data": {}, "expected_revision": "2"})
    assert coerced["error"]["code"] == "invalid_params"
    probe.call("c-ok", "conv", "probe.echo", {"text": "x"})
    after_ok = probe.store_dump()
    conflict = probe.call("c-ok", "conv", "probe.echo", {"text": "different"})
    assert conflict["error"]["code"] == "call_id_conflict"
    other_conv = probe.call("c-ok", "other", "probe.echo", {"text": "x"})
    assert other_conv["error"]["code"] == "call_id_conflict"
    assert probe.store_dump() == after_ok
    for table in ("calls", "receipts", "outbox"):
        assert len(after_ok[table]) == len(before[table]) + 1


def test_repeat_returns_latest_persisted_message_without_new_outbox(probe: Runtime) -> None:
    first = probe.call("t1", "conv", "probe.fg", {})
    assert first["stage"] == "accepted"
    probe.settle()
    n = len(probe.outbox.all())
    assert probe.call("t1", "conv", "probe.fg", {}) == first
    assert len(probe.outbox.all()) == n
    assert probe.host.event("foreground_confirmed", conversation="conv", scope="probe")
    probe.settle()
    final = message(probe, "t1:result")
    n = len(probe.outbox.all())
    assert probe.call("t1", "conv", "probe.fg", {}) == final
    assert len(probe.outbox.all()) == n
    # an at-once call repeated after its answer
    again = probe.call("t2", "conv", "probe.echo", {"text": "z"})
    assert probe.call("t2", "conv", "probe.echo", {"text": "z"}) == again


def test_early_calls_queue_in_arrival_order(probe: Runtime) -> None:
    trigger = probe.call("fg", "conv", "probe.fg", {})
    assert trigger["activation"] == "starting"
    probe.settle()
    queued = [probe.call(f"a{i}", "conv", "probe.append", {"item": f"i{i}"}) for i in range(3)]
    assert [m["activation"] for m in queued] == ["queued"] * 3
    assert probe.surface("conv", "probe").get().revision == 0  # nothing ran yet
    probe.host.event("foreground_confirmed", conversation="conv", scope="probe")
    probe.settle()
    assert probe.surface("conv", "probe").get().data == {"items": ["i0", "i1", "i2"]}
    results = [
        m for m in probe.outbox.all() if m["stage"] == "result" and m["call_id"].startswith("a")
    ]
    assert [m["call_id"] for m in results] == ["a0", "a1", "a2"]
    assert [m["result"] for m in results] == [1, 2, 3]
    assert stages(probe, "fg") == ["accepted", "activation_ready", "result"]
    assert stages(probe, "a0") == ["accepted", "result"]  # progress goes to the trigger only


def test_activation_failure_answers_each_waiting_call_once(probe: Runtime) -> None:
    probe.call("fg", "conv", "probe.fg", {})
    probe.settle()
    for i in range(3):
        probe.call(f"a{i}", "conv", "probe.append", {"item": "x"})
    assert probe.host.event("activation_failed", conversation="conv", scope="probe")
    probe.settle()
    assert stages(probe, "fg") == ["accepted", "activation_failed", "error"]
    for cid in ("fg", "a0", "a1", "a2"):
        final = [message(probe, f"{cid}:error")]
        assert len(final) == 1
        assert final[0]["error"]["code"] == "activation_failed"
        assert final[0]["error"]["details"] == {"reason": "host_failed"}
    assert probe.surface("conv", "probe").get().revision == 0  # no handler ran
    # a stale confirmation for the failed instance is ignored
    assert not probe.host.event("foreground_confirmed", conversation="conv", scope="probe")


def test_user_left_cancels_the_activation(probe: Runtime) -> None:
    probe.call("fg", "conv", "probe.fg", {})
    probe.settle()
    probe.host.event("user_left", conversation="conv", scope="probe")
    probe.settle()
    err = message(probe, "fg:error")
    assert err["error"]["code"] == "activation_cancelled"
    assert err["error"]["details"] == {"reason": "user_left"}


def test_foreign_confirmation_is_ignored(probe: Runtime) -> None:
    probe.call("fg", "conv", "probe.fg", {})
    probe.settle()
    inst = probe.host.simulator.instance_for("conv", "probe")
    assert inst is not None
    assert not probe.host.event(
        "foreground_confirmed", conversation="other", scope="probe", instance=inst
    )
    assert not probe.host.event("surface_loaded", conversation="conv", scope="probe")
    assert stages(probe, "fg") == ["accepted"]


def test_activation_timeout_on_the_runtime_clock(probe: Runtime, clock: VirtualClock) -> None:
    probe.call("fg", "conv", "probe.fg", {})
    probe.settle()
    clock.advance(59_000)
    assert stages(probe, "fg") == ["accepted"]
    clock.advance(1_000)
    err = message(probe, "fg:error")
    assert err["error"]["details"] == {"reason": "timeout"}


def test_activation_not_required_never_starts_the_app(probe: Runtime) -> None:
    msg = probe.call("p1", "conv", "probe.peek", {})
    assert msg["error"]["code"] == "app_not_running"
    dump = probe.store_dump()
    assert dump["app_sessions"] == [] and dump["activations"] == []
    assert probe.call("p1", "conv", "probe.peek", {}) == msg  # persisted final error
    ready(probe)
    ok = probe.call("p2", "conv", "probe.peek", {})
    assert ok["kind"] == "result"


def test_sessions_are_per_conversation(probe: Runtime) -> None:
    ready(probe, "one")
    ready(probe, "two")
    probe.call("w1", "one", "probe.append", {"item": "a"})
    assert probe.surface("one", "probe").get().data == {"items": ["a"]}
    assert probe.surface("two", "probe").get().revision == 0


def test_outbox_fetch_and_ack(probe: Runtime) -> None:
    ready(probe)
    items = probe.outbox.fetch(10)
    assert [m["stage"] for m in items] == ["accepted", "activation_ready", "result"]
    assert probe.outbox.fetch(10) == items  # at least once: unacked items come again
    probe.outbox.ack([items[0]["id"]])
    assert probe.outbox.fetch(10) == items[1:]
    probe.outbox.ack([m["id"] for m in items])
    assert probe.outbox.fetch(10) == []


def _final(rt: Runtime, call_id: str) -> Mapping[str, Any]:
    return next(m for m in rt.outbox.all() if m["call_id"] == call_id and m["kind"] != "receipt")
