"""Group commit (issue 12, RUNTIME-NOTES "Group commit"): decisions ready in one loop turn
share one transaction, each in its own savepoint; a lost race is dropped without undoing
the others; a failed COMMIT leaves the whole batch unapplied; nothing is sent before the
commit that records it."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from lineup_build.trust import TrustStore
from lineup_runtime_lite import AsyncRuntime, Runtime
from lineup_runtime_lite.core.decisions import Decision, NewIntent, SupersedeIntents
from lineup_runtime_lite.core.messages import AgentMessage
from lineup_runtime_lite.drivers.commit import MAX_BATCH, GroupCommit
from lineup_runtime_lite.internals import engine_of
from lineup_runtime_lite.store import LostRace, Store, faults
from lineup_runtime_lite.store.facts import Facts
from lineup_sdk.errors import LineupError
from tests.runtime.conftest import ready


@pytest.fixture()
def rt(store_rt: Runtime) -> Runtime:
    """This module's runtimes (`rt`, `probe`, `pomo`) run on the chosen store engine."""
    return store_rt


@pytest.fixture(autouse=True)
def _disarm() -> Any:
    yield
    faults.disarm()


def _intent(n: int) -> NewIntent:
    return NewIntent(f"k{n}", {"n": n}, f"inst{n}")


def _writes(n: int) -> Any:
    def step(tx: Facts) -> int:
        tx.apply(_intent(n))
        return n

    return step


def _intents(store: Store) -> list[str]:
    return sorted(r[1] for r in store.dump()["host_intents"])


def test_steps_of_one_loop_turn_share_one_commit(tmp_path: Path) -> None:
    store = Store(tmp_path / "rt.db")
    try:

        async def go() -> list[Any]:
            gc = GroupCommit(store)
            return await asyncio.gather(*(gc.submit(_writes(n)) for n in range(20)))

        before = store.commits
        assert asyncio.run(go()) == list(range(20))
        assert store.commits - before == 1  # one COMMIT (one fsync) for twenty decisions
        assert _intents(store) == sorted(f"k{n}" for n in range(20))
    finally:
        store.close()


def test_a_batch_is_bounded(tmp_path: Path) -> None:
    store = Store(":memory:")
    try:

        async def go() -> GroupCommit:
            gc = GroupCommit(store)
            await asyncio.gather(*(gc.submit(_writes(n)) for n in range(MAX_BATCH + 10)))
            return gc

        gc = asyncio.run(go())
        assert gc.batches == 2 and gc.steps == MAX_BATCH + 10
    finally:
        store.close()


def test_a_lost_race_is_dropped_without_undoing_the_others() -> None:
    store = Store(":memory:")
    try:

        def loser(tx: Facts) -> None:
            tx.apply(_intent(99))  # written first, then rolled back to its savepoint
            raise LostRace()

        def refused(tx: Facts) -> None:
            tx.apply(_intent(98))
            raise LineupError("session_data_revision_conflict", "at revision 2, not 1")

        async def go() -> list[Any]:
            gc = GroupCommit(store)
            futures = [gc.submit(_writes(1)), gc.submit(loser), gc.submit(refused)]
            futures.append(gc.submit(_writes(2)))
            return await asyncio.gather(*futures, return_exceptions=True)

        out = asyncio.run(go())
        assert out[0] == 1 and out[3] == 2
        assert isinstance(out[1], LostRace)
        assert isinstance(out[2], LineupError)
        assert out[2].code == "session_data_revision_conflict"
        assert _intents(store) == ["k1", "k2"]  # neither the loser's nor the refused write
    finally:
        store.close()


def test_a_batch_takes_savepoints_only_when_a_step_raises() -> None:
    """As on PostgreSQL: a batch whose steps all decide runs without a savepoint per step
    (two statements each); one that raises sends the batch again, carefully, and each
    step decides again on the same facts."""
    store = Store(":memory:")
    said: list[str] = []
    store.db.set_trace_callback(said.append)
    runs: list[str] = []
    try:

        def counted(n: int, *, lose: bool = False) -> Any:
            def step(tx: Facts) -> int:
                runs.append(f"s{n}")
                tx.apply(_intent(n))
                if lose:
                    raise LostRace()
                return n

            return step

        async def go(*steps: Any) -> list[Any]:
            gc = GroupCommit(store)
            return await asyncio.gather(*(gc.submit(s) for s in steps), return_exceptions=True)

        assert asyncio.run(go(counted(1), counted(2), counted(3))) == [1, 2, 3]
        assert not [s for s in said if "SAVEPOINT" in s], said
        assert runs == ["s1", "s2", "s3"]
        said.clear()
        runs.clear()
        out = asyncio.run(go(counted(4), counted(5, lose=True), counted(6)))
        assert out[0] == 4 and isinstance(out[1], LostRace) and out[2] == 6
        assert runs == ["s4", "s5", "s4", "s5", "s6"]  # the first run stopped at s5
        assert len([s for s in said if s.startswith("SAVEPOINT")]) == 3
        assert _intents(store) == ["k1", "k2", "k3", "k4", "k6"]
    finally:
        store.close()


