"""The runtime as its users run it (issue 18, SPEC 13.1): relative paths given once, calls
that hand on what they committed before they return, arrival order at the moment an
activation becomes ready, Host events that cannot address anything, and a worker that
fails to start saying why.

Tests of the public API here do what the README does: relative paths in the working
folder, no `settle()` the README does not show."""

from __future__ import annotations

import asyncio
import logging
import shutil
import sqlite3
from pathlib import Path

import pytest

from lineup_build.signing import SigningKey
from lineup_build.trust import TrustStore
from lineup_runtime_lite import AsyncRuntime, HostSimulator, Runtime, VirtualClock
from lineup_runtime_lite.internals import engine_of
from lineup_runtime_lite.store import SCHEMA_VERSION
from lineup_sdk.errors import LineupError
from tests.runtime.conftest import FIXTURES, build_source_app

REPEATS = 200


def _final(rt: Runtime, call_id: str) -> dict[str, object]:
    record = rt.call_record(call_id)
    assert record is not None
    return record["messages"][-1]  # type: ignore[no-any-return]


# -- relative paths, resolved once ---------------------------------------------------------
def test_relative_runtime_open_runs_miniapp_calls_even_after_a_chdir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, trust: TrustStore, todo_bundle: Path
) -> None:
    work = tmp_path / "work"
    (work / "dist").mkdir(parents=True)
    shutil.copy(todo_bundle, work / "dist" / "todo-1.0.0.lineup")
    monkeypatch.chdir(work)
    rt = Runtime.open("runtime.db", trust=trust)
    try:
        rt.install("dist/todo-1.0.0.lineup")
        monkeypatch.chdir(tmp_path)  # a later chdir never re-resolves the paths given
        first = rt.call("call-1", "conv-1", "todo.add", {"title": "milk"})
        assert first["stage"] == "accepted"
        rt.settle()  # as the README does
        final = _final(rt, "call-1")
        assert final["stage"] == "result", final
        assert rt.surface("conv-1", "todo").get().revision == 1
    finally:
        rt.close()
    assert (work / "runtime.db").is_file() and (work / "runtime.db.apps").is_dir()
    assert not (tmp_path / "runtime.db").exists()


def test_relative_async_runtime_open_runs_miniapp_calls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, trust: TrustStore, todo_bundle: Path
) -> None:
    (tmp_path / "dist").mkdir()
    shutil.copy(todo_bundle, tmp_path / "dist" / "todo-1.0.0.lineup")
    monkeypatch.chdir(tmp_path)

    async def main() -> dict[str, object]:
        async with await AsyncRuntime.open("runtime.db", trust=trust, apps_dir="apps") as rt:
            await rt.install("dist/todo-1.0.0.lineup")
            msg = await rt.call("call-1", "conv-1", "todo.add", {"title": "milk"})
            assert msg["stage"] == "accepted"
            await rt.settle()
            record = await rt.call_record("call-1")
            assert record is not None
            return record["messages"][-1]  # type: ignore[no-any-return]

    assert asyncio.run(main())["stage"] == "result"
    assert (tmp_path / "apps" / "todo" / "1.0.0").is_dir()


def test_installed_folders_are_stored_relative_to_the_apps_folder(
    tmp_path: Path, trust: TrustStore, todo_bundle: Path
) -> None:
    with Runtime.open(tmp_path / "rt.db", trust=trust) as rt:
        rt.install(todo_bundle)
    con = sqlite3.connect(tmp_path / "rt.db")
    try:
        assert con.execute("SELECT dir FROM app_versions").fetchall() == [("todo/1.0.0",)]
    finally:
        con.close()
    # a database and its apps folder move together
    moved = tmp_path / "elsewhere"
    moved.mkdir()
    shutil.move(tmp_path / "rt.db", moved / "rt.db")
    shutil.move(tmp_path / "rt.db.apps", moved / "rt.db.apps")
    with Runtime.open(moved / "rt.db", trust=trust) as rt:
        rt.call("c1", "conv", "todo.add", {"title": "tea"})
        rt.settle()
        assert _final(rt, "c1")["stage"] == "result"


