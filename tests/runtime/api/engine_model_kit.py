"""A Hypothesis state machine over the production runtime (SQLite `:memory:`, a virtual clock,
the engine, its drivers and group commit) with the notes app served by an in-process worker,
checked against a small independent model of each conversation's activation and every call's
answer. Run by test_engine_model.py and, mutated, by test_production_decisions.py."""

from __future__ import annotations

import functools
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from lineup_build.build import build_project
from lineup_runtime_lite.api.clock import VirtualClock
from lineup_runtime_lite.api.runtime import Runtime
from lineup_runtime_lite.drivers import workers
from lineup_runtime_lite.host.simulator import HostSimulator
from tests.conformance.conformance_kit import KEY, _trust
from tests.runtime.inprocess_worker import InProcessPort

NOTES = Path(__file__).parents[2] / "conformance" / "apps" / "notes"


CONVS = ("c1", "c2")


METHODS = ("notes.add", "notes.count", "notes.show")


FINALS = ("result", "error")


@functools.cache
def notes_bundle() -> Path:
    root = Path(tempfile.mkdtemp(prefix="lineup-engine-model-"))
    shutil.copytree(NOTES, root / "notes")
    result = build_project(root / "notes", signing_key=KEY)
    assert result.ok and result.bundle is not None
    return result.bundle


@dataclass
class Conv:
    """The model of one conversation's notes session."""

    state: str = "none"  # none | starting | ready
    fg_req: bool = False  # the starting activation waits for the Host's confirmation
    fg: bool = False  # the ready activation was confirmed in the foreground
    notes: int = 0
    started_ms: int = 0
    waiting: list[str] = field(default_factory=list)  # queued behind the starting one


class Machine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self._port, workers.process_port = workers.process_port, InProcessPort()
        self.clock = VirtualClock()
        self.rt = Runtime.open(
            ":memory:", trust=_trust(KEY), clock=self.clock, host=HostSimulator("manual")
        )
        self.rt.install(notes_bundle())
        self.convs = {c: Conv() for c in CONVS}
        self.expected: dict[str, str | None] = {}  # call -> its final, once the model knows
        self.stages: dict[str, list[str]] = {}
        self.n = 0

    def teardown(self) -> None:
        self.rt.close()
        workers.process_port = self._port

    # -- helpers -------------------------------------------------------------------------
    def _drain(self) -> None:
        while batch := self.rt.outbox.fetch(500):
            self.rt.outbox.ack([m["id"] for m in batch])
            for m in batch:
                self.stages.setdefault(m["call_id"], []).append(m["stage"])

    def _ready(self, conv: Conv) -> None:
        conv.state, conv.fg = "ready", conv.fg_req
        for cid in conv.waiting:
            self.expected[cid] = "result"
        conv.notes += sum(1 for cid in conv.waiting if cid.endswith(":add"))
        conv.waiting = []

    def _ended(self, conv: Conv, code: str) -> None:
        for cid in conv.waiting:
            self.expected[cid] = f"error:{code}"
        conv.state, conv.waiting = "none", []

    # -- rules ---------------------------------------------------------------------------
    @rule(conv=st.sampled_from(CONVS), method=st.sampled_from(METHODS))
    def call(self, conv: str, method: str) -> None:
        self.n += 1
        cid = f"k{self.n}:{method.split('.')[1]}"
        params = {"text": cid} if method == "notes.add" else {}
        c = self.convs[conv]
        msg = self.rt.call(cid, conv, method, params)
        self.rt.settle()
        needs_fg = method == "notes.show"
        if method == "notes.count":
            want = "result" if c.state == "ready" else "error:app_not_running"
            self.expected[cid] = want
            got = msg["stage"] + (f":{msg['error']['code']}" if msg["stage"] == "error" else "")
            assert got == want, (cid, msg)
            if want == "result":
                assert msg["result"] == c.notes
        elif c.state == "ready" and (not needs_fg or c.fg):
            self.expected[cid] = "result"
            assert msg["stage"] == "result", (cid, msg)
            c.notes += method == "notes.add"
        elif c.state == "starting":
            assert msg["stage"] == "accepted" and msg["activation"] == "queued", (cid, msg)
            c.waiting.append(cid)
            c.fg_req = c.fg_req or needs_fg
        else:  # a new activation
            assert msg["stage"] == "accepted" and msg["activation"] == "starting", (cid, msg)
            c.state, c.fg_req, c.started_ms = "starting", needs_fg, self.clock.now_ms()
            c.waiting = [cid]
            if not needs_fg:  # its worker comes up in-process: ready after the settle
                self._ready(c)
        self._drain()

    @rule(conv=st.sampled_from(CONVS), event=st.sampled_from(["confirm", "leave", "fail"]))
    def host(self, conv: str, event: str) -> None:
        c = self.convs[conv]
        name = {
            "confirm": "foreground_confirmed",
            "leave": "user_left",
            "fail": "activation_failed",
        }[event]
        try:
            applied = self.rt.host.event(name, conversation=conv, scope="notes")
        except Exception as exc:  # no instance to address yet
            assert getattr(exc, "code", None) == "usage_invalid", exc
            assert c.state == "none"
            return
        self.rt.settle()
        assert applied == (c.state == "starting"), (conv, event, c)
        if c.state == "starting":
            if event == "confirm":
                self._ready(c)
            else:
                code = "activation_cancelled" if event == "leave" else "activation_failed"
                self._ended(c, code)
        self._drain()

    @rule(ms=st.sampled_from([1_000, 30_000, 61_000]))
    def advance(self, ms: int) -> None:
        self.clock.advance(ms)
        self.rt.settle()
        for c in self.convs.values():
            if c.state == "starting" and self.clock.now_ms() - c.started_ms >= 60_000:
                self._ended(c, "activation_failed")
        self._drain()

    # -- invariants ----------------------------------------------------------------------
    @invariant()
    def every_call_has_its_model_answer(self) -> None:
        for cid, stages in self.stages.items():
            finals = [s for s in stages if s in FINALS]
            assert len(finals) <= 1, (cid, stages)
            assert stages.index(finals[0]) == len(stages) - 1 if finals else True, stages
        for cid, want in self.expected.items():
            stages = self.stages.get(cid, [])
            final = next((s for s in stages if s in FINALS), None)
            if want is None or (want.startswith("error:") and final == "error"):
                assert final is not None or want is None, (cid, stages, want)
                continue
            assert final == want.split(":")[0], (cid, stages, want)