def test_a_single_step_that_loses_writes_nothing() -> None:
    store = Store(":memory:")
    try:

        def loser(tx: Facts) -> None:
            tx.apply(_intent(7))
            raise LostRace()

        [out] = store.batch([loser])
        assert isinstance(out, LostRace)
        assert _intents(store) == []
    finally:
        store.close()


@pytest.mark.parametrize("mode", ["full", "ioerror"])
def test_a_failed_commit_leaves_the_whole_batch_unapplied(tmp_path: Path, mode: str) -> None:
    store = Store(tmp_path / "rt.db")
    try:
        before = store.dump()

        async def go() -> list[Any]:
            gc = GroupCommit(store)
            faults.arm("commit.after_write", mode)
            futures = [gc.submit(_writes(n)) for n in range(5)]
            return await asyncio.gather(*futures, return_exceptions=True)

        out = asyncio.run(go())
        assert all(isinstance(e, LineupError) and e.code == "store_unavailable" for e in out)
        assert store.dump() == before  # nothing of any decision was kept
        assert store.batch([_writes(1)]) == [1]  # and the next batch commits
    finally:
        store.close()


@pytest.mark.parametrize("off_loop", [False, True], ids=["on-loop", "store-thread"])
def test_steps_queued_at_or_submitted_after_the_close_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, off_loop: bool
) -> None:
    """A runtime stopping (a clean close, or a node that lost its lease and registers
    again) refuses the steps it has not written: `store_unavailable`, nothing kept — never
    the store thread's `RuntimeError` nor a step left waiting for good."""
    store = Store(tmp_path / "rt.db")
    monkeypatch.setattr(store, "off_loop", off_loop)  # the PostgreSQL store's batch thread
    try:
        before = store.dump()

        async def go() -> list[BaseException | None]:
            gc = GroupCommit(store)
            queued = gc.submit(_writes(1))  # its flush is due in the next loop turn
            gc.close()
            later = gc.submit(_writes(2))
            futures = [queued._fut, later._fut]
            for _ in range(3):  # a few loop turns: each is answered, none waits for good
                await asyncio.sleep(0)
            assert all(f.done() for f in futures)
            return [f.exception() for f in futures]

        out = asyncio.run(go())
        assert [e.code for e in out if isinstance(e, LineupError)] == ["store_unavailable"] * 2
        assert store.dump() == before
    finally:
        store.close()


def test_guards_make_a_stale_decision_lose(tmp_path: Path) -> None:
    """A decision computed from facts read before another one committed loses its race."""
    store = Store(":memory:")
    try:
        store.batch([_writes(1)])
        stale = Decision((SupersedeIntents("inst1"),))
        assert store.batch([lambda tx: [tx.apply(c) for c in stale.changes]]) == [[None]]  # type: ignore[func-returns-value]
        from lineup_runtime_lite.core.decisions import ActivationUpdate

        [lost] = store.batch([lambda tx: tx.apply(ActivationUpdate("nope", state="ready"))])
        assert isinstance(lost, LostRace)  # no starting activation `nope`: guard found no row
    finally:
        store.close()


def test_concurrent_calls_of_many_sessions_share_commits(
    trust: TrustStore, probe_bundle: Path, tmp_path: Path
) -> None:
    async def go() -> tuple[int, int, list[AgentMessage]]:
        art = await AsyncRuntime.open(tmp_path / "rt.db", trust=trust)
        try:
            await art.install(probe_bundle)
            for c in range(10):
                await art.call(f"w{c}", f"c{c}", "probe.echo", {"text": "up"})
                await art.settle()
            gc = engine_of(art).commits
            batches, steps = gc.batches, gc.steps
            msgs = await asyncio.gather(
                *(art.call(f"x{c}", f"c{c}", "probe.echo", {"text": str(c)}) for c in range(10))
            )
            return gc.batches - batches, gc.steps - steps, msgs
        finally:
            await art.close()

    batches, steps, msgs = asyncio.run(go())
    assert [m["result"] for m in msgs] == [str(c) for c in range(10)]
    assert steps == 20  # two decisions per call: `delivered`, then its result
    assert batches <= 6, (batches, steps)  # not one commit per decision


