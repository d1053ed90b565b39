"""Replay every conformance fixture at the transition level: a small synchronous
interpreter over `MemoryFacts` and the pure transitions (no loop, workers or SQLite), with
SDK-delivered calls run in-process through `lineup_sdk`'s dispatcher and their session data
read and replaced through the transitions. The events must match the fixture's expected
events exactly as the runtime replay's do (`test_conformance.py`)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from lineup_build.verify import check_bundle
from lineup_runtime_lite.clock import parse_duration
from lineup_runtime_lite.expect import compare
from lineup_runtime_lite.install import load_tools
from lineup_runtime_lite.records import Tool
from lineup_runtime_lite.scenario import Step, load_scenario
from lineup_runtime_lite.store.records import Call
from lineup_runtime_lite.surface_client import surface_write_refused
from lineup_runtime_lite.validation import validator_for
from lineup_sdk._receive import Dispatcher
from lineup_sdk.context import Snapshot, ToolContext
from tests.conformance.test_conformance import FIXTURES, KEY, _trust, bundles  # noqa: F401
from tests.runtime.transition_kit import Kit, event

APPS = Path(__file__).parent / "apps"


class _SessionData:
    """A handler's `ctx.session_data`: reads through the port, replaces through
    `transitions.replace_session_data` (a LineupError reaches the handler as it would)."""

    def __init__(self, replay: Replay, scope: str, session_id: str, conversation: str) -> None:
        self.replay, self.scope, self.sid, self.conv = replay, scope, session_id, conversation

    async def get(self) -> Snapshot:
        return self.replay.kit.facts.session_data(self.scope, self.sid)

    async def replace(self, data: Any, *, expected_revision: int) -> Snapshot:
        snap: Snapshot = self.replay.kit.replace_session_data(
            self.scope, self.sid, data, expected_revision
        )
        for (conv, scope), client in self.replay.subs:
            if (conv, scope) == (self.conv, self.scope):
                client.changed(
                    snap, lambda: self.replay.kit.facts.session_data(self.scope, self.sid)
                )
        return snap


class _Client:
    """The Surface SDK's client rules (TIS2-04) over synchronous frames: duplicates and
    older revisions ignored; a gap (here: after a dropped frame) or a reconnect reads the
    data again; `seen` is what the listener received."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []
        self.drop = 0

    def deliver(self, kind: str, snap: Snapshot) -> None:
        if not self.seen or snap.revision > self.seen[-1]["revision"]:
            self.seen.append(_frame(kind, snap))

    def changed(self, snap: Snapshot, current: Any) -> None:
        if self.drop > 0:
            self.drop -= 1
            return
        if self.seen and snap.revision > self.seen[-1]["revision"] + 1:
            self.deliver("session_data.snapshot", current())  # drop, get, resubscribe
            return
        self.deliver("session_data.changed", snap)


def _frame(kind: str, snap: Snapshot) -> dict[str, Any]:
    return {"frame": kind, "revision": snap.revision, "data": snap.data}


