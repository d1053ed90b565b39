"""`lineup run`'s simulation: a bundle installed into an embedded runtime on a virtual clock,
a scenario (or interactive commands) played against it, the timeline reported. The CLI
(`lineup_build.cli.compose`) decides what bundle that is and builds it if need be."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lineup_runtime_lite.api.async_runtime import DEFAULT_ISOLATION
from lineup_runtime_lite.api.clock import LAST_MS, VirtualClock, format_ts, parse_duration
from lineup_runtime_lite.api.runtime import Runtime
from lineup_runtime_lite.core.messages import plain
from lineup_runtime_lite.host.simulator import HostSimulator
from lineup_runtime_lite.host.surface_client import SurfaceClient
from lineup_runtime_lite.sim.expect import Difference, compare, explain
from lineup_runtime_lite.sim.format import Scenario, Step
from lineup_runtime_lite.store.postgres import drop_schema
from lineup_sdk.errors import LineupError

__all__ = ["Simulation", "StepReport"]


@dataclass
class StepReport:
    """What one step emitted and whether its expectation held."""

    index: int
    action: str
    description: str
    at: str
    messages: list[dict[str, Any]]
    ok: bool = True
    problem: str | None = None
    expected: list[Any] | None = None
    differences: list[Difference] = field(default_factory=list)
    line: int | None = None
    #: Whether the step stated anything to check (`expect` or `outbox_grew`).
    checked: bool = False

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "step": self.index,
            "action": self.action,
            "description": self.description,
            "at": self.at,
            "messages": self.messages,
            "ok": self.ok,
        }
        if self.problem:
            out["problem"] = self.problem
            out["expected"] = self.expected
            out["differences"] = [d.to_dict() for d in self.differences]
        if self.line is not None:
            out["line"] = self.line
        return out


@dataclass
class Simulation:
    """An embedded runtime for one MiniApp, restartable on the same database.

    The simulation is the Agent: it acknowledges every outbox message it has shown, so what
    a reopened runtime emits (recovery after `restart`, or on reopening a kept `--db`) is
    exactly the unacknowledged rest.
    """

    db: Path | str
    trust: Any
    bundle: Path
    scope: str
    policy: str
    sandbox: str = "best_effort"
    isolation: str = DEFAULT_ISOLATION
    #: On a `postgresql://` database: the private schema this simulation keeps its tables
    #: in, dropped by `close()` (SPEC 15: `run` and `test` on PostgreSQL).
    db_schema: str | None = None
    clock: VirtualClock = field(default_factory=VirtualClock)
    rt: Runtime | None = None
    #: A folder `close()` removes: where the caller keeps the bundle and the database.
    scratch: Path | None = None
    _clients: dict[str, SurfaceClient] = field(default_factory=dict)
    #: What opening the runtime emitted before any step (recovery of a kept database).
    opened: list[dict[str, Any]] = field(default_factory=list)

    def start(self) -> None:
        self._open()
        self.runtime().install(self.bundle)
        self.opened = self._new_messages()

    def _open(self, resume_at_ms: int | None = None) -> None:
        # a restarted runtime goes on from the time it stopped at plus the downtime; a first
        # open starts from the default epoch (a kept database restores its persisted time)
        self.clock = VirtualClock() if resume_at_ms is None else VirtualClock(resume_at_ms)
        self.rt = Runtime.open(
            self.db,
            trust=self.trust,
            clock=self.clock,
            host=HostSimulator(self.policy),
            sandbox=self.sandbox,
            isolation=self.isolation,
            db_schema=self.db_schema,
        )
        if resume_at_ms is not None:
            self.clock.advance(0)  # persist the time that passed while down

    def runtime(self) -> Runtime:
        assert self.rt is not None
        return self.rt

    def close(self) -> None:
        if self.rt is not None:
            self.rt.close()
            self.rt = None
        if self.db_schema is not None:
            schema, self.db_schema = self.db_schema, None
            drop_schema(str(self.db), schema)
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)
            self.scratch = None

    def _move(self, text: str) -> int:
        """A clock move in ms; past the year 9999 (a resumed run) it is `scenario_invalid`."""
        ms = parse_duration(text)
        if self.clock.now_ms() + ms > LAST_MS:
            raise LineupError(
                "scenario_invalid",
                f"advance = {text!r} moves the clock beyond the year 9999",
                hint="advance by less; timestamps are RFC 3339",
            )
        return ms

    def _new_messages(self) -> list[dict[str, Any]]:
        rt = self.runtime()
        out: list[dict[str, Any]] = []
        while batch := rt.outbox.fetch(500):
            rt.outbox.ack([m["id"] for m in batch])
            out.extend(plain(m) for m in batch)
        return out

    def resolve_scope(self, conversation: str, scope: str | None) -> str:
        """The scope a step names, or the conversation's only app.

        Raises:
            LineupError: `scenario_invalid` when several apps could be meant.
        """
        if scope is not None:
            return scope
        scopes = sorted({a["scope"] for a in self.runtime().apps()} | {self.scope})
        if len(scopes) == 1:
            return scopes[0]
        raise LineupError(
            "scenario_invalid",
            f"conversation {conversation!r}: name the `scope` (installed: {', '.join(scopes)})",
        )

    def _calls(self, calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
        rt = self.runtime()
        answers = rt.call_many(
            [(c["id"], c["conversation"], c["method"], c["params"]) for c in calls]
        )
        rt.settle()
        new = self._new_messages()
        ids = {m["id"] for m in new}
        for msg in answers:  # a rejection (never persisted) or a repeat (its stored answer)
            if msg["id"] not in ids:
                new.append(plain(msg))
                ids.add(msg["id"])
        return new

    def act(self, step: Step) -> list[dict[str, Any]]:
        """Carry out one step's action; return what it emitted."""
        rt = self.runtime()
        a = step.args
        if step.action == "call":
            return self._calls([a])
        if step.action == "calls":
            return self._calls(a)
        if step.action == "host":
            try:
                rt.host.event(
                    a["event"],
                    conversation=a["conversation"],
                    scope=self.resolve_scope(a["conversation"], a.get("scope")),
                    instance=a.get("instance"),
                )
            except LineupError as exc:
                if exc.code != "usage_invalid":
                    raise
                # nothing to address (no call started the app: an earlier step failed, or
                # the scenario sends it first): the step's outcome, for its expectations
                return [{"error": {"code": exc.code, "message": exc.message}}]
            rt.settle()
            return self._new_messages()
        if step.action == "clock":
            self.clock.advance(self._move(a["advance"]))
            return self._new_messages()
        if step.action == "restart":
            down = self._move(a["advance"]) if a.get("advance") else 0
            stopped_at = self.clock.now_ms()
            rt.close()
            self._open(stopped_at + down)
            self.runtime().settle()
            return self._new_messages()
        if step.action == "session_data":
            scope = self.resolve_scope(a["conversation"], a.get("scope"))
            snap = rt.surface(a["conversation"], scope).get()
            return [{"revision": snap.revision, "data": snap.data}]
        if step.action == "subscribe":
            scope = self.resolve_scope(a["conversation"], a.get("scope"))
            client = SurfaceClient(rt.surface(a["conversation"], scope))
            self._clients[a["as"]] = client
            client.start()
            rt.settle()  # listeners drain before frames are read
            return list(client.seen)
        if step.action in ("frames", "drop_frame", "reconnect"):
            known = self._clients.get(a["as"])
            if known is None:
                raise LineupError(
                    "scenario_invalid",
                    f"no subscription named {a['as']!r} (subscribe with `as` first)",
                )
            if step.action == "drop_frame":
                known.drop_frames(a["count"])
                return []
            if step.action == "reconnect":
                rt.settle()
                known.reconnect()
            rt.settle()
            return list(known.seen)
        if step.action == "surface_replace":
            scope = self.resolve_scope(a["conversation"], a.get("scope"))
            try:
                rt.surface(a["conversation"], scope).replace(
                    a["data"], expected_revision=a["expected_revision"]
                )
            except LineupError as exc:
                return [{"error": {"code": exc.code, "message": exc.message}}]
            return [{"ok": True}]
        if step.action == "ui_action":
            return self._ui_action(a)
        if step.action == "crash_worker":
            scope = a.get("scope") or self.resolve_scope("", None)
            rt.kill_workers(scope)
            rt.settle()
            return self._new_messages()
        if step.action == "inventory":
            tools = rt.inventory()
            if a.get("scope"):
                tools = [t for t in tools if t["method"].split(".")[0] == a["scope"]]
            return tools
        return rt.im_records(a["conversation"])

    def _ui_action(self, a: dict[str, Any]) -> list[dict[str, Any]]:
        """A UI Action's outcome (SPEC 17), then what the outbox gained meanwhile. The step
        waits for what the runtime can do on its own: an action queued behind a starting
        activation (which only a later step moves on) emits `action_pending` at once."""
        rt = self.runtime()
        conversation = a["conversation"]
        scope = self.resolve_scope(conversation, a.get("scope"))
        starting = any(
            s["conversation_id"] == conversation and s["state"] == "starting"
            for s in rt.sessions(scope)
        )
        out: dict[str, Any]
        try:
            out = plain(
                rt.surface(conversation, scope).act(
                    a["name"],
                    a["params"],
                    client_id=a["client"],
                    seq=a["seq"],
                    timeout=0 if starting else None,
                )
            )
        except LineupError as exc:
            error: dict[str, Any] = {"code": exc.code, "message": exc.message}
            if exc.details is not None:
                error["details"] = exc.details
            accepted = getattr(exc, "action_id", None)
            out = {"action_id": accepted, "error": error} if accepted else {"error": error}
        rt.settle()
        return [out, *self._new_messages()]

    def act_report(self, index: int, step: Step) -> StepReport:
        """`act(step)` as step `index` of a timeline, with nothing expected of it (a line
        typed at `lineup run`'s prompt)."""
        messages = self.act(step)
        return StepReport(
            index, step.action, step.describe(), format_ts(self.clock.now_ms()), messages
        )

    def opening_report(self) -> StepReport | None:
        """Step 0: what opening the runtime emitted, once (None when it emitted nothing)."""
        if not self.opened:
            return None
        messages, self.opened = self.opened, []
        return StepReport(
            0,
            "open",
            "open (recovery of the kept database)",
            format_ts(self.clock.now_ms()),
            messages,
        )

    def play(
        self, scenario: Scenario, on_step: Callable[[StepReport], None] | None = None
    ) -> list[StepReport]:
        """Play every step, checking expectations; never stops early. What opening a kept
        database emitted (recovery) comes first, as step 0 with nothing expected of it."""
        reports = []
        opening = self.opening_report()
        if opening is not None:
            reports.append(opening)
            if on_step is not None:
                on_step(opening)
        for step in scenario.steps:
            if not step.runs_on("python"):
                continue  # a step for other Hosts (`hosts`)
            before = len(self.runtime().outbox.all()) if step.outbox_grew is not None else 0
            messages = self.act(step)
            report = StepReport(
                step.index,
                step.action,
                step.describe(),
                format_ts(self.clock.now_ms()),
                messages,
                line=step.line,
                checked=step.expect is not None or step.outbox_grew is not None,
            )
            problems: list[str] = []
            if step.expect is not None:
                report.differences = compare(step.expect, messages)
                problems.extend(explain(report.differences, messages))
            if step.outbox_grew is not None:
                grew = len(self.runtime().outbox.all()) > before
                if grew != step.outbox_grew:
                    problems.append(
                        f"outbox_grew: expected {str(step.outbox_grew).lower()}, "
                        f"actual {str(grew).lower()}"
                    )
            if problems:
                report.ok = False
                report.expected = step.expect
                report.problem = "; ".join(problems)
            reports.append(report)
            if on_step is not None:
                on_step(report)
        return reports
