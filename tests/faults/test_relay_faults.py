"""The two relays, to the Agent (the outbox) and to the Host (intents): F15 and F16."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pytest

from lineup_runtime_lite import HostSimulator, Runtime, VirtualClock
from lineup_runtime_lite.drivers import STEP_TRIES
from lineup_runtime_lite.internals import engine_of
from lineup_runtime_lite.store import faults
from lineup_runtime_lite.store.faults import FaultInjected
from tests.faults import invariants
from tests.faults.harness import Env, final, host_event, stages

pytestmark = pytest.mark.store


@pytest.fixture(autouse=True)
def _disarm() -> Iterator[None]:
    yield
    faults.disarm()


class Consumer:
    """An Agent-side consumer that applies each message id once."""

    def __init__(self) -> None:
        self.applied: Counter[str] = Counter()
        self.received = 0

    def take(self, msgs: Sequence[Mapping[str, Any]]) -> None:
        for m in msgs:
            self.received += 1
            if m["id"] not in self.applied:
                self.applied[m["id"]] += 1


def test_F15_agent_relay_crashes_before_the_ack(env: Env) -> None:
    calls = [{"call": [f"i{n}", f"c{n}", "pomodoro.interrupt", {}]} for n in range(5)]
    run = env.drive([*calls, {"arm": ["outbox.ack", "crash", 0]}, {"fetch": 3, "ack": True}])
    env.crashed_at(run, "outbox.ack")
    delivered = next(x["ids"] for x in run.lines if x.get("kind") == "fetch")
    consumer = Consumer()
    consumer.take([{"id": i} for i in delivered])  # the side effect happened
    with env.open() as rt:
        again = rt.outbox.fetch(10)
        assert [m["id"] for m in again][:3] == delivered  # redelivered with the same ids
        consumer.take(again)
        rt.outbox.ack([m["id"] for m in again])
        assert rt.outbox.fetch(10) == []
        assert consumer.received == 8 and all(n == 1 for n in consumer.applied.values())
        assert len(consumer.applied) == 5
        invariants.check(rt)


def test_F15_host_relay_fails_after_the_host_acted(env: Env) -> None:
    host = HostSimulator("auto")
    with env.runtime(clock=VirtualClock(), host=host) as rt:
        rt.install(env.bundles["pomodoro"])
        faults.arm("host.after_intent")  # the Host acted; marking it delivered fails
        rt.call("s1", "c1", "pomodoro.start", {})
        rt.settle()
        assert faults.fired()["host.after_intent"] >= 1
        # redelivered with the same dedup key; the Host applied it once
        assert len(host.intents) == 1
        assert [e.event for e in host.events] == ["surface_loaded", "foreground_confirmed"]
        assert stages(rt, "s1") == ["accepted", "started"]
        assert [r[3] for r in rt.store_dump()["host_intents"]] == [1]
        invariants.check(rt)


def test_F15_host_relay_crashes_after_the_host_acted(env: Env) -> None:
    run = env.drive(
        [
            {"arm": ["host.after_intent", "crash", 0]},
            {"call": ["s1", "c1", "pomodoro.start", {}]},
            {"settle": True},
        ]
    )
    env.crashed_at(run, "host.after_intent")
    with env.open() as rt:
        rt.settle()
        (intent,) = rt.host.simulator.intents  # sent again after the restart, same key
        (row,) = rt.store_dump()["host_intents"]
        assert row[1] == f"show_surface:{intent['instance']}" and row[3] == 1
        assert host_event(rt, "foreground_confirmed", "c1", "pomodoro")
        assert stages(rt, "s1") == ["accepted", "started"]
        invariants.check(rt)


def test_F16_host_unavailable_for_a_long_time(pomo: Runtime, clock: VirtualClock) -> None:
    rt = pomo
    sim = rt.host.simulator
    sim.fail_next = 10**9  # the Host is down
    for n in range(4):
        rt.call(f"s{n}", f"c{n}", "pomodoro.start", {"minutes": 5})
    rt.settle()  # the relay tried, backed off and gave up for now
    assert sim.intents == []
    assert [r[3] for r in rt.store_dump()["host_intents"]] == [0, 0, 0, 0]
    invariants.check(rt, host_down=True)
    sim.fail_next = 0  # the Host is back; the next tick re-drives the saved intents
    clock.advance(1_000)
    assert [i["conversation"] for i in sim.intents] == ["c0", "c1", "c2", "c3"]  # in order
    for n in range(4):
        assert host_event(rt, "foreground_confirmed", f"c{n}", "pomodoro")
        assert stages(rt, f"s{n}") == ["accepted", "started"]
    invariants.check(rt)


def test_F16_agent_away_for_a_long_time(pomo: Runtime) -> None:
    rt = pomo
    for n in range(40):
        rt.call(f"i{n}", f"c{n % 7}", "pomodoro.interrupt", {})
    seen: list[str] = []
    while batch := rt.outbox.fetch(7):
        seen += [m["id"] for m in batch]
        rt.outbox.ack([m["id"] for m in batch])
    assert seen == [f"i{n}:result" for n in range(40)]  # nothing dropped, in order, once


def test_F16_host_failing_a_few_times_is_retried_in_order(pomo: Runtime) -> None:
    rt = pomo
    rt.host.simulator.fail_next = 3
    for n in range(3):
        rt.call(f"s{n}", f"c{n}", "pomodoro.start", {})
    rt.settle()
    # each instance's intent taken once, after its retries; across instances the relay
    # promises no order (SPEC 5.7: ordered per instance), and a refused one lets the
    # others go on, so which comes first depends on when the retries fall due
    assert sorted(i["conversation"] for i in rt.host.simulator.intents) == ["c0", "c1", "c2"]
    invariants.check(rt)


def test_F15_fetch_that_fails_delivers_nothing_twice(pomo: Runtime) -> None:
    rt = pomo
    rt.call("i1", "c1", "pomodoro.interrupt", {})
    faults.arm("outbox.fetch")
    with pytest.raises(FaultInjected):
        rt.outbox.fetch()
    consumer = Consumer()
    consumer.take(rt.outbox.fetch())
    consumer.take(rt.outbox.fetch())  # not acked yet: the same id again
    assert consumer.applied == Counter({"i1:result": 1})


def _intents(rt: Runtime) -> list[dict[str, Any]]:
    """The Host intents in order: conversation, delivered, superseded."""
    return [
        {
            "conversation": json.loads(r[2])["conversation"],
            "delivered": r[3],
            "superseded": r[5],
        }
        for r in rt.store_dump()["host_intents"]
    ]


def test_F16_a_refused_intent_for_one_instance_does_not_delay_another_instances_intents(
    pomo: Runtime, clock: VirtualClock
) -> None:
    rt = pomo
    sim = rt.host.simulator
    sim.refuse = {"c1"}  # the Host cannot show c1's Pomodoro
    rt.call_many([(f"s{n}", f"c{n}", "pomodoro.start", {}) for n in (1, 2, 3)])
    rt.settle()
    tried = [a["conversation"] for a in sim.attempts]
    # c2 and c3 went after c1's first refusal, not after its retries: each was tried once,
    # before c1's last try (a retry of c1 may fall due between them: on PostgreSQL a
    # delivered mark is a commit on the store thread, which can outlast the first backoff)
    last_c1 = len(tried) - 1 - tried[::-1].index("c1")
    assert tried[0] == "c1" and tried.count("c1") == STEP_TRIES
    assert tried.count("c2") == tried.count("c3") == 1
    assert tried.index("c2") < tried.index("c3") < last_c1, tried
    assert [i["conversation"] for i in sim.intents] == ["c2", "c3"]
    for n in (2, 3):
        assert host_event(rt, "foreground_confirmed", f"c{n}", "pomodoro")
        assert stages(rt, f"s{n}") == ["accepted", "started"]
    assert stages(rt, "s1") == ["accepted"]
    assert [i["delivered"] for i in _intents(rt)] == [0, 1, 1]
    invariants.check(rt, host_down=True)
    sim.refuse.clear()  # the Host can show it now; the next tick re-drives it
    clock.advance(1_000)
    assert [i["conversation"] for i in sim.intents] == ["c2", "c3", "c1"]
    assert host_event(rt, "foreground_confirmed", "c1", "pomodoro")
    assert stages(rt, "s1") == ["accepted", "started"]
    invariants.check(rt)


@pytest.mark.parametrize("end", ["interrupt", "timeout", "user_left"])
def test_F16_host_down_then_the_starting_pomodoro_ends_then_host_back_shows_nothing(
    pomo: Runtime, clock: VirtualClock, end: str
) -> None:
    rt = pomo
    sim = rt.host.simulator
    sim.fail_next = 10**9  # the Host is down
    rt.call("s1", "c1", "pomodoro.start", {})
    rt.call("s2", "c2", "pomodoro.start", {})  # another conversation's, still wanted
    rt.settle()
    assert sim.intents == []
    instance = json.loads(rt.store_dump()["host_intents"][0][2])["instance"]
    if end == "interrupt":
        stop = rt.call("i1", "c1", "pomodoro.interrupt", {})
        assert stop["result"] == {"status": "cancelled_starting"}
        reason = "interrupted"
    elif end == "user_left":  # the Host's own event reaches the runtime while it is down
        assert rt.host.event("user_left", conversation="c1", scope="pomodoro", instance=instance)
        reason = "user_left"
    else:
        clock.advance(61_000)  # both activations timed out while the Host was down
        reason = "timeout"
    assert final(rt, "s1")["result"] == {"status": "not_started", "reason": reason}
    # superseded in the transaction that ended the activation, before the Host is back
    assert _intents(rt)[0] == {"conversation": "c1", "delivered": 0, "superseded": 1}
    sim.fail_next = 0  # the Host is back
    tried = len(sim.attempts)
    rt.call("s3", "c3", "pomodoro.start", {})  # a new intent kicks the relay
    clock.advance(1_000)  # and so does a tick
    rt.settle()
    assert instance not in [a["instance"] for a in sim.attempts[tried:]]  # never offered
    shown = [i["conversation"] for i in sim.intents]
    assert shown == (["c3"] if end == "timeout" else ["c2", "c3"])  # only the live ones
    assert [i["superseded"] for i in _intents(rt)] == [1, int(end == "timeout"), 0]
    invariants.check(rt)


def test_F16_an_older_databases_intent_of_an_ended_activation_is_superseded_by_the_relay(
    pomo: Runtime, clock: VirtualClock
) -> None:
    """A row as schema 1 left it (no superseded mark when its activation ended): the relay
    checks the activation before sending and supersedes it instead."""
    rt = pomo
    sim = rt.host.simulator
    sim.fail_next = 10**9
    rt.call("s1", "c1", "pomodoro.start", {})
    rt.settle()
    assert rt.call("i1", "c1", "pomodoro.interrupt", {})["result"] == {
        "status": "cancelled_starting"
    }

    def as_schema_1() -> None:
        with engine_of(rt).store.transaction() as db:
            db.execute("UPDATE host_intents SET superseded=0")

    rt._call_sync(as_schema_1)
    sim.fail_next = 0
    tried = len(sim.attempts)
    clock.advance(1_000)  # the tick's reconcile kicks the relay
    rt.settle()
    assert sim.attempts[tried:] == [] and sim.intents == []  # never offered again
    assert _intents(rt) == [{"conversation": "c1", "delivered": 0, "superseded": 1}]
    invariants.check(rt)
