"""Faults around accepting a call: F1–F4 (acceptance commit, lost reply, concurrent
duplicates, conflicts), F21 (a failing COMMIT) and F24 (a second runtime)."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from lineup_runtime_lite import Runtime
from lineup_runtime_lite.internals import engine_of
from lineup_runtime_lite.store import faults
from lineup_runtime_lite.store.faults import FaultInjected
from lineup_sdk.errors import LineupError
from tests.faults import invariants
from tests.faults.harness import Env, final, host_event, stages
from tests.runtime.conftest import ready


@pytest.fixture(autouse=True)
def _disarm() -> Iterator[None]:
    yield
    faults.disarm()


@pytest.mark.store
def test_F01_crash_before_the_acceptance_commit_stores_nothing(env: Env) -> None:
    for point in ("commit.before", "commit.after_write"):
        run = env.drive([{"arm": [point, "crash", 0]}, {"call": ["f1", "c1", "probe.fg", {}]}])
        env.crashed_at(run, point)
        assert "f1" not in run.calls()
        with env.open() as rt:
            dump = rt.store_dump()
            assert dump["calls"] == [] and dump["app_sessions"] == []
            assert dump["activations"] == [] and dump["outbox"] == []
    with env.open() as rt:  # the same call_id is later accepted normally
        assert rt.call("f1", "c1", "probe.fg", {})["activation"] == "starting"
        rt.settle()
        assert host_event(rt, "foreground_confirmed", "c1", "probe")
        rt.settle()
        assert stages(rt, "f1") == ["accepted", "activation_ready", "result"]
        invariants.check(rt)


@pytest.mark.store
def test_F02_commit_succeeded_but_the_reply_was_lost(env: Env) -> None:
    run = env.drive(
        [{"arm": ["commit.after", "crash", 0]}, {"call": ["e1", "c1", "probe.echo", {"text": "x"}]}]
    )
    env.crashed_at(run, "commit.after")
    assert "e1" not in run.calls()
    with env.open() as rt:
        rt.settle()
        accepted = [m for m in rt.outbox.all() if m["id"] == "e1:accepted"]
        assert len(accepted) == 1
        assert stages(rt, "e1") == ["accepted", "activation_ready", "result"]
        n = len(rt.outbox.all())
        assert rt.call("e1", "c1", "probe.echo", {"text": "x"}) == final(rt, "e1")
        assert len(rt.outbox.all()) == n
        assert [r[0] for r in rt.store_dump()["calls"]] == ["e1"]  # one row
        invariants.check(rt)


@pytest.mark.store
def test_F02_in_process_lost_reply_on_a_ready_session(probe: Runtime) -> None:
    ready(probe)
    faults.arm("commit.after")  # the call commits as `delivered`, then the step fails
    with pytest.raises(FaultInjected):
        probe.call("e1", "conv", "probe.echo", {"text": "x"})
    retry = probe.call("e1", "conv", "probe.echo", {"text": "x"})
    # it may never have been sent: at most once, so it is interrupted, not re-sent
    assert retry["error"]["code"] == "delivery_interrupted"
    assert probe.call("e1", "conv", "probe.echo", {"text": "x"}) == retry
    assert stages(probe, "e1") == ["error"]
    invariants.check(probe)


def concurrently(n: int, fn: Any) -> list[Any]:
    barrier = threading.Barrier(n)
    out: list[Any] = [None] * n

    def run(i: int) -> None:
        barrier.wait()
        out[i] = fn()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return out


@pytest.mark.store
@pytest.mark.parametrize(
    ("method", "params", "warm"),
    [
        ("probe.echo", {"text": "x"}, True),  # delivered at once on a ready session
        ("probe.fg", {}, False),  # starts an activation
        ("pomodoro.start", {"minutes": 5}, False),  # a runtime tool
        ("probe.peek", {}, False),  # ends at once with app_not_running
    ],
    ids=["ready-session", "starting", "runtime-tool", "answered-at-once"],
)
def test_F03_the_same_call_id_sent_concurrently(
    probe: Runtime, pomodoro_bundle: Path, method: str, params: dict[str, Any], warm: bool
) -> None:
    probe.install(pomodoro_bundle)
    if warm:
        ready(probe)
    for round_ in range(5):
        cid = f"dup{round_}"
        answers = concurrently(8, lambda cid=cid: probe.call(cid, "conv", method, params))
        assert all(a == answers[0] for a in answers), answers
        probe.settle()
        rows = [r for r in probe.store_dump()["calls"] if r[0] == cid]
        assert len(rows) == 1
        ids = [m["id"] for m in probe.outbox.all() if m["call_id"] == cid]
        assert len(ids) == len(set(ids))
        if method == "pomodoro.start":
            probe.call(f"stop{round_}", "conv", "pomodoro.interrupt", {})
    invariants.check(probe)


@pytest.mark.store
def test_F04_conflicting_or_invalid_params_write_nothing(probe: Runtime) -> None:
    ready(probe)
    probe.call("c1", "conv", "probe.append", {"item": "a"})
    before = probe.store_dump()
    assert probe.call("c1", "conv", "probe.append", {"item": "b"})["error"]["code"] == (
        "call_id_conflict"
    )
    assert probe.call("c1", "elsewhere", "probe.append", {"item": "a"})["error"]["code"] == (
        "call_id_conflict"
    )
    assert probe.call("c1", "conv", "probe.echo", {"text": "a"})["error"]["code"] == (
        "call_id_conflict"
    )
    bad = probe.call("c2", "conv", "probe.append", {"item": 3})
    assert bad["error"]["code"] == "invalid_params"
    assert probe.call("c3", "conv", "probe.nope", {})["error"]["code"] == "unknown_method"
    invariants.assert_unchanged(before, probe.store_dump())
    # a rejected call_id was never stored, so it can be used again
    assert probe.call("c2", "conv", "probe.append", {"item": "c"})["result"] == 2
    invariants.check(probe)


# -- F21: the COMMIT itself fails ---------------------------------------------------------
@pytest.mark.store
def test_F21_failed_commit_rolls_back_every_kind_of_transaction(pomo: Runtime, clock: Any) -> None:
    rt = pomo
    start = lambda: rt.call("s1", "c1", "pomodoro.start", {"minutes": 5})  # noqa: E731
    confirm = lambda: host_event(rt, "foreground_confirmed", "c1", "pomodoro")  # noqa: E731
    stop = lambda: rt.call("i1", "c1", "pomodoro.interrupt", {})  # noqa: E731
    steps: list[tuple[Callable[[], object], Callable[[], object]]] = [
        (start, start),  # accept
        (confirm, confirm),  # ready + started
        (lambda: clock.advance(5 * 60_000), lambda: clock.advance(0)),  # the deadline
        (stop, stop),  # answered at once
    ]
    for step, retry in steps:
        rt.settle()
        before = rt.store_dump()
        faults.arm("commit.after_write")
        with pytest.raises(FaultInjected):
            step()
        rt.settle()
        after = rt.store_dump()
        after["meta"] = before["meta"]  # the virtual clock's time is persisted on its own
        invariants.assert_unchanged(before, after)
        invariants.check(rt)
        retry()  # the retry converges
        invariants.check(rt)
    assert final(rt, "s1")["result"]["status"] == "completed"
    assert len(rt.im_records("c1")) == 1
    assert final(rt, "i1")["result"] == {"status": "nothing_running"}


def test_F21_disk_full_at_commit(sqlite_env: Env) -> None:
    env = sqlite_env  # SQLite's page limit (PostgreSQL's: test_pg_disk_full.py)
    with env.open() as rt:
        rt.call("w", "c1", "probe.echo", {"text": "up"})
        rt.settle()
        rt.settle()
        db = engine_of(rt).store.db
        rt._call_sync(lambda: db.execute("PRAGMA wal_checkpoint(TRUNCATE)"))
        pages = rt._call_sync(lambda: db.execute("PRAGMA page_count").fetchone()[0])
        rt._call_sync(lambda: db.execute(f"PRAGMA max_page_count={pages}"))
        before = rt.store_dump()
        big = {"text": "x" * 200_000}  # needs new pages: the database is full
        with pytest.raises(LineupError, match="full") as exc:
            rt.call("big", "c1", "probe.echo", big)
        assert exc.value.code == "store_unavailable"
        rt.settle()
        invariants.assert_unchanged(before, rt.store_dump())
        invariants.check(rt)
        rt._call_sync(lambda: db.execute("PRAGMA max_page_count=1073741823"))
        assert rt.call("big", "c1", "probe.echo", big)["result"] == big["text"]
        invariants.check(rt)


def test_F21_busy_database_at_begin(sqlite_env: Env) -> None:
    env = sqlite_env  # SQLite's file lock (PostgreSQL's lock timeout: test_postgres_store.py)
    with env.open() as rt:
        rt.call("s0", "c0", "pomodoro.start", {})
        rt.settle()
        rt._call_sync(lambda: engine_of(rt).store.db.execute("PRAGMA busy_timeout=50"))
        other = sqlite3.connect(env.db)
        other.execute("BEGIN IMMEDIATE")  # another writer holds the database
        before = rt.store_dump()
        with pytest.raises(LineupError, match="locked") as exc:
            rt.call("s1", "c1", "pomodoro.start", {})
        assert exc.value.code == "store_unavailable"
        invariants.assert_unchanged(before, rt.store_dump())
        other.rollback()
        other.close()
        assert rt.call("s1", "c1", "pomodoro.start", {})["stage"] == "accepted"
        rt.settle()
        invariants.check(rt)


# -- F24 ----------------------------------------------------------------------------------
@pytest.mark.store
def test_F24_a_second_runtime_on_the_same_database_is_refused(env: Env) -> None:
    with env.open():
        with pytest.raises(LineupError) as err:
            env.open()
        assert err.value.code == "runtime_locked"
    held: dict[str, Any] = {}

    def on_line(line: dict[str, Any]) -> bool:
        if line.get("kind") != "block":
            return False
        with pytest.raises(LineupError) as exc:  # another process holds it
            env.open()
        held["code"] = exc.value.code
        return True  # kill -9 it

    run = env.drive(
        [{"call": ["s1", "c1", "pomodoro.start", {}]}, {"block": True}], on_line=on_line
    )
    assert held["code"] == "runtime_locked"
    assert run.returncode == -9
    with env.open() as rt:  # kill -9 released the lock
        assert stages(rt, "s1") == ["accepted"]
        invariants.check(rt, host_down=True)