def test_schema_3_migration_makes_the_e258c37_folders_relative(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    shutil.copyfile(FIXTURES / "e258c37.db", db)
    from lineup_runtime_lite.store import Store

    Store(db).close()
    con = sqlite3.connect(db)
    try:
        rows = con.execute("SELECT scope, version, dir FROM app_versions ORDER BY scope").fetchall()
        version = con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    finally:
        con.close()
    assert int(version[0]) == SCHEMA_VERSION >= 3
    assert rows == [("pomodoro", "1.0.0", "pomodoro/1.0.0"), ("todo", "1.0.0", "todo/1.0.0")]


def test_a_schema_2_database_made_with_a_relative_path_works_from_another_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, trust: TrustStore, todo_bundle: Path
) -> None:
    """What a schema-2 runtime wrote for `Runtime.open("rel.db")`: folders relative to the
    working folder it was started in (`rel.db.apps/todo/1.0.0`)."""
    project = tmp_path / "project"
    project.mkdir()
    with Runtime.open(project / "rel.db", trust=trust) as rt:
        rt.install(todo_bundle)
        rt.call("c1", "conv", "todo.add", {"title": "milk"})
        rt.settle()
    con = sqlite3.connect(project / "rel.db")
    try:  # back to schema 2 as that runtime left it
        con.execute("UPDATE app_versions SET dir = 'rel.db.apps/' || scope || '/' || version")
        con.execute("UPDATE meta SET value='2' WHERE key='schema_version'")
        con.commit()
    finally:
        con.close()
    monkeypatch.chdir(tmp_path)  # not the folder it was made in
    with Runtime.open("project/rel.db", trust=trust) as rt:
        rt.call("c2", "conv", "todo.add", {"title": "eggs"})
        rt.settle()
        final = _final(rt, "c2")
        assert final["stage"] == "result", final
        assert rt.surface("conv", "todo").get().revision == 2
    con = sqlite3.connect(project / "rel.db")
    try:
        assert con.execute("SELECT dir FROM app_versions").fetchall() == [("todo/1.0.0",)]
    finally:
        con.close()


# -- a call hands on what it committed ------------------------------------------------------
def test_sync_call_then_host_event_confirms_every_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, trust: TrustStore, pomodoro_bundle: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    clock = VirtualClock()
    with Runtime.open("runtime.db", trust=trust, clock=clock, host=HostSimulator("manual")) as rt:
        rt.install(pomodoro_bundle)
        confirmed = 0
        for i in range(REPEATS):
            conv = f"conv-{i}"
            msg = rt.call(f"start-{i}", conv, "pomodoro.start", {"minutes": 25})
            assert msg["stage"] == "accepted" and msg["activation"] == "starting"
            confirmed += rt.host.event("foreground_confirmed", conversation=conv, scope="pomodoro")
            assert [m["stage"] for m in rt.call_record(f"start-{i}")["messages"]] == [  # type: ignore[index]
                "accepted",
                "started",
            ]
        assert confirmed == REPEATS


def test_async_call_then_host_event_confirms_every_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, trust: TrustStore, pomodoro_bundle: Path
) -> None:
    monkeypatch.chdir(tmp_path)

    async def main() -> int:
        confirmed = 0
        async with await AsyncRuntime.open(
            "runtime.db", trust=trust, clock=VirtualClock(), host=HostSimulator("manual")
        ) as rt:
            await rt.install(pomodoro_bundle)
            for i in range(REPEATS):
                conv = f"conv-{i}"
                msg = await rt.call(f"start-{i}", conv, "pomodoro.start", {"minutes": 25})
                assert msg["activation"] == "starting"
                confirmed += await rt.host.event(
                    "foreground_confirmed", conversation=conv, scope="pomodoro"
                )
                record = await rt.call_record(f"start-{i}")
                assert record is not None
                assert [m["stage"] for m in record["messages"]] == ["accepted", "started"]
        return confirmed

    assert asyncio.run(main()) == REPEATS


def test_a_call_returns_even_when_the_host_refuses_its_intent(
    trust: TrustStore, pomodoro_bundle: Path
) -> None:
    """Handing on waits for the Host to take or refuse the intent, never for its retries."""
    host = HostSimulator("manual", refuse={"down"})
    with Runtime.open(":memory:", trust=trust, clock=VirtualClock(), host=host) as rt:
        rt.install(pomodoro_bundle)
        msg = rt.call("s1", "down", "pomodoro.start", {"minutes": 5})
        assert msg["activation"] == "starting"
        assert [a["conversation"] for a in host.attempts] == ["down"]  # tried once already
        assert host.intents == []