@pytest.mark.store
def test_nothing_is_sent_before_the_commit_that_records_it(probe: Runtime) -> None:
    """The acceptance commit fails: the handler never ran (its session data is unchanged),
    and the same call later runs exactly once."""
    ready(probe)
    before = probe.surface("conv", "probe").get()
    faults.arm("commit.after_write", "full")
    with pytest.raises(LineupError) as exc:
        probe.call("a1", "conv", "probe.append", {"item": "x"})
    assert exc.value.code == "store_unavailable"
    probe.settle()
    assert probe.surface("conv", "probe").get() == before  # not delivered
    assert probe.call_record("a1") is None
    assert probe.call("a1", "conv", "probe.append", {"item": "x"})["result"] == (
        before.revision + 1
    )
    assert probe.surface("conv", "probe").get().data == {"items": ["x"]}


@pytest.mark.store
def test_a_call_whose_decision_lost_a_race_decides_again(
    probe: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The acceptance lost its race once (a guard found no row): it is decided again on
    fresh facts, and the call runs once."""
    ready(probe)
    facts = type(engine_of(probe).facts)
    real_apply = facts.apply
    lost: list[object] = []

    def flaky(self: Any, change: Any) -> None:
        from lineup_runtime_lite.core.decisions import NewCall

        if isinstance(change, NewCall) and change.call_id == "a1" and not lost:
            lost.append(change)
            raise LostRace()
        real_apply(self, change)

    monkeypatch.setattr(facts, "apply", flaky)
    msg = probe.call("a1", "conv", "probe.append", {"item": "x"})
    assert lost and msg["result"] == 1
    assert probe.surface("conv", "probe").get().data == {"items": ["x"]}
    monkeypatch.undo()
    assert probe.call("a1", "conv", "probe.append", {"item": "x"}) == msg  # stored once


def test_a_call_has_one_final_whichever_stage() -> None:
    """A late `result` after `delivery_interrupted` (or a timeout) loses: one final."""
    from lineup_runtime_lite.core.decisions import NewCall, NewReceipt
    from lineup_runtime_lite.core.messages import make_message

    store = Store(":memory:")
    try:
        row = NewCall("a1", "fp", "c1", "notes", "notes.add", "{}", None, None, None, "queued", 0)
        error = make_message(
            "a1",
            "notes",
            "error",
            0,
            error={"code": "delivery_interrupted", "message": "interrupted"},
        )
        late = make_message("a1", "notes", "result", 1, result=1)
        both = [lambda tx: (tx.apply(row), tx.apply(NewReceipt(error)))]
        assert store.batch(both) == [(None, None)]
        [lost] = store.batch([lambda tx: tx.apply(NewReceipt(late))])
        assert isinstance(lost, LostRace)
        assert [m["stage"] for m in store.facts.messages("a1")] == ["error"]
    finally:
        store.close()


def test_a_lone_decision_commits_without_waiting_a_loop_turn() -> None:
    """Nothing else is ready in this loop turn, so nothing could join the batch: awaiting
    the step commits it at once (the awaiting coroutine does not yield)."""
    store = Store(":memory:")
    try:

        async def go() -> tuple[int, int]:
            gc = GroupCommit(store)
            ticket = gc.submit(_writes(1))
            gen = ticket.__await__()
            try:
                next(gen)
            except StopIteration as stop:
                return stop.value, gc.batches
            raise AssertionError("the lone step waited for a loop turn")

        assert asyncio.run(go()) == (1, 1)

        async def busy() -> list[str]:
            gc = GroupCommit(store)
            order: list[str] = []
            asyncio.get_running_loop().call_soon(lambda: order.append("other"))

            def step(tx: Facts) -> None:
                order.append("commit")

            await gc.submit(step)  # it waits: what is ready might still join the batch
            return order

        assert asyncio.run(busy()) == ["other", "commit"]
    finally:
        store.close()


@pytest.mark.store
def test_calls_of_one_session_in_one_batch_are_delivered_one_at_a_time(probe: Runtime) -> None:
    """Two calls for the same ready session accepted in one group commit: the first is sent
    at once, the second waits for it (per-session serial delivery), so both read-modify-
    write the session data without a revision conflict."""
    ready(probe)
    base = probe.surface("conv", "probe").get().revision
    msgs = probe.call_many(
        [
            ("a1", "conv", "probe.append", {"item": "x"}),
            ("a2", "conv", "probe.append", {"item": "y"}),
        ]
    )
    probe.settle()
    finals = [probe.call_record(c) for c in ("a1", "a2")]
    assert [m["kind"] for m in msgs] in (["result", "result"], ["result", "receipt"])
    results = [r["messages"][-1] for r in finals if r is not None]
    assert [m.get("result") for m in results] == [base + 1, base + 2], results
    assert probe.surface("conv", "probe").get().data == {"items": ["x", "y"]}


def test_a_files_batch_commits_on_the_store_thread_and_nothing_is_seen_before(
    tmp_path: Path,
) -> None:
    """SQLite as PostgreSQL (issue 36): a file's group commit runs on the store thread, so
    the loop goes on (and gathers the next batch) while one commits; the step reads its own
    writes, the loop's reads see committed facts only, and the step's ticket resolves only
    once its COMMIT has returned."""
    store = Store(tmp_path / "rt.db")
    inside, release = threading.Event(), threading.Event()
    seen: dict[str, Any] = {}

    def slow(tx: Facts) -> int:
        if threading.get_ident() == seen["loop"]:
            inside.set()
            raise AssertionError("the batch ran on the event loop's thread")
        tx.apply(_intent(1))
        seen["own"] = [i.instance for i in tx.intent_heads()]
        inside.set()
        if not release.wait(30):
            raise AssertionError("never released")
        return 1

    async def go() -> int:
        seen["loop"] = threading.get_ident()
        gc = GroupCommit(store)
        commits = store.commits
        try:
            first = asyncio.ensure_future(_await(gc.submit(slow)))
            await asyncio.to_thread(inside.wait, 30)  # the transaction is open, not committed
            assert "own" in seen, seen
            assert seen["own"] == ["inst1"]  # the step reads what it wrote
            assert store.facts.intent_heads() == []  # the loop sees committed facts only
            assert store.commits == commits and not first.done()
            second = gc.submit(_writes(2))  # gathers while the first batch commits
            release.set()
            assert await first == 1
            assert store.commits == commits + 1
            assert [i.instance for i in store.facts.intent_heads()] == ["inst1"]
            assert await second == 2
            return gc.batches
        finally:
            release.set()
            gc.close()

    try:
        assert asyncio.run(go()) == 2
        assert _intents(store) == ["k1", "k2"]
    finally:
        store.close()


async def _await(ticket: Any) -> Any:
    return await ticket


def test_on_a_file_runtime_nothing_is_sent_before_the_commit_that_records_it(
    trust: TrustStore, probe_bundle: Path, tmp_path: Path
) -> None:
    """The `delivered` commit fails on the store thread: the handler never runs (its
    session data is unchanged), and the call ends once, answered from the facts."""
    with Runtime.open(tmp_path / "rt.db", trust=trust) as rt:
        assert engine_of(rt).store.off_loop
        rt.install(probe_bundle)
        ready(rt)
        before = rt.surface("conv", "probe").get()
        faults.arm("commit.after_write", "full")
        with pytest.raises(LineupError) as exc:
            rt.call("a1", "conv", "probe.append", {"item": "x"})
        assert exc.value.code == "store_unavailable"
        rt.settle()
        assert rt.surface("conv", "probe").get() == before  # not delivered
        assert rt.call_record("a1") is None
        again = rt.call("a1", "conv", "probe.append", {"item": "x"})
        assert again["result"] == before.revision + 1
        assert rt.surface("conv", "probe").get().data == {"items": ["x"]}


def test_a_step_on_the_store_thread_may_ask_about_session_workers(
    trust: TrustStore, probe_bundle: Path, tmp_path: Path
) -> None:
    """Accepting a call asks whether its session's worker is idle (to send it right after
    the COMMIT); on a file that step runs on the store thread, where no event loop runs,
    so the worker pool's bookkeeping must not need one (`isolation="session"`)."""
    with Runtime.open(tmp_path / "rt.db", trust=trust, isolation="session") as rt:
        rt.install(probe_bundle)
        ready(rt)
        assert rt.call("e1", "conv", "probe.echo", {"text": "x"})["result"] == "x"
        many = rt.call_many([(f"m{i}", "conv", "probe.echo", {"text": str(i)}) for i in range(3)])
        assert [m["stage"] for m in many] == ["result"] * 3 or all("stage" in m for m in many)
