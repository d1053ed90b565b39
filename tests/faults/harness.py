"""Run the driver in a subprocess, crash it, reopen the database in-process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from lineup_build.trust import TrustStore
from lineup_runtime_lite import HostSimulator, Runtime, VirtualClock
from lineup_runtime_lite.core.messages import AgentMessage
from lineup_runtime_lite.internals import engine_of
from lineup_runtime_lite.store import faults
from lineup_sdk.errors import LineupError
from tests.faults import invariants, tally

__all__ = [
    "CRASH_EXIT",
    "DriverRun",
    "Env",
    "env",
    "final",
    "host_event",
    "latest_instance",
    "sqlite_env",
    "stages",
    "wait_for",
]

DRIVER = Path(__file__).with_name("driver.py")
ROOT = Path(__file__).resolve().parents[2]
#: The exit status of a process that crashed at an armed fault point.
CRASH_EXIT = 137


def stages(rt: Runtime, call_id: str) -> list[str]:
    """The stages the outbox holds for a call, in order."""
    return [m["stage"] for m in rt.outbox.all() if m["call_id"] == call_id]


def final(rt: Runtime, call_id: str) -> AgentMessage:
    """The one final message of a call (fails unless there is exactly one)."""
    found = [m for m in rt.outbox.all() if m["call_id"] == call_id and m["kind"] != "receipt"]
    assert len(found) == 1, (call_id, found)
    return found[0]


def wait_for(rt: Runtime, sql: str, args: tuple[Any, ...] = (), *, timeout: float = 30) -> None:
    """Poll the runtime's store until `sql` returns a row (an event, not a deadline: the
    timeout only bounds a broken test)."""
    import time

    end = time.monotonic() + timeout
    while rt._call_sync(lambda: engine_of(rt).store.one(sql, args)) is None:
        assert time.monotonic() < end, f"never true: {sql} {args}"
        time.sleep(0.005)


def latest_instance(rt: Runtime, conversation: str, scope: str) -> str | None:
    """The newest activation of a conversation's App session (the Host knows its instances
    even when this runtime process never sent the intent)."""
    row = rt._call_sync(
        lambda: engine_of(rt).store.one(
            "SELECT a.activation_id FROM activations a JOIN app_sessions s "
            "ON s.app_session_id = a.app_session_id WHERE s.conversation_id=? AND s.scope=? "
            "ORDER BY a.created_ms DESC, a.rowid DESC LIMIT 1",
            (conversation, scope),
        )
    )
    return None if row is None else str(row[0])


def host_event(rt: Runtime, event: str, conversation: str, scope: str) -> bool:
    """Send a Host event naming the conversation's newest instance."""
    inst = latest_instance(rt, conversation, scope)
    if inst is None:
        return False
    return rt.host.event(event, conversation=conversation, scope=scope, instance=inst)


@dataclass
class DriverRun:
    """What a driver process printed before it ended, and how it ended."""

    returncode: int
    lines: list[dict[str, Any]] = field(default_factory=list)

    def calls(self) -> dict[str, dict[str, Any]]:
        """Every acknowledged call answer, by call_id (the last one wins)."""
        return {x["call_id"]: x["msg"] for x in self.lines if x.get("kind") == "call"}

    @property
    def done(self) -> bool:
        return any(x.get("kind") == "done" for x in self.lines)


