"""Stateful property tests (Hypothesis `RuleBasedStateMachine`) against small in-memory
models: the activation state machine with its queue, session data with subscriptions, and
idempotent call handling. One runtime (and one long-lived worker) serves every example;
each example works in conversations of its own."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from lineup_runtime_lite import Runtime, VirtualClock
from lineup_runtime_lite.core.messages import AgentMessage
from lineup_sdk.context import Snapshot
from tests.faults import invariants
from tests.faults.harness import host_event
from tests.faults.profile import hypothesis_profile
from tests.runtime.conftest import ready

pytestmark = pytest.mark.store

_examples = itertools.count()


def by_call(rt: Runtime) -> dict[str, list[AgentMessage]]:
    out: dict[str, list[AgentMessage]] = {}
    for m in rt.outbox.all():
        out.setdefault(m["call_id"], []).append(m)
    return out


# -- 1. the activation state machine with its queue ------------------------------------
@dataclass
class Conversation:
    """The model of one conversation's App session for the probe app."""

    state: str = "none"  # none | starting (waits for the Host) | ready | ready_fg | ended
    trigger: str | None = None
    queue: list[tuple[str, str]] = field(default_factory=list)
    items: list[str] = field(default_factory=list)
    deadline: int = 0


class ActivationMachine(RuleBasedStateMachine):
    rt: ClassVar[Runtime]
    clock: ClassVar[VirtualClock]

    def __init__(self) -> None:
        super().__init__()
        self.prefix = f"act{next(_examples)}"
        self.convs = {name: Conversation() for name in ("a", "b")}
        self.expected: dict[str, list[str]] = {}
        self.sent: dict[str, tuple[str, str, dict[str, Any]]] = {}
        self.ids = itertools.count()

    def conv(self, name: str) -> str:
        return f"{self.prefix}-{name}"

    @initialize()
    def a_foreground_app_is_starting_with_a_queue(self) -> None:
        self.call("a", "probe.fg")
        self.call("a", "probe.append")
        self.call("a", "probe.append")

    @rule(
        name=st.sampled_from(["a", "b"]),
        method=st.sampled_from(["probe.append", "probe.fg", "probe.append", "probe.peek"]),
    )
    def call(self, name: str, method: str) -> None:
        rt, c = self.rt, self.convs[name]
        cid = f"{self.prefix}-{next(self.ids)}"
        params = {"item": cid} if method == "probe.append" else {}
        msg = rt.call(cid, self.conv(name), method, params)
        rt.settle()
        self.sent[cid] = (self.conv(name), method, params)
        running = c.state in ("ready", "ready_fg")
        if method == "probe.peek":  # never starts anything, never queued
            assert msg["kind"] == ("result" if running else "error"), msg
            if not running:
                assert msg["error"]["code"] == "app_not_running"
            self.expected[cid] = [msg["stage"]]
            return
        needs_fg = method == "probe.fg"
        if c.state == "ready_fg" or (c.state == "ready" and not needs_fg):
            assert msg["kind"] == "result", msg  # delivered at once
            self.expected[cid] = ["result"]
            if method == "probe.append":
                c.items.append(cid)
                assert msg["result"] == len(c.items)
        elif c.state == "starting":
            assert (msg["stage"], msg["activation"]) == ("accepted", "queued"), msg
            self.expected[cid] = ["accepted"]
            c.queue.append((cid, method))
        else:  # a new activation
            assert (msg["stage"], msg["activation"]) == ("accepted", "starting"), msg
            if needs_fg:
                c.state, c.trigger, c.queue = "starting", cid, [(cid, method)]
                c.deadline = self.clock.now_ms() + 60_000
                self.expected[cid] = ["accepted"]
            else:  # the worker is up: ready at once, then delivered
                c.state = "ready"
                self.expected[cid] = ["accepted", "activation_ready", "result"]
                c.items.append(cid)

    def _end(self, c: Conversation, stage: str) -> None:
        for cid, _ in c.queue:
            self.expected[cid] += [stage, "error"] if cid == c.trigger else ["error"]
        c.state, c.queue = "ended", []

    @rule(
        name=st.sampled_from(["a", "b"]),
        event=st.sampled_from(
            [
                "foreground_confirmed",
                "foreground_confirmed",
                "user_left",
                "activation_failed",
                "surface_loaded",
            ]
        ),
    )
    def host(self, name: str, event: str) -> None:
        c = self.convs[name]
        applied = host_event(self.rt, event, self.conv(name), "probe")
        self.rt.settle()
        if c.state != "starting" or event == "surface_loaded":
            assert not applied
            return
        assert applied
        if event == "foreground_confirmed":
            for cid, method in c.queue:  # delivered in arrival order
                self.expected[cid] += (
                    ["activation_ready", "result"] if cid == c.trigger else ["result"]
                )
                if method == "probe.append":
                    c.items.append(cid)
            c.state, c.queue = "ready_fg", []
        elif event == "user_left":
            self._end(c, "activation_cancelled")
        else:
            self._end(c, "activation_failed")

    @precondition(lambda self: any(c.state == "starting" for c in self.convs.values()))
    @rule(data=st.data(), event=st.sampled_from(["foreground_confirmed", "user_left"]))
    def answer_a_starting_activation(self, data: st.DataObject, event: str) -> None:
        waiting = sorted(n for n, c in self.convs.items() if c.state == "starting")
        self.host(data.draw(st.sampled_from(waiting)), event)

    @rule(seconds=st.sampled_from([1, 30, 61]))
    def advance(self, seconds: int) -> None:
        now = self.clock.advance(seconds * 1000)
        self.rt.settle()
        for c in self.convs.values():
            if c.state == "starting" and c.deadline <= now:
                self._end(c, "activation_failed")

    @precondition(lambda self: bool(self.sent))
    @rule(data=st.data())
    def retry(self, data: st.DataObject) -> None:
        cid = data.draw(st.sampled_from(sorted(self.sent)))
        n = len(self.rt.outbox.all())
        msg = self.rt.call(cid, *self.sent[cid])
        self.rt.settle()
        assert msg == by_call(self.rt)[cid][-1]  # the latest persisted message
        assert len(self.rt.outbox.all()) == n  # and nothing new

    @invariant()
    def agrees_with_the_model(self) -> None:
        msgs = by_call(self.rt)
        for cid, stages in self.expected.items():
            assert [m["stage"] for m in msgs.get(cid, [])] == stages, cid
        for name, c in self.convs.items():
            snap = self.rt.surface(self.conv(name), "probe").get()
            assert (snap.data or {}).get("items", []) == c.items
        invariants.check(self.rt)


