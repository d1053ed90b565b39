"""A Hypothesis state machine over the transition kit (tests/runtime/transition_kit.py),
checked against a small independent model of every call's receipt stages, final answer,
activation and session-data revision; and one call the model's acceptance must answer
`app_not_running`. Run by test_transitions_model.py and, mutated, by
test_production_decisions.py."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from lineup_runtime_lite.store.sqlite import StoreRace
from lineup_sdk.errors import LineupError
from tests.runtime.transition_kit import Kit, event, pomodoro_tools, tool

TOOLS = [
    tool("notes.show", activation="foreground_required"),
    tool("notes.add"),
    tool("notes.count", activation="activation_not_required"),
    *pomodoro_tools(),
]


CONVS = ("c1", "c2")


SCOPES = ("notes", "pomodoro")


ORDER = {
    "accepted": 0,
    "activation_ready": 1,
    "activation_failed": 1,
    "activation_cancelled": 1,
    "started": 1,
    "result": 2,
    "error": 2,
}


@dataclass
class MAct:
    """The model of one activation."""

    id: str
    trigger: str
    fg_req: bool
    deadline: int
    state: str = "starting"
    worker: bool = False
    fg: bool = False


@dataclass
class MCall:
    conv: str
    scope: str
    method: str
    act: str | None
    stages: list[str] = field(default_factory=list)
    final: str | None = None  # the error code or the result status
    status: str = "queued"  # queued | delivered | running | done
    minutes: int = 1


class Machine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.kit = Kit(TOOLS)
        self.calls: dict[str, MCall] = {}
        self.acts: dict[tuple[str, str], MAct] = {}  # the current one per session
        self.all_acts: dict[str, MAct] = {}
        self.revision: dict[tuple[str, str], int] = {}
        self.delivered: list[str] = []
        self.focus: dict[str, tuple[str, int]] = {}  # conv -> (start call, ends)
        self.shown: list[str] = []
        self.n = 0

    def teardown(self) -> None:
        self.kit.close()

    # -- model helpers -------------------------------------------------------------------
    def _final(self, call_id: str, what: str, stage: str = "error") -> None:
        c = self.calls[call_id]
        c.stages.append(stage)
        c.final, c.status = what, "done"

    def _end(self, act: MAct, state: str, reason: str) -> None:
        act.state = state
        for cid, c in self.calls.items():
            if c.act != act.id or c.status != "queued":
                continue
            # a trigger already told `activation_ready` (its worker was lost since) gets no
            # second progress receipt, only its final (activations.worker_lost)
            if cid == act.trigger and "activation_ready" not in c.stages:
                c.stages.append(
                    "activation_failed" if state == "failed" else "activation_cancelled"
                )
            if c.method == "pomodoro.start":
                self._final(cid, f"not_started:{reason}", "result")
            else:
                self._final(
                    cid, "activation_failed" if state == "failed" else "activation_cancelled"
                )

    def _ready_if(self, act: MAct) -> None:
        if act.state == "starting" and act.worker and (act.fg or not act.fg_req):
            act.state = "ready"
            trig = self.calls.get(act.trigger)
            if trig is not None and trig.status == "queued":
                if trig.method == "pomodoro.start":
                    trig.stages.append("started")
                    trig.status = "running"
                    self.focus[trig.conv] = (act.trigger, self.kit.now + trig.minutes * 60_000)
                else:
                    trig.stages.append("activation_ready")

    def _session_queue(self, conv: str, scope: str) -> list[str]:
        """The session's undelivered, unanswered calls in arrival order."""
        return [
            cid
            for cid, c in self.calls.items()
            if (c.conv, c.scope) == (conv, scope) and c.status == "queued" and c.act is not None
        ]

    def _in_flight(self, conv: str) -> list[str]:
        return [cid for cid, c in self.calls.items() if c.conv == conv and c.status == "delivered"]

    # -- rules ---------------------------------------------------------------------------
    @rule(
        conv=st.sampled_from(CONVS),
        method=st.sampled_from([t.method for t in TOOLS]),
        minutes=st.integers(1, 3),
    )
    def call(self, conv: str, method: str, minutes: int) -> None:
        self.n += 1
        cid = f"k{self.n}"
        scope = method.split(".")[0]
        params = {"minutes": minutes} if method == "pomodoro.start" else {}
        before = self.kit.facts.session(conv, scope)
        d = self.kit.call(event(cid, conv, method, params))
        assert d is not None, "an acceptance never loses a race here"
        row = self.kit.facts.call(cid)
        assert row is not None
        c = self.calls[cid] = MCall(conv, scope, method, row.activation_id, minutes=minutes)
        act = self.acts.get((conv, scope))
        needs_fg = method in ("notes.show", "pomodoro.start")
        if method == "pomodoro.interrupt":
            c.act = None
            starting = [
                a
                for a in self.all_acts.values()
                if a.state == "starting"
                and self.calls[a.trigger].conv == conv
                and self.calls[a.trigger].method == "pomodoro.start"
                and self.calls[a.trigger].status == "queued"
            ]
            if starting:
                self._end(starting[0], "cancelled", "interrupted")
                self._final(cid, "cancelled_starting", "result")
            elif conv in self.focus:
                start, _ = self.focus.pop(conv)
                self._final(start, "interrupted", "result")
                self._final(cid, "interrupted", "result")
            else:
                self._final(cid, "nothing_running", "result")
            return
        if method == "pomodoro.start":
            if any(
                x.conv == conv
                and x.method == "pomodoro.start"
                and x.status in ("queued", "running")
                for k, x in self.calls.items()
                if k != cid
            ):
                c.act = None
                self._final(cid, "pomodoro_already_active")
                return
        elif method == "notes.count" and (act is None or act.state != "ready"):
            c.act = None
            self._final(cid, "app_not_running")
            return
        if (
            act is not None
            and act.state == "ready"
            and (not needs_fg or act.fg)
            and method != "pomodoro.start"
        ):
            assert row.activation_id == act.id
            if d.deliver is not None:  # sent at once: only when nothing is in flight
                assert not self._in_flight(conv) or scope != "notes"
                c.status = "delivered"
                self.delivered.append(cid)
            return
        if act is not None and act.state == "starting" and method != "pomodoro.start":
            assert row.activation_id == act.id
            c.stages.append("accepted")
            if needs_fg:
                act.fg_req = True
            return
        # a new activation (and a new session when there was none)
        assert row.activation_id is not None and row.activation_id not in self.all_acts
        if before is not None:  # the conversation's session goes on
            assert self.kit.facts.session(conv, scope).app_session_id == before.app_session_id  # type: ignore[union-attr]
        new = MAct(row.activation_id, cid, needs_fg, self.kit.now + self.kit.timeout_ms)
        self.acts[(conv, scope)] = self.all_acts[new.id] = new
        c.stages.append("accepted")

    @rule(conv=st.sampled_from(CONVS), scope=st.sampled_from(SCOPES))
    def worker_up(self, conv: str, scope: str) -> None:
        act = self.acts.get((conv, scope))
        if act is None:
            return
        self.kit.advance(act.id, worker_up=True)
        if act.state == "starting":
            act.worker = True
            self._ready_if(act)

    @rule(
        conv=st.sampled_from(CONVS),
        scope=st.sampled_from(SCOPES),
        ev=st.sampled_from(
            ["foreground_confirmed", "activation_failed", "user_left", "surface_loaded"]
        ),
        stale=st.booleans(),
    )
    def host(self, conv: str, scope: str, ev: str, stale: bool) -> None:
        acts = [
            a
            for a in self.all_acts.values()
            if self.calls[a.trigger].conv == conv and self.calls[a.trigger].scope == scope
        ]
        if not acts:
            return
        act = acts[0] if stale else acts[-1]
        self.kit.host_event(ev, act.id, conv, scope)
        self.kit.host_event(ev, act.id, "c9", scope)  # a foreign conversation: ignored
        if act.state != "starting":
            return
        if ev == "foreground_confirmed":
            act.fg = True
            self._ready_if(act)
        elif ev == "activation_failed":
            self._end(act, "failed", "host_failed")
        elif ev == "user_left":
            self._end(act, "cancelled", "user_left")

    @rule(conv=st.sampled_from(CONVS))
    def deliver_next(self, conv: str) -> None:
        sess = self.kit.facts.session(conv, "notes")
        if sess is None or self._in_flight(conv):
            return  # deliveries to a session are serial
        queue = self._session_queue(conv, "notes")
        got = self.kit.deliver_next(sess.app_session_id)
        if not queue or self.all_acts[self.calls[queue[0]].act or ""].state != "ready":
            assert got is None
            return
        assert got is not None and got.call_id == queue[0]
        self.calls[got.call_id].status = "delivered"
        self.delivered.append(got.call_id)

    @rule(
        conv=st.sampled_from(CONVS),
        outcome=st.sampled_from(["ok", "app", "bogus", "timeout", "crash"]),
        twice=st.booleans(),
    )
    def answer(self, conv: str, outcome: str, twice: bool) -> None:
        flying = self._in_flight(conv)
        if not flying:
            return
        cid = flying[0]
        call = self.kit.facts.call(cid)
        assert call is not None
        outcomes: dict[str, dict[str, Any]] = {
            "ok": {"reply": {"ok": True, "result": 1}},
            "app": {"reply": {"ok": False, "error": {"code": "app.nope", "message": "m"}}},
            "bogus": {"reply": {"ok": False, "error": {"code": "nope", "message": "m"}}},
            "timeout": {"timed_out": True},
            "crash": {"worker_error": ("crashed", "gone")},
        }
        kw = outcomes[outcome]
        assert self.kit.answer(call, **kw) is not None
        final = {
            "ok": "1",
            "app": "app.nope",
            "bogus": "handler_failed",
            "timeout": "handler_timeout",
            "crash": "delivery_interrupted",
        }[outcome]
        self._final(cid, final, "result" if outcome == "ok" else "error")
        if twice:  # a second answer (a late reply, a recovery) loses its race: writes nothing
            before = self.kit.dump()
            # (of the same stage: a final of the other stage is not refused, see
            # test_a_second_final_of_the_other_stage_is_refused)
            if outcome == "ok":
                assert self.kit.answer(call, reply={"ok": True, "result": 2}) is None
            else:
                assert self.kit.interrupt(call) is None
            assert self.kit.dump() == before

    @rule(conv=st.sampled_from(CONVS), right=st.booleans())
    def replace(self, conv: str, right: bool) -> None:
        sess = self.kit.facts.session(conv, "notes")
        if sess is None:
            return
        key = (conv, "notes")
        rev = self.revision.get(key, 0)
        expected = rev if right else rev + 1
        before = self.kit.dump()
        try:
            snap = self.kit.replace_session_data(
                "notes", sess.app_session_id, {"n": rev + 1}, expected
            )
        except LineupError as exc:
            assert not right and exc.code == "session_data_revision_conflict"
            assert self.kit.dump() == before
            return
        assert right and snap is not None and snap.revision == rev + 1
        self.revision[key] = rev + 1

    @rule()
    def recover(self) -> None:
        """A restart: every call left `delivered` ends `delivery_interrupted`, once."""
        for call in self.kit.facts.delivered_calls():
            assert self.kit.interrupt(call) is not None
            self._final(call.call_id, "delivery_interrupted")

    @rule(conv=st.sampled_from(CONVS))
    def worker_lost(self, conv: str) -> None:
        act = self.acts.get((conv, "notes"))
        if act is None:
            return
        self.kit.worker_lost(act.id)
        if act.state == "ready":
            act.state = "starting"
            self._end(act, "failed", "worker_failed")

    @rule(ms=st.sampled_from([1_000, 30_000, 61_000]))
    def clock(self, ms: int) -> None:
        self.kit.now += ms
        self.kit.tick()
        for act in self.all_acts.values():
            if act.state == "starting" and act.deadline <= self.kit.now:
                self._end(act, "failed", "timeout")
        for conv, (start, ends) in list(self.focus.items()):
            if ends <= self.kit.now:
                del self.focus[conv]
                self._final(start, "completed", "result")

    @rule()
    def relay(self) -> None:
        def take(body: dict[str, Any]) -> None:
            act = self.kit.facts.activation(body["instance"])
            assert act is not None and act.state not in ("failed", "cancelled"), (
                "an ended instance shown"
            )
            self.shown.append(body["instance"])

        self.kit.relay(take)

    @precondition(lambda self: bool(self.kit.log))
    @rule(data=st.data())
    def stale_replay(self, data: st.DataObject) -> None:
        """Re-commit a decision that recorded a message: its guards must refuse it whole."""
        recorded = [
            d for d in self.kit.log if any(type(c).__name__ == "NewReceipt" for c in d.changes)
        ]
        if not recorded:
            return
        decision = data.draw(st.sampled_from(recorded))
        before = self.kit.dump()
        # the key it wrote first refuses it: a race, rolled back whole
        with contextlib.suppress(StoreRace):
            assert self.kit.apply(decision) is None
        assert self.kit.dump() == before

    # -- invariants ----------------------------------------------------------------------
    @invariant()
    def stages_match_the_model(self) -> None:
        facts = self.kit.facts
        for cid, c in self.calls.items():
            msgs = facts.messages(cid)
            stages = [m["stage"] for m in msgs]
            assert stages == c.stages, (cid, c.method, stages, c.stages)
            ranks = [ORDER[s] for s in stages]
            assert ranks == sorted(ranks) and len(set(stages)) == len(stages), stages
            assert ranks.count(1) <= 1, (cid, stages)  # one outcome of its activation
            finals = [m for m in msgs if m["stage"] in ("result", "error")]
            assert len(finals) <= 1
            if finals:
                f = finals[0]
                got = f["error"]["code"] if f["stage"] == "error" else f["result"]
                if isinstance(got, dict):
                    got = got["status"] + (f":{got['reason']}" if "reason" in got else "")
                assert str(got) == c.final, (cid, got, c.final)
                assert facts.call(cid).state == "done"  # type: ignore[union-attr]
            else:
                assert facts.call(cid).state == c.status  # type: ignore[union-attr]

    @invariant()
    def activations_match_the_model(self) -> None:
        for act in self.all_acts.values():
            got = self.kit.facts.activation(act.id)
            assert got is not None and got.state == act.state, (act, got)

    @invariant()
    def outbox_holds_every_message_once(self) -> None:
        facts = self.kit.facts
        ids = [m["id"] for m in facts.outbox_all()]
        assert len(ids) == len(set(ids))
        recorded = sorted(m["id"] for cid in self.calls for m in facts.messages(cid))
        assert sorted(ids) == recorded

    @invariant()
    def seq_strictly_increases_per_session(self) -> None:
        facts = self.kit.facts
        for conv in CONVS:
            for scope in SCOPES:
                sess = facts.session(conv, scope)
                if sess is None:
                    continue
                seqs = [
                    facts.call(cid).seq  # type: ignore[union-attr]
                    for cid, c in self.calls.items()
                    if (c.conv, c.scope) == (conv, scope) and c.act is not None
                ]
                assert seqs == list(range(1, len(seqs) + 1)) and sess.next_seq == len(seqs) + 1

    @invariant()
    def never_delivered_twice(self) -> None:
        assert len(self.delivered) == len(set(self.delivered))

    @invariant()
    def revision_counts_replaces(self) -> None:
        for conv in CONVS:
            sess = self.kit.facts.session(conv, "notes")
            if sess is not None:
                got = self.kit.facts.session_data("notes", sess.app_session_id).revision
                assert got == self.revision.get((conv, "notes"), 0)

    @invariant()
    def no_intent_for_an_ended_activation(self) -> None:
        for head in self.kit.facts.intent_heads():
            assert head.activation_state not in ("failed", "cancelled"), head


def a_call_for_an_app_not_running_is_answered_and_stored() -> None:
    """The kit's acceptance is the engine's (`steps.accept`): `app_not_running`, stored
    with its answer, and nothing started."""
    kit = Kit(TOOLS)
    decision = kit.call(event("n1", "c1", "notes.count"))
    assert decision is not None and decision.answer is not None
    assert decision.answer["error"]["code"] == "app_not_running"
    assert [m["stage"] for m in kit.facts.messages("n1")] == ["error"]
    assert kit.facts.session("c1", "notes") is None
    assert kit.facts.activations_to_drive() == []
    kit.close()