def test_a_slow_surface_listener_never_delays_an_agent_call(
    probe: Runtime,
) -> None:
    import threading

    release = threading.Event()
    frames: list[int] = []

    def slow(kind: str, snap: object) -> None:
        frames.append(getattr(snap, "revision", -1))
        if kind == "session_data.changed":
            release.wait(30)

    probe.call("w", "conv", "probe.echo", {"text": "hi"})
    probe.settle()
    probe.surface("conv", "probe").subscribe(slow)
    try:
        for i in range(3):  # each answers while the listener is still stuck on the first
            msg = probe.call(f"a{i}", "conv", "probe.append", {"item": str(i)})
            assert msg["stage"] == "result" and msg["result"] == i + 1
        assert not release.is_set()
    finally:
        release.set()
    probe.settle()
    assert frames == [0, 1, 2, 3]


# -- arrival order at the moment an activation becomes ready --------------------------------
def test_a_call_in_the_batch_that_makes_the_session_ready_queues_behind_earlier_calls(
    trust: TrustStore, probe_bundle: Path
) -> None:
    """Staged: the Host's confirmation (which makes the activation ready) and a new call of
    the same session are decided in one group commit, in that order. The activation's pump
    has not been kicked yet (that happens after the COMMIT), so "no pump running" must not
    be read as "queue empty": the new call goes behind the call queued before it."""

    async def main() -> list[str]:
        async with await AsyncRuntime.open(
            ":memory:", trust=trust, clock=VirtualClock(), host=HostSimulator("manual")
        ) as rt:
            await rt.install(probe_bundle)
            assert (await rt.call("fg", "c", "probe.fg", {}))["activation"] == "starting"
            await rt.settle()  # the worker is up; the activation waits for the Host
            queued = await rt.call("a0", "c", "probe.append", {"item": "early"})
            assert queued["activation"] == "queued"
            batches = engine_of(rt).commits.batches
            confirm = asyncio.ensure_future(
                rt.host.event("foreground_confirmed", conversation="c", scope="probe")
            )
            late = asyncio.ensure_future(rt.call("b", "c", "probe.append", {"item": "late"}))
            await asyncio.gather(confirm, late)
            await rt.settle()
            assert engine_of(rt).commits.batches >= batches + 1
            snap = await rt.surface("c", "probe").get()
            assert snap.data is not None
            return list(snap.data["items"])

    assert asyncio.run(main()) == ["early", "late"]


# -- host.event that can address nothing -----------------------------------------------------
def test_host_event_with_no_instance_raises_usage_invalid(pomo: Runtime) -> None:
    with pytest.raises(LineupError) as exc:
        pomo.host.event("foreground_confirmed", conversation="nobody", scope="pomodoro")
    assert exc.value.code == "usage_invalid"
    assert "no instance" in exc.value.message and exc.value.hint


def test_host_event_for_an_ended_instance_is_false_not_an_error(pomo: Runtime) -> None:
    pomo.call("s", "c", "pomodoro.start", {"minutes": 5})
    assert pomo.host.event("foreground_confirmed", conversation="c", scope="pomodoro") is True
    pomo.call("i", "c", "pomodoro.interrupt", {})
    # the instance is no longer starting: a stale confirmation is ignored
    assert pomo.host.event("foreground_confirmed", conversation="c", scope="pomodoro") is False


def test_host_event_finds_an_instance_the_host_never_took(
    trust: TrustStore, pomodoro_bundle: Path
) -> None:
    """The facts, not the simulator's memory, say whether there is an instance."""
    host = HostSimulator("manual", refuse={"c"})
    with Runtime.open(":memory:", trust=trust, clock=VirtualClock(), host=host) as rt:
        rt.install(pomodoro_bundle)
        rt.call("s", "c", "pomodoro.start", {"minutes": 5})
        assert host.intents == []
        assert rt.host.event("user_left", conversation="c", scope="pomodoro") is True