def test_activation_state_machine_with_its_queue(probe: Runtime, clock: VirtualClock) -> None:
    ready(probe, "warm")  # one worker for every example
    ActivationMachine.rt, ActivationMachine.clock = probe, clock
    run_state_machine_as_test(ActivationMachine, settings=hypothesis_profile())


# -- 2. session data with subscriptions ------------------------------------------------
@dataclass
class Subscription:
    frames: list[tuple[str, Snapshot]]
    start: int
    unsubscribe: Any
    closed_at: int | None = None


JSON_VALUES = st.one_of(st.integers(-9, 9), st.text(max_size=4), st.booleans(), st.none())
OBJECTS = st.dictionaries(st.text("abcxyz", max_size=3), JSON_VALUES, max_size=3)


#: Integers Agent params may carry (I-JSON: within ±(2^53 − 1); SPEC 12).
_SAFE_INTS = st.integers(min_value=-(2**53 - 1), max_value=2**53 - 1)


class SessionDataMachine(RuleBasedStateMachine):
    rt: ClassVar[Runtime]
    subs = Bundle("subs")

    def __init__(self) -> None:
        super().__init__()
        self.conv = f"sd{next(_examples)}"
        self.history: dict[int, Any] = {0: None}
        self.rev = 0
        self.ids = itertools.count()
        self.all: list[Subscription] = []

    @initialize()
    def up(self) -> None:
        ready(self.rt, self.conv)
        self.subscribe()  # a Surface is always watching

    def write(self, data: Any, expected: int) -> AgentMessage:
        params = {"data": data, "expected_revision": expected}
        msg = self.rt.call(f"{self.conv}-{next(self.ids)}", self.conv, "probe.write", params)
        self.rt.settle()  # listeners run off the loop; settle waits for their frames
        return msg

    @rule(data=OBJECTS)
    def replace(self, data: dict[str, Any]) -> None:
        msg = self.write(data, self.rev)
        self.rev += 1
        self.history[self.rev] = data
        assert msg["result"] == self.rev

    @rule(data=OBJECTS, off=st.sampled_from([-1, 1, 5]))
    def stale_replace(self, data: dict[str, Any], off: int) -> None:
        expected = self.rev + off
        if expected < 0:
            expected = self.rev + 1
        msg = self.write(data, expected)
        assert msg["error"]["code"] == "session_data_revision_conflict"

    @rule(data=st.one_of(st.lists(_SAFE_INTS, max_size=2), _SAFE_INTS, st.text()))
    def invalid_replace(self, data: Any) -> None:
        assert self.write(data, self.rev)["error"]["code"] == "session_data_invalid"

    @rule(target=subs)
    def subscribe(self) -> Subscription:
        frames: list[tuple[str, Snapshot]] = []
        unsub = self.rt.surface(self.conv, "probe").subscribe(lambda k, s: frames.append((k, s)))
        sub = Subscription(frames, self.rev, unsub)
        assert frames == [("session_data.snapshot", Snapshot(self.history[self.rev], self.rev))]
        self.all.append(sub)
        return sub

    @rule(sub=consumes(subs))
    def unsubscribe(self, sub: Subscription) -> None:
        sub.unsubscribe()
        sub.closed_at = self.rev

    @rule()
    def read(self) -> None:
        expected = Snapshot(self.history[self.rev], self.rev)
        assert self.rt.surface(self.conv, "probe").get() == expected
        got = self.rt.call(f"{self.conv}-{next(self.ids)}", self.conv, "probe.read", {})
        assert got["result"] == {"data": expected.data, "revision": expected.revision}

    @invariant()
    def frames_are_the_history_in_order(self) -> None:
        for sub in self.all:
            last = self.rev if sub.closed_at is None else sub.closed_at
            want = [("session_data.snapshot", Snapshot(self.history[sub.start], sub.start))]
            want += [
                ("session_data.changed", Snapshot(self.history[r], r))
                for r in range(sub.start + 1, last + 1)
            ]
            assert sub.frames == want


