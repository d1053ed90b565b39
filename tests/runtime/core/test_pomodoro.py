"""Pomodoro (SPEC 5.3, 5.4): receipts vs results, foreground-only start, durable deadlines."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lineup_build.trust import TrustStore
from lineup_runtime_lite import HostSimulator, Runtime, VirtualClock
from lineup_runtime_lite.core.messages import AgentMessage
from lineup_runtime_lite.core.pomodoro import IMPLEMENTED_KEYS
from lineup_sdk.catalog import CATALOG
from tests.runtime.conftest import message


@pytest.fixture()
def rt(store_rt: Runtime) -> Runtime:
    """This module's runtimes (`rt`, `probe`, `pomo`) run on the chosen store engine."""
    return store_rt


MIN = 60_000


def stages(rt: Runtime, call_id: str) -> list[str]:
    return [m["stage"] for m in rt.outbox.all() if m["call_id"] == call_id]


def start(rt: Runtime, cid: str = "s1", conv: str = "c1", **params: Any) -> AgentMessage:
    return rt.call(cid, conv, "pomodoro.start", params)


def confirm(rt: Runtime, conv: str = "c1") -> bool:
    return rt.host.event("foreground_confirmed", conversation=conv, scope="pomodoro")


def test_runtime_implements_exactly_the_catalog() -> None:
    assert frozenset(CATALOG) == IMPLEMENTED_KEYS


@pytest.mark.store
def test_happy_path(pomo: Runtime, clock: VirtualClock) -> None:
    acc = start(pomo, minutes=25, label="report")
    assert acc["stage"] == "accepted" and acc["activation"] == "starting"
    pomo.settle()
    assert not pomo.host.event("surface_loaded", conversation="c1", scope="pomodoro")
    assert stages(pomo, "s1") == ["accepted"]  # loading is not confirmation
    assert confirm(pomo)
    started = message(pomo, "s1:started")
    assert set(started) == {
        "id",
        "call_id",
        "app_scope",
        "kind",
        "stage",
        "at",
        "started_at",
        "ends_at",
    }
    assert started["ends_at"] == "2026-01-01T00:25:00.000Z"
    assert "activation_ready" not in stages(pomo, "s1")  # `started` implies ready
    clock.advance(25 * MIN - 1)
    assert stages(pomo, "s1") == ["accepted", "started"]
    clock.advance(1)
    result = message(pomo, "s1:result")["result"]
    assert result["status"] == "completed"
    assert result["ended_at"] == result["ends_at"]
    records = pomo.im_records("c1")
    assert (
        len(records) == 1
        and records[0]["status"] == "completed"
        and records[0]["label"] == "report"
    )
    ops = pomo.surface("c1", "pomodoro").operations()
    assert ops[0]["state"] == "completed"


@pytest.mark.store
def test_surface_loaded_without_confirmation_never_starts(
    pomo: Runtime, clock: VirtualClock
) -> None:
    start(pomo)
    pomo.settle()
    pomo.host.event("surface_loaded", conversation="c1", scope="pomodoro")
    clock.advance(30 * MIN)
    assert pomo.store_dump()["operations"] == []
    result = message(pomo, "s1:result")["result"]
    assert result == {"status": "not_started", "reason": "timeout"}
    assert pomo.im_records("c1") == []


@pytest.mark.store
def test_interrupt_while_starting(pomo: Runtime) -> None:
    start(pomo)
    pomo.settle()
    stop = pomo.call("i1", "c1", "pomodoro.interrupt", {})
    assert stop["result"] == {"status": "cancelled_starting"}
    assert message(pomo, "s1:result")["result"] == {
        "status": "not_started",
        "reason": "interrupted",
    }
    assert message(pomo, "s1:activation_cancelled")["reason"] == "interrupted"
    assert pomo.store_dump()["operations"] == [] and pomo.im_records("c1") == []
    assert not confirm(pomo)  # a late confirmation changes nothing


