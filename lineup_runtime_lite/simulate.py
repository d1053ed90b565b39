"""`lineup run`: build with a dev key, install into an embedded runtime on a virtual clock,
then play a scenario (or interactive commands) and report the timeline."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lineup_runtime_lite.clock import VirtualClock, format_ts, parse_duration
from lineup_runtime_lite.host import HostSimulator
from lineup_runtime_lite.runtime import Runtime
from lineup_runtime_lite.scenario import Scenario, Step, matches
from lineup_sdk.errors import LineupError

__all__ = ["Simulation", "StepReport", "open_simulation"]


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
        return out


@dataclass
class Simulation:
    """An embedded runtime for one MiniApp, restartable on the same database."""

    db: Path
    trust: Any
    bundle: Path
    scope: str
    policy: str
    sandbox: str = "best_effort"
    clock: VirtualClock = field(default_factory=VirtualClock)
    rt: Runtime | None = None
    _tmp: Path | None = None
    _seen: set[str] = field(default_factory=set)

    def start(self) -> None:
        self.clock = VirtualClock()
        self.rt = Runtime.open(
            self.db,
            trust=self.trust,
            clock=self.clock,
            host=HostSimulator(self.policy),
            sandbox=self.sandbox,
        )
        self.rt.install(self.bundle)
        self._seen = {m["id"] for m in self.rt.outbox.all()}

    def runtime(self) -> Runtime:
        assert self.rt is not None
        return self.rt

    def close(self) -> None:
        if self.rt is not None:
            self.rt.close()
            self.rt = None
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def _new_messages(self) -> list[dict[str, Any]]:
        out = []
        for m in self.runtime().outbox.all():
            if m["id"] not in self._seen:
                self._seen.add(m["id"])
                out.append(m)
        return out

    def act(self, step: Step) -> list[dict[str, Any]]:
        """Carry out one step's action; return what it emitted."""
        rt = self.runtime()
        a = step.args
        if step.action == "call":
            msg = rt.call(a["id"], a["conversation"], a["method"], a["params"])
            rt.settle()
            new = self._new_messages()
            if msg["id"] not in {m["id"] for m in new} and msg["id"] not in self._seen:
                new.append(msg)  # a rejection: answered, never persisted
            elif msg["id"] not in {m["id"] for m in new}:
                new.append(msg)  # a repeat: the stored answer again
            return new
        if step.action == "host":
            rt.host.event(
                a["event"],
                conversation=a["conversation"],
                scope=a.get("scope", self.scope),
                instance=a.get("instance"),
            )
            return self._new_messages()
        if step.action == "clock":
            self.clock.advance(parse_duration(a["advance"]))
            return self._new_messages()
        if step.action == "restart":
            rt.close()
            self.start()
            return self._new_messages()
        if step.action == "session_data":
            snap = rt.surface(a["conversation"], a.get("scope", self.scope)).get()
            return [{"revision": snap.revision, "data": snap.data}]
        return rt.im_records(a["conversation"])

    def play(
        self, scenario: Scenario, on_step: Callable[[StepReport], None] | None = None
    ) -> list[StepReport]:
        """Play every step, checking expectations; never stops early."""
        reports = []
        for step in scenario.steps:
            messages = self.act(step)
            report = StepReport(
                step.index, step.action, step.describe(), format_ts(self.clock.now_ms()), messages
            )
            if step.expect is not None and not matches(step.expect, messages):
                report.ok = False
                report.expected = step.expect
                report.problem = _explain(step.expect, messages)
            reports.append(report)
            if on_step is not None:
                on_step(report)
        return reports


def _explain(expected: list[Any], actual: list[dict[str, Any]]) -> str:
    if len(expected) != len(actual):
        return f"expected {len(expected)} message(s), got {len(actual)}"
    for i, (e, a) in enumerate(zip(expected, actual, strict=True), start=1):
        if not matches(e, a):
            return f"message {i} does not match {e}"
    return "mismatch"


def open_simulation(
    target: Path,
    *,
    db: Path | None,
    trust: Path | None,
    policy: str | None,
    scenario: Scenario | None,
    sandbox: str = "best_effort",
) -> Simulation:
    """Prepare a simulation from a project folder (built with its dev key) or a bundle.

    Raises:
        LineupError: a build problem (with its diagnostics), or a usage error for a bundle
            without `--trust`.
    """
    from lineup_build.build import build_dev
    from lineup_build.trust import TrustStore, dev_trust
    from lineup_build.verify import check_bundle

    effective_policy = policy or (scenario.host_policy if scenario else None) or "auto"
    tmp = Path(tempfile.mkdtemp(prefix="lineup-run-"))
    try:
        if target.is_dir():
            result, key = build_dev(
                target, out_dir=target.resolve() / ".lineup" / "run", sandbox=sandbox
            )
            assert result.bundle is not None and result.manifest is not None
            bundle = result.bundle
            trust_obj: Any = dev_trust(key.public_raw, result.manifest)
            scope = result.manifest["app"]["scope"]
        else:
            if trust is None:
                raise LineupError(
                    "untrusted_key",
                    f"{target} is a bundle; pass --trust FILE to say whose keys you trust",
                    hint="lineup run BUNDLE --trust trust.toml",
                    exit_code=2,
                )
            trust_obj = TrustStore.load(trust)
            report = check_bundle(target, trust_obj)
            if not report.ok:
                raise report.problems[0]
            bundle = target
            assert report.manifest is not None
            scope = report.manifest["app"]["scope"]
        sim = Simulation(
            db or tmp / "runtime.db", trust_obj, bundle, scope, effective_policy, sandbox
        )
        sim._tmp = tmp
        sim.start()
        return sim
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