def test_session_data_with_subscriptions(probe: Runtime) -> None:
    SessionDataMachine.rt = probe
    run_state_machine_as_test(SessionDataMachine, settings=hypothesis_profile())
    invariants.check(probe)


# -- 3. idempotent call handling --------------------------------------------------------
@dataclass
class Focus:
    state: str = "idle"  # idle | starting | focusing
    start: str = ""
    deadline: int = 0


class IdempotencyMachine(RuleBasedStateMachine):
    rt: ClassVar[Runtime]
    clock: ClassVar[VirtualClock]

    def __init__(self) -> None:
        super().__init__()
        self.prefix = f"idem{next(_examples)}"
        self.known: dict[str, tuple[str, str, dict[str, Any]]] = {}
        self.expected: dict[str, list[str]] = {}
        self.focus = {name: Focus() for name in ("a", "b")}

    def conv(self, name: str) -> str:
        return f"{self.prefix}-{name}"

    @initialize()
    def a_focus_is_starting(self) -> None:
        self.call(0, "a", "start", 1)

    @rule(
        k=st.integers(0, 4),
        name=st.sampled_from(["a", "b"]),
        kind=st.sampled_from(["start", "start", "interrupt", "invalid"]),
        minutes=st.integers(1, 3),
    )
    def call(self, k: int, name: str, kind: str, minutes: int) -> None:
        rt, f = self.rt, self.focus[name]
        cid = f"{self.prefix}-id{k}"
        method = "pomodoro.interrupt" if kind == "interrupt" else "pomodoro.start"
        params: dict[str, Any] = {} if kind == "interrupt" else {"minutes": minutes}
        if kind == "invalid":
            params = {"minutes": 0}
        before = rt.store_dump()
        msg = rt.call(cid, self.conv(name), method, params)
        rt.settle()
        if cid in self.known:
            if self.known[cid] == (self.conv(name), method, params):
                assert msg == by_call(rt)[cid][-1]  # the latest persisted message
            else:
                assert msg["error"]["code"] == "call_id_conflict"
            invariants.assert_unchanged(before, rt.store_dump())  # nothing written
            return
        if kind == "invalid":
            assert msg["error"]["code"] == "invalid_params"
            invariants.assert_unchanged(before, rt.store_dump())
            return
        self.known[cid] = (self.conv(name), method, params)
        if kind == "start":
            if f.state == "idle":
                assert (msg["stage"], msg["activation"]) == ("accepted", "starting")
                f.state, f.start = "starting", cid
                f.deadline = self.clock.now_ms() + 60_000
                self.expected[cid] = ["accepted"]
            else:
                assert msg["error"]["code"] == "pomodoro_already_active"
                self.expected[cid] = ["error"]
            return
        status = {"idle": "nothing_running", "starting": "cancelled_starting"}
        assert msg["result"] == {"status": status.get(f.state, "interrupted")}
        self.expected[cid] = ["result"]
        if f.state == "starting":
            self.expected[f.start] += ["activation_cancelled", "result"]
        elif f.state == "focusing":
            self.expected[f.start] += ["result"]
        f.state = "idle"

    @rule(
        name=st.sampled_from(["a", "b"]),
        event=st.sampled_from(["foreground_confirmed", "user_left"]),
    )
    def host(self, name: str, event: str) -> None:
        f = self.focus[name]
        applied = host_event(self.rt, event, self.conv(name), "pomodoro")
        assert applied == (f.state == "starting")
        if not applied:
            return
        if event == "foreground_confirmed":
            f.state = "focusing"
            minutes = self.known[f.start][2]["minutes"]
            f.deadline = self.clock.now_ms() + minutes * 60_000
            self.expected[f.start] += ["started"]
        else:
            f.state = "idle"
            self.expected[f.start] += ["activation_cancelled", "result"]

    @rule(seconds=st.sampled_from([30, 60, 120]))
    def advance(self, seconds: int) -> None:
        now = self.clock.advance(seconds * 1000)
        for f in self.focus.values():
            if f.state == "starting" and f.deadline <= now:
                self.expected[f.start] += ["activation_failed", "result"]
                f.state = "idle"
            elif f.state == "focusing" and f.deadline <= now:
                self.expected[f.start] += ["result"]
                f.state = "idle"

    @invariant()
    def agrees_with_the_model(self) -> None:
        msgs = by_call(self.rt)
        for cid, stages in self.expected.items():
            assert [m["stage"] for m in msgs.get(cid, [])] == stages, cid
        invariants.check(self.rt)


def test_idempotent_call_handling(pomo: Runtime, clock: VirtualClock) -> None:
    IdempotencyMachine.rt, IdempotencyMachine.clock = pomo, clock
    run_state_machine_as_test(IdempotencyMachine, settings=hypothesis_profile())