@pytest.mark.store
def test_interrupt_while_focusing(pomo: Runtime, clock: VirtualClock) -> None:
    start(pomo)
    pomo.settle()
    confirm(pomo)
    clock.advance(5 * MIN)
    stop = pomo.call("i1", "c1", "pomodoro.interrupt", {})
    assert stop["result"] == {"status": "interrupted"}
    result = message(pomo, "s1:result")["result"]
    assert result["status"] == "interrupted" and result["ended_at"] == "2026-01-01T00:05:00.000Z"
    assert len(pomo.im_records("c1")) == 1
    clock.advance(30 * MIN)  # the deadline lost the race: nothing more is written
    assert stages(pomo, "s1") == ["accepted", "started", "result"]
    assert len(pomo.im_records("c1")) == 1


@pytest.mark.store
def test_interrupt_with_nothing_running_creates_nothing(pomo: Runtime) -> None:
    stop = pomo.call("i1", "c1", "pomodoro.interrupt", {})
    assert stop["result"] == {"status": "nothing_running"}
    dump = pomo.store_dump()
    assert dump["app_sessions"] == [] and dump["activations"] == [] and dump["operations"] == []
    assert dump["host_intents"] == []


@pytest.mark.store
@pytest.mark.parametrize(
    ("event", "reason"), [("activation_failed", "host_failed"), ("user_left", "user_left")]
)
def test_activation_ends_before_start(pomo: Runtime, event: str, reason: str) -> None:
    start(pomo)
    pomo.settle()
    pomo.host.event(event, conversation="c1", scope="pomodoro")
    assert message(pomo, "s1:result")["result"] == {"status": "not_started", "reason": reason}
    assert pomo.store_dump()["operations"] == []


@pytest.mark.store
def test_user_leaving_while_focusing_changes_nothing(pomo: Runtime, clock: VirtualClock) -> None:
    start(pomo)
    pomo.settle()
    confirm(pomo)
    assert not pomo.host.event("user_left", conversation="c1", scope="pomodoro")
    clock.advance(25 * MIN)
    assert message(pomo, "s1:result")["result"]["status"] == "completed"


@pytest.mark.store
def test_second_start_is_rejected_other_conversation_independent(pomo: Runtime) -> None:
    start(pomo)
    second = start(pomo, cid="s2")
    assert second["error"]["code"] == "pomodoro_already_active"
    assert start(pomo, cid="s2") == second  # persisted final error
    pomo.settle()
    confirm(pomo)
    third = start(pomo, cid="s3")
    assert third["error"]["code"] == "pomodoro_already_active"
    other = start(pomo, cid="s4", conv="c2")
    assert other["stage"] == "accepted"


@pytest.mark.store
def test_duplicate_call_id_at_every_stage(pomo: Runtime, clock: VirtualClock) -> None:
    acc = start(pomo)
    pomo.settle()
    n = len(pomo.outbox.all())
    assert start(pomo) == acc
    confirm(pomo)
    started = message(pomo, "s1:started")
    n = len(pomo.outbox.all())
    assert start(pomo) == started
    assert len(pomo.outbox.all()) == n
    clock.advance(25 * MIN)
    final = message(pomo, "s1:result")
    n = len(pomo.outbox.all())
    assert start(pomo) == final
    assert len(pomo.outbox.all()) == n
    assert start(pomo, minutes=5)["error"]["code"] == "call_id_conflict"


def _reopen(db: Path, trust: TrustStore, clock: VirtualClock) -> Runtime:
    return Runtime.open(db, trust=trust, clock=clock, host=HostSimulator("manual"))