@pytest.mark.parametrize(
    ("event", "conversation"),
    [("foreground_confirmd", "c"), ("foreground_confirmed", ""), ("foreground_confirmed", 3)],
)
def test_host_event_refuses_bad_arguments(pomo: Runtime, event: str, conversation: object) -> None:
    with pytest.raises(LineupError) as exc:
        pomo.host.event(event, conversation=conversation, scope="pomodoro")  # type: ignore[arg-type]
    assert exc.value.code == "usage_invalid"


# -- a worker that fails to start says why ---------------------------------------------------
BROKEN = '''\
import sys

from lineup_sdk import ToolContext, define_agent_tools

tools = define_agent_tools(app_scope="broken")


@tools.tool("broken.echo", activation="app_ready")
async def echo(ctx: ToolContext, text: str) -> str:
    """Echo."""
    return text


if "lineup_sdk._worker" in sys.modules:  # fine at build time, fails in the worker
    raise RuntimeError("boom\\x1b[31m\\nsecond line")
'''


@pytest.fixture(scope="module")
def broken_bundle(tmp_path_factory: pytest.TempPathFactory, rt_key: SigningKey) -> Path:
    return build_source_app(tmp_path_factory.mktemp("broken") / "broken", "broken", BROKEN, rt_key)


def test_worker_failed_carries_its_cause_and_says_where_the_log_is(
    tmp_path: Path, trust: TrustStore, broken_bundle: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="lineup.runtime.workers")
    with Runtime.open(tmp_path / "rt.db", trust=trust, clock=VirtualClock()) as rt:
        rt.install(broken_bundle)
        for conv in ("c1", "c2"):
            rt.call(f"call-{conv}", conv, "broken.echo", {"text": "x"})
            rt.settle()
            record = rt.call_record(f"call-{conv}")
            assert record is not None
            receipt, final = record["messages"][-2], record["messages"][-1]
            assert receipt["stage"] == "activation_failed"
            assert receipt["reason"] == "worker_failed" and "cause" not in receipt
            assert final["error"]["code"] == "activation_failed"
            # control characters escaped, the first line only
            assert final["error"]["details"] == {
                "reason": "worker_failed",
                "cause": "RuntimeError: boom\\x1b[31m",
            }
            assert "log" not in str(final)  # the log's path is never part of an AgentMessage
        log_path = rt.worker_log("broken", "1.0.0")
        assert log_path.is_absolute() and log_path.is_file()
        assert "RuntimeError: boom" in log_path.read_text()
        reports = [r for r in caplog.records if r.name == "lineup.runtime.workers"]
        assert len(reports) == 1  # once per app, however many activations failed
        assert "RuntimeError: boom" in reports[0].getMessage()
        assert str(log_path) in reports[0].getMessage()
        with pytest.raises(LineupError) as exc:
            rt.worker_log("broken", "9.9.9")
        assert exc.value.code == "usage_invalid"


def test_the_cause_is_clipped_to_500_characters() -> None:
    from lineup_runtime_lite.drivers.workers import CAUSE_MAX, failure_cause

    cause = failure_cause("ValueError: " + "x" * 2_000 + "\nnext")
    assert len(cause) == CAUSE_MAX == 500 and cause.startswith("ValueError: xxx")
    assert failure_cause("E: a\tb\x00") == "E: a\\tb\\x00"
    assert failure_cause("E: one\r\ntwo") == "E: one\\r"


def test_no_fast_send_past_a_queue_whose_pump_gave_up(probe: Runtime) -> None:
    """A pump that gave up on failing steps leaves its queue for the next kick: until then a
    new call of that session must queue behind it, not take the fast path."""
    probe.call("w", "conv", "probe.echo", {"text": "hi"})
    probe.settle()
    core = engine_of(probe)
    session = core.facts.session("conv", "probe")
    assert session is not None
    assert core.delivery.idle(session, "probe.echo")  # ready, nothing queued: fast path
    core.delivery._stalled.add(session.app_session_id)  # as `_pump` leaves it after giving up
    assert not core.delivery.idle(session, "probe.echo")
    answer = probe.call("q", "conv", "probe.echo", {"text": "behind"})
    assert answer["stage"] == "result" and answer["result"] == "behind"
    # it went through the queue: its kick ran the pump (a fast send never does), which
    # found the queue empty and cleared the mark
    assert session.app_session_id not in core.delivery._stalled
    assert core.delivery.idle(session, "probe.echo")