@dataclass
class Env:
    """A database with its trust file and the bundles to install: an SQLite file (`db`), or
    a PostgreSQL database (`target` is its URL; `db` then only names the plan's file), and
    the apps folder every process of the test unpacks into."""

    db: Path
    trust_file: Path
    trust: TrustStore
    bundles: dict[str, Path]
    target: str = ""
    apps_dir: Path | None = None

    def __post_init__(self) -> None:
        self.target = self.target or str(self.db)

    @property
    def engine(self) -> str:
        return "postgresql" if self.target.startswith("postgresql://") else "sqlite"

    def plan(self, **extra: Any) -> dict[str, Any]:
        return {
            "db": self.target,
            "apps_dir": str(self.apps_dir) if self.apps_dir else None,
            "trust": str(self.trust_file),
            "bundles": {k: str(v) for k, v in self.bundles.items()},
            **extra,
        }

    def saved_now(self) -> int:
        """The virtual time the closed database resumes at."""
        sql = "SELECT value FROM meta WHERE key='virtual_now_ms'"
        if self.engine == "postgresql":
            import psycopg

            with psycopg.connect(self.target) as pg:
                row = pg.execute(sql).fetchone()
        else:
            import sqlite3

            con = sqlite3.connect(self.db)
            try:
                row = con.execute(sql).fetchone()
            finally:
                con.close()
        return int(row[0]) if row else VirtualClock().now_ms()

    def runtime(self, *, clock: VirtualClock, host: HostSimulator) -> Runtime:
        """`Runtime.open` on this database (no restart counted, no invariant check)."""
        return Runtime.open(
            self.target, trust=self.trust, clock=clock, host=host, apps_dir=self.apps_dir
        )

    def drive(
        self,
        steps: list[dict[str, Any]] | None = None,
        *,
        arm_at_open: tuple[str, str, int] | None = None,
        soak: dict[str, Any] | None = None,
        kill_after: int | None = None,
        clock_ms: int | None = None,
        on_line: Callable[[dict[str, Any]], bool] | None = None,
        timeout: float = 60,
    ) -> DriverRun:
        """Run the driver; SIGKILL it after `kill_after` printed lines, or when `on_line`
        returns True for a line."""
        plan = self.plan(steps=steps or [], arm_at_open=arm_at_open, clock_ms=clock_ms)
        if soak is not None:
            plan["soak"] = soak
        plan_file = self.db.with_suffix(".plan.json")
        plan_file.write_text(json.dumps(plan))
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        proc = subprocess.Popen(
            [sys.executable, str(DRIVER), str(plan_file)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            text=True,
            cwd=str(ROOT),
        )
        run = DriverRun(returncode=0)
        killed = False
        hung = threading.Timer(timeout, proc.kill)  # a hung driver fails the test, not CI
        hung.start()
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                run.lines.append(json.loads(line))
                stop = on_line is not None and on_line(run.lines[-1])
                if stop or (kill_after is not None and len(run.lines) >= kill_after):
                    proc.send_signal(signal.SIGKILL)
                    killed = True
                    break
            proc.wait(timeout=timeout)
        finally:
            hung.cancel()
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)
            stderr = proc.stderr.read() if proc.stderr is not None else ""
            for stream in (proc.stdin, proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()
        run.returncode = proc.returncode
        if not killed and run.returncode == -9:
            raise AssertionError(f"the driver hung for {timeout} s:\n{stderr}")
        if killed:
            tally.COUNTS["kills"] += 1
        elif run.returncode not in (0, CRASH_EXIT):
            raise AssertionError(f"driver failed ({run.returncode}):\n{stderr}")
        return run

    def open(self, *, clock: VirtualClock | None = None, host: str = "manual") -> Runtime:
        """Reopen the database in this process (recovery runs), counted as a restart."""
        tally.COUNTS["restarts"] += 1
        deadline = time.monotonic() + 5
        while True:
            try:
                rt = self.runtime(clock=clock or VirtualClock(), host=HostSimulator(host))
                break
            except LineupError as exc:
                # right after a kill -9, a child the killed runtime was forking (between
                # fork and exec) can still share its lock for a moment; a held lock past
                # that is a real failure
                if exc.code != "runtime_locked" or time.monotonic() > deadline:
                    raise
                tally.COUNTS["lock_waits"] += 1
                time.sleep(0.05)
        try:
            invariants.check(rt, settled=False, host_down=True)  # right after recovery
            installed = {a["scope"] for a in rt.apps()}
            for scope, bundle in self.bundles.items():
                if scope not in installed:
                    rt.install(bundle)
        except BaseException:
            rt.close()
            raise
        return rt

    def crashed_at(self, run: DriverRun, point: str) -> None:
        """Assert the driver died at `point`, then check the raw database."""
        assert run.returncode == CRASH_EXIT, (run.returncode, run.lines[-3:])
        assert not run.done
        if point in faults.POINTS:
            tally.crashed(point)
        else:  # the plan's own `exit` step: a crash at an arbitrary place
            tally.COUNTS["kills"] += 1
        invariants.check_db(self.target)


def _env(request: pytest.FixtureRequest, tmp_path: Path, trust: TrustStore, target: str) -> Env:
    trust_file = tmp_path / "trust.toml"
    trust.save(trust_file)
    bundles = {s: request.getfixturevalue(f"{s}_bundle") for s in ("probe", "todo", "pomodoro")}
    apps = tmp_path / "apps" if target else None  # SQLite's: beside its file
    return Env(tmp_path / "rt.db", trust_file, trust, bundles, target, apps)


@pytest.fixture
def env(
    store_engine: str, request: pytest.FixtureRequest, tmp_path: Path, trust: TrustStore
) -> Iterator[Env]:
    """The crash harness on the chosen store engine: an SQLite file, or a fresh PostgreSQL
    database (SPEC 15: the fault suite on both, one CI pass each)."""
    url = request.getfixturevalue("pg_url") if store_engine == "postgresql" else ""
    yield _env(request, tmp_path, trust, url)


@pytest.fixture()
def sqlite_env(request: pytest.FixtureRequest, tmp_path: Path, trust: TrustStore) -> Iterator[Env]:
    """The crash harness on an SQLite file only: for faults staged through SQLite itself
    (its page limit, its file lock, the file's own bytes)."""
    yield _env(request, tmp_path, trust, "")