def test_restart_while_focusing_rearms_the_deadline(
    tmp_path: Path, trust: TrustStore, pomodoro_bundle: Path
) -> None:
    db = tmp_path / "rt.db"
    clock = VirtualClock()
    rt = _reopen(db, trust, clock)
    rt.install(pomodoro_bundle)
    start(rt)
    rt.settle()
    confirm(rt)
    clock.advance(10 * MIN)
    ends_at = message(rt, "s1:started")["ends_at"]
    rt.close()
    clock2 = VirtualClock()
    rt = _reopen(db, trust, clock2)
    try:
        assert clock2.now_ms() == clock.now_ms()  # virtual time persisted
        assert message(rt, "s1:started")["ends_at"] == ends_at  # not reset
        clock2.advance(15 * MIN - 1)
        assert stages(rt, "s1") == ["accepted", "started"]
        clock2.advance(1)
        assert message(rt, "s1:result")["result"]["status"] == "completed"
    finally:
        rt.close()


def test_deadline_that_passed_while_down_completes_at_ends_at(
    tmp_path: Path, trust: TrustStore, pomodoro_bundle: Path
) -> None:
    import sqlite3

    db = tmp_path / "rt.db"
    clock = VirtualClock()
    rt = _reopen(db, trust, clock)
    rt.install(pomodoro_bundle)
    start(rt)
    rt.settle()
    confirm(rt)
    ends_at = message(rt, "s1:started")["ends_at"]
    rt.close()
    con = sqlite3.connect(db)  # time moved on while the runtime was down
    con.execute(
        "INSERT OR REPLACE INTO meta VALUES ('virtual_now_ms', ?)",
        (str(clock.now_ms() + 60 * MIN),),
    )
    con.commit()
    con.close()
    rt = _reopen(db, trust, VirtualClock())
    try:
        result = message(rt, "s1:result")["result"]
        assert result["status"] == "completed" and result["ended_at"] == ends_at
        assert len(rt.im_records("c1")) == 1
    finally:
        rt.close()


def test_host_reconcile_failure_is_retried_from_saved_facts(
    trust: TrustStore, pomodoro_bundle: Path
) -> None:
    host = HostSimulator(policy="auto", fail_next=2)
    with Runtime.open(":memory:", trust=trust, clock=VirtualClock(), host=host) as rt:
        rt.install(pomodoro_bundle)
        start(rt)
        rt.settle()
        assert host.fail_next == 0 and len(host.intents) == 1
        assert stages(rt, "s1") == ["accepted", "started"]
        assert rt.store_dump()["host_intents"][0][3] == 1  # marked delivered


def test_undelivered_host_intent_is_resent_on_recovery(
    tmp_path: Path, trust: TrustStore, pomodoro_bundle: Path
) -> None:
    db = tmp_path / "rt.db"
    down = HostSimulator(policy="auto", fail_next=100)
    with Runtime.open(db, trust=trust, clock=VirtualClock(), host=down) as rt:
        rt.install(pomodoro_bundle)
        start(rt)
        rt.settle()
        assert stages(rt, "s1") == ["accepted"]  # committed; the Host never heard of it
        assert rt.store_dump()["host_intents"][0][3] == 0
    up = HostSimulator(policy="auto")
    with Runtime.open(db, trust=trust, clock=VirtualClock(), host=up) as rt:
        rt.settle()
        assert len(up.intents) == 1
        assert stages(rt, "s1") == ["accepted", "started"]


@pytest.mark.store
def test_stale_confirmation_after_completion_changes_nothing(
    pomo: Runtime, clock: VirtualClock
) -> None:
    start(pomo)
    pomo.settle()
    inst = pomo.host.simulator.instance_for("c1", "pomodoro")
    confirm(pomo)
    clock.advance(25 * MIN)
    before = pomo.store_dump()
    assert not pomo.host.event(
        "foreground_confirmed", conversation="c1", scope="pomodoro", instance=inst
    )
    assert not pomo.host.event(
        "activation_failed", conversation="c1", scope="pomodoro", instance=inst
    )
    assert pomo.store_dump() == before  # a persisted terminal state is never rewritten