class Replay:
    """The interpreter: one fixture's steps over the transitions."""

    def __init__(self, tools: list[Tool], scope: str, policy: str, dispatcher: Dispatcher | None):
        self.kit = Kit(tools)
        self.tools = tools
        self.scope = scope
        self.policy = policy
        self.dispatcher = dispatcher
        self.shown: list[dict[str, Any]] = []
        self.subs: list[tuple[tuple[str, str], _Client]] = []
        self.frames: dict[str, _Client] = {}

    # -- the runtime's background work, run to quiescence ---------------------------------
    def _current(self, conversation: str, scope: str) -> Snapshot:
        session = self.kit.facts.session(conversation, scope)
        if session is None:
            return Snapshot(None, 0)
        return self.kit.facts.session_data(scope, session.app_session_id)

    def settle(self) -> None:
        facts = self.kit.facts
        while True:
            moved = False
            events: list[dict[str, Any]] = []
            moved |= self.kit.relay(events.append) > 0
            self.shown.extend(events)
            for body in events:
                if self.policy == "auto":
                    for name in ("surface_loaded", "foreground_confirmed"):
                        args = (body["instance"], body["conversation"], body["scope"])
                        moved |= self.kit.host_event(name, *args) is not None
            for act_id in facts.activations_to_drive():
                moved |= self.kit.advance(act_id, worker_up=True) is not None
            for sid in facts.sessions_to_pump():
                for stuck in facts.delivered_calls(sid):
                    self.kit.interrupt(stuck)
                call = self.kit.deliver_next(sid)
                if call is not None:
                    self._run(call, sid)
                    moved = True
            if not moved:
                return

    def _run(self, call: Call, sid: str) -> None:
        assert self.dispatcher is not None
        session = self.kit.facts.session_by_id(sid)
        assert session is not None
        ctx = ToolContext(
            call_id=call.call_id,
            app_scope=session.scope,
            app_session_id=sid,
            conversation_id=session.conversation_id,
            session_data=_SessionData(self, session.scope, sid, session.conversation_id),  # type: ignore[arg-type]
        )
        outcome = asyncio.run(self.dispatcher.dispatch(call.method, json.loads(call.params), ctx))
        tool = self.kit.registry[call.method]
        if outcome.ok:
            problems = validator_for(tool.result_schema).problems(outcome.result)
            reply = {"ok": True, "result": outcome.result}
            self.kit.answer(call, reply=reply, result_problems=problems)
        else:
            self.kit.answer(call, reply={"ok": False, "error": outcome.error})

    def _emitted(self, answers: list[dict[str, Any]]) -> list[dict[str, Any]]:
        facts = self.kit.facts
        new = facts.outbox_pending(1000)
        facts.ack([m["id"] for m in new])
        ids = {m["id"] for m in new}
        for msg in answers:  # a rejection (never persisted) or a repeat (its stored answer)
            if msg["id"] not in ids:
                new.append(msg)
                ids.add(msg["id"])
        return new

    def _scope(self, args: dict[str, Any]) -> str:
        return str(args.get("scope") or self.scope)

    # -- steps ---------------------------------------------------------------------------
    def act(self, step: Step) -> list[dict[str, Any]]:
        a, kit = step.args, self.kit
        if step.action in ("call", "calls"):
            answers = []
            for c in [a] if step.action == "call" else a:
                ev = event(c["id"], c["conversation"], c["method"], c["params"])
                d = kit.call(ev, idle=False)
                assert d is not None
                if d.answer is not None:
                    answers.append(d.answer)
                elif d.replay:
                    latest = kit.facts.latest_message(c["id"])
                    assert latest is not None
                    answers.append(latest)
            self.settle()
            return self._emitted(answers)
        if step.action == "host":
            scope = self._scope(a)
            shown = [
                b
                for b in self.shown
                if (b["conversation"], b["scope"]) == (a["conversation"], scope)
            ]
            instance = a.get("instance") or (shown[-1]["instance"] if shown else None)
            if instance is not None:
                kit.host_event(a["event"], instance, a["conversation"], scope)
            self.settle()
            return self._emitted([])
        if step.action in ("clock", "restart"):
            kit.now += parse_duration(a["advance"]) if a.get("advance") else 0
            if step.action == "restart":  # at most once: what was in flight is interrupted
                for call in kit.facts.delivered_calls():
                    kit.interrupt(call)
            kit.tick()
            self.settle()
            return self._emitted([])
        if step.action == "session_data":
            session = kit.facts.session(a["conversation"], self._scope(a))
            snap = (
                kit.facts.session_data(session.scope, session.app_session_id)
                if session is not None
                else Snapshot(None, 0)
            )
            return [{"revision": snap.revision, "data": snap.data}]
        if step.action == "subscribe":
            scope = self._scope(a)
            client = self.frames[a["as"]] = _Client()
            client.deliver("session_data.snapshot", self._current(a["conversation"], scope))
            self.subs.append(((a["conversation"], scope), client))
            return list(client.seen)
        if step.action == "frames":
            return list(self.frames[a["as"]].seen)
        if step.action == "drop_frame":
            self.frames[a["as"]].drop += a["count"]
            return []
        if step.action == "reconnect":
            client = self.frames[a["as"]]
            (conv, scope) = next(k for k, c in self.subs if c is client)
            client.deliver("session_data.snapshot", self._current(conv, scope))
            return list(client.seen)
        if step.action == "surface_replace":
            err = surface_write_refused()
            return [{"error": {"code": err.code, "message": err.message}}]
        if step.action == "inventory":
            tools = sorted(self.tools, key=lambda x: x.method)
            return [x.inventory() for x in tools if not a.get("scope") or x.scope == a["scope"]]
        return kit.facts.im_records(a["conversation"])


def _tools(bundle: Path) -> tuple[list[Tool], str]:
    report = check_bundle(bundle, _trust(KEY))
    assert report.ok and report.manifest is not None
    app = report.manifest["app"]
    return load_tools(app["scope"], app["version"], report.manifest), str(app["scope"])


def _dispatcher(app: str) -> Dispatcher | None:
    if app != "notes":
        return None  # the Pomodoro's tools are served by the runtime itself
    sys.path.insert(0, str(APPS / "notes"))
    try:
        from notes_app.tools import tools  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(APPS / "notes"))
    return Dispatcher(tools)


@pytest.mark.parametrize("path", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_fixture_at_the_transition_level(path: Path, bundles: dict[str, Path]) -> None:  # noqa: F811
    scenario = load_scenario(path)
    header = scenario.header
    assert header.app and header.host
    tools, scope = _tools(bundles[header.app])
    replay = Replay(tools, scope, header.host, _dispatcher(header.app))
    failed = []
    for step in scenario.steps:
        if not step.runs_on("python"):
            continue
        before = len(replay.kit.facts.outbox_all())
        messages = replay.act(step)
        problems = (
            [d.describe() for d in compare(step.expect, messages)]
            if step.expect is not None
            else []
        )
        if step.outbox_grew is not None:
            grew = len(replay.kit.facts.outbox_all()) > before
            if grew != step.outbox_grew:
                problems.append(f"outbox_grew: expected {step.outbox_grew}, actual {grew}")
        if problems:
            failed.append(f"step {step.index} ({step.describe()}): {'; '.join(problems)}")
    assert not failed, f"{path.name}: " + "; ".join(failed)
    assert replay.kit.lost == 0  # nothing raced: the interpreter is sequential
