"""UI Actions and one ordered, idempotent queue per App session (SPEC 17), through the
Python API: `Surface.act` beside Agent calls, on the `queue` test app (its tools and
actions append to one list)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lineup_build.signing import SigningKey
from lineup_runtime_lite import Runtime
from lineup_runtime_lite.internals import engine_of
from lineup_sdk.errors import LineupError
from tests.faults import invariants
from tests.runtime.api.ui_actions_kit import _serial_order, items, q, queue_bundle, start
from tests.runtime.conftest import APPS, build_app


@pytest.fixture()
def rt(store_rt: Runtime) -> Runtime:
    """This module's runtimes (`rt`, `probe`, `pomo`) run on the chosen store engine."""
    return store_rt


__all__ = ["q", "queue_bundle"]


def code(call: Any) -> str:
    with pytest.raises(LineupError) as exc:
        call()
    return exc.value.code


@pytest.mark.store
def test_an_action_is_applied_and_answers_its_outcome_with_the_revision(q: Runtime) -> None:
    start(q)
    s = q.surface("conv", "queue")
    out = s.act("queue.push", {"item": "a"}, client_id="c1", seq=1)
    assert out == {
        "action_id": "c1:1",
        "result": {"count": 1, "action_id": "c1:1", "client_id": "c1"},
        "revision": 1,
    }
    assert s.get().revision == 1 and items(q) == ["a"]
    # an action that writes nothing carries the current revision
    assert s.act("queue.peek", {}, client_id="c1", seq=2) == {
        "action_id": "c1:2",
        "result": 1,
        "revision": 1,
    }
    # not an Agent call: no outbox item, no call record
    assert all("c1:" not in m["id"] for m in q.outbox.all())


@pytest.mark.store
def test_an_outcome_always_carries_an_integer_revision_0_before_any_data(q: Runtime) -> None:
    """`ActionOutcome.revision` is an `int`, never None: an outcome that is answered (not
    raised) carries the session data's revision after it, 0 while nothing is stored."""
    start(q)  # an Agent call that writes nothing
    s = q.surface("conv", "queue")
    first = s.act("queue.peek", {}, client_id="c1", seq=1)
    after: int = first["revision"] + 1  # typed `int`: no None to rule out first
    assert first == {"action_id": "c1:1", "result": 0, "revision": 0}
    assert type(first["revision"]) is int
    assert s.act("queue.peek", {}, client_id="c1", seq=1) == first  # the stored replay too
    pushed = s.act("queue.push", {"item": "a"}, client_id="c1", seq=2)
    assert pushed["revision"] == after == s.get().revision


# -- idempotency and order per client --------------------------------------------------------
@pytest.mark.store
def test_a_replayed_seq_answers_the_stored_outcome_and_appends_nothing(q: Runtime) -> None:
    start(q)
    s = q.surface("conv", "queue")
    first = s.act("queue.push", {"item": "a"}, client_id="c1", seq=1)
    again = s.act("queue.push", {"item": "a"}, client_id="c1", seq=1)
    assert again == first
    assert items(q) == ["a"] and s.get().revision == 1
    # another client numbers from 1 too: its own mark
    assert s.act("queue.push", {"item": "b"}, client_id="c2", seq=1)["revision"] == 2
    assert items(q) == ["a", "b"]


@pytest.mark.store
def test_a_replayed_error_outcome_is_raised_again(q: Runtime) -> None:
    start(q)
    s = q.surface("conv", "queue")
    assert code(lambda: s.act("queue.refuse", {"item": "x"}, client_id="c", seq=1)) == (
        "app.refused"
    )
    assert code(lambda: s.act("queue.refuse", {"item": "x"}, client_id="c", seq=1)) == (
        "app.refused"
    )
    # the queue goes on
    assert s.act("queue.push", {"item": "y"}, client_id="c", seq=2)["result"]["count"] == 1


@pytest.mark.store
def test_a_seq_reused_with_other_params_or_name_is_a_conflict(q: Runtime) -> None:
    start(q)
    s = q.surface("conv", "queue")
    s.act("queue.push", {"item": "a"}, client_id="c1", seq=1)
    assert code(lambda: s.act("queue.push", {"item": "b"}, client_id="c1", seq=1)) == (
        "action_id_conflict"
    )
    assert code(lambda: s.act("queue.peek", {}, client_id="c1", seq=1)) == "action_id_conflict"
    assert items(q) == ["a"]
    assert s.act("queue.push", {"item": "c"}, client_id="c1", seq=2)["action_id"] == "c1:2"


@pytest.mark.store
def test_a_skipped_seq_is_out_of_order_and_uses_no_seq(q: Runtime) -> None:
    start(q)
    s = q.surface("conv", "queue")
    with pytest.raises(LineupError) as exc:
        s.act("queue.push", {"item": "a"}, client_id="c1", seq=2)
    assert exc.value.code == "action_out_of_order"
    assert exc.value.details == {"expected_seq": 1}
    dump = engine_of(q).store.dump()
    assert dump["ui_actions"] == [] and dump["ui_action_clients"] == []
    s.act("queue.push", {"item": "a"}, client_id="c1", seq=1)
    assert code(lambda: s.act("queue.push", {"item": "b"}, client_id="c1", seq=3)) == (
        "action_out_of_order"
    )
    second = s.act("queue.push", {"item": "b"}, client_id="c1", seq=2)
    assert second["revision"] == 2
    # the mark moved on: seq 2 again is a replay, seq 3 the next
    assert s.act("queue.push", {"item": "b"}, client_id="c1", seq=2) == second
    assert s.act("queue.peek", {}, client_id="c1", seq=3)["result"] == 2
    assert items(q) == ["a", "b"]
    invariants.check(q)


def _nothing_persisted(rt: Runtime, before: dict[str, Any]) -> None:
    after = engine_of(rt).store.dump()
    assert after == before


@pytest.mark.store
def test_rejections_before_acceptance_persist_nothing_and_use_no_seq(q: Runtime) -> None:
    start(q)
    s = q.surface("conv", "queue")
    before = engine_of(q).store.dump()
    assert code(lambda: s.act("queue.nope", {}, client_id="c", seq=1)) == "unknown_action"
    # an Agent tool's name is not an action
    assert code(lambda: s.act("queue.add", {"item": "a"}, client_id="c", seq=1)) == (
        "unknown_action"
    )
    with pytest.raises(LineupError) as exc:
        s.act("queue.push", {"item": 5}, client_id="c", seq=1)
    assert exc.value.code == "invalid_params"
    assert exc.value.details[0]["path"] == "/item"
    assert code(lambda: s.act("queue.push", {}, client_id="c", seq=1)) == "invalid_params"
    assert code(lambda: s.act("queue.push", {"item": "a", "x": 1}, client_id="c", seq=1)) == (
        "invalid_params"
    )
    assert code(lambda: s.act("queue.push", {"item": float("nan")}, client_id="c", seq=1)) == (
        "invalid_params"
    )
    bad: list[tuple[Any, Any]] = [
        ("", 1),
        ("x" * 65, 1),
        ("a b", 1),
        ("é", 1),
        (7, 1),
        ("c", 0),
        ("c", -1),
        ("c", 2**53),
        ("c", True),
        ("c", 1.0),
        ("c", "1"),
    ]
    for client, seq in bad:
        with pytest.raises(LineupError) as exc:
            s.act("queue.push", {"item": "a"}, client_id=client, seq=seq)
        assert exc.value.code == "invalid_params", (client, seq)
    _nothing_persisted(q, before)
    # the limits themselves are allowed
    top = s.act("queue.push", {"item": "a"}, client_id="A-z_9" * 12 + "abcd", seq=1)
    assert top["action_id"] == "A-z_9" * 12 + "abcd:1"


@pytest.mark.store
def test_the_largest_seq_is_accepted_as_the_next_of_its_client(q: Runtime) -> None:
    start(q)
    s = q.surface("conv", "queue")
    assert code(lambda: s.act("queue.peek", {}, client_id="c", seq=2**53 - 1)) == (
        "action_out_of_order"
    )


@pytest.mark.store
def test_an_action_never_starts_an_app(q: Runtime) -> None:
    before = engine_of(q).store.dump()
    s = q.surface("conv", "queue")
    assert code(lambda: s.act("queue.push", {"item": "a"}, client_id="c", seq=1)) == (
        "app_not_running"
    )
    assert code(lambda: s.act("queue.nope", {}, client_id="c", seq=1)) == "unknown_action"
    q.settle()
    _nothing_persisted(q, before)
    assert engine_of(q).workers == {}


@pytest.mark.store
def test_an_action_after_the_activation_failed_is_app_not_running(q: Runtime) -> None:
    assert q.call("o1", "conv", "queue.open", {})["activation"] == "starting"
    assert q.host.event("activation_failed", conversation="conv", scope="queue")
    q.settle()
    s = q.surface("conv", "queue")
    assert code(lambda: s.act("queue.push", {"item": "a"}, client_id="c", seq=1)) == (
        "app_not_running"
    )
    assert engine_of(q).store.dump()["ui_actions"] == []


# -- while the activation starts ---------------------------------------------------------------
@pytest.mark.store
def test_an_action_waits_for_a_starting_activation_then_runs_in_arrival_order(
    q: Runtime,
) -> None:
    assert q.call("o1", "conv", "queue.open", {})["activation"] == "starting"
    s = q.surface("conv", "queue")
    # queued behind the starting activation: the wait runs out, the action stays queued
    assert code(lambda: s.act("queue.push", {"item": "a"}, client_id="c", seq=1, timeout=0)) == (
        "action_pending"
    )
    assert q.call("a2", "conv", "queue.add", {"item": "b"})["activation"] == "queued"
    q.settle()
    assert items(q) == []  # nothing runs before the Host confirms the foreground
    assert q.host.event("foreground_confirmed", conversation="conv", scope="queue")
    q.settle()
    assert items(q) == ["a", "b"]
    # a repeat of the same (client_id, seq) answers the outcome
    out = s.act("queue.push", {"item": "a"}, client_id="c", seq=1)
    assert out["revision"] == 1 and out["result"]["count"] == 1
    assert q.call("a2", "conv", "queue.add", {"item": "b"})["result"] == 2


@pytest.mark.store
def test_an_action_waiting_on_an_activation_fails_with_it(q: Runtime) -> None:
    assert q.call("o1", "conv", "queue.open", {})["activation"] == "starting"
    s = q.surface("conv", "queue")
    assert code(lambda: s.act("queue.push", {"item": "a"}, client_id="c", seq=1, timeout=0)) == (
        "action_pending"
    )
    assert q.host.event("user_left", conversation="conv", scope="queue")
    q.settle()
    with pytest.raises(LineupError) as exc:
        s.act("queue.push", {"item": "a"}, client_id="c", seq=1)
    assert exc.value.code == "activation_cancelled"
    assert exc.value.details == {"reason": "user_left"}
    assert items(q) == []


@pytest.mark.store
def test_a_timeout_failure_of_the_activation_fails_the_action(q: Runtime, clock: Any) -> None:
    assert q.call("o1", "conv", "queue.open", {})["activation"] == "starting"
    s = q.surface("conv", "queue")
    assert code(lambda: s.act("queue.push", {"item": "a"}, client_id="c", seq=1, timeout=0)) == (
        "action_pending"
    )
    clock.advance(61_000)
    q.settle()
    with pytest.raises(LineupError) as exc:
        s.act("queue.push", {"item": "a"}, client_id="c", seq=1)
    assert exc.value.code == "activation_failed"
    assert exc.value.details["reason"] == "timeout"
    # the session's latest activation failed: a new action is not running
    assert code(lambda: s.act("queue.peek", {}, client_id="c", seq=2)) == "app_not_running"


# -- outcomes ------------------------------------------------------------------------------------
@pytest.mark.store
def test_a_business_refusal_after_a_replace_leaves_nothing_and_the_queue_moves(
    q: Runtime,
) -> None:
    start(q)
    s = q.surface("conv", "queue")
    frames: list[tuple[str, int]] = []
    off = s.subscribe(lambda kind, snap: frames.append((kind, snap.revision)))
    s.act("queue.push", {"item": "a"}, client_id="c", seq=1)
    with pytest.raises(LineupError) as exc:
        s.act("queue.refuse", {"item": "x"}, client_id="c", seq=2)
    assert exc.value.code == "app.refused"
    assert exc.value.message == "not x"
    assert items(q) == ["a"] and s.get().revision == 1
    assert s.act("queue.push", {"item": "b"}, client_id="c", seq=3)["revision"] == 2
    q.settle()
    off()
    assert frames == [
        ("session_data.snapshot", 0),
        ("session_data.changed", 1),
        ("session_data.changed", 2),
    ]


@pytest.mark.store
def test_handler_timeout_and_an_invalid_result_are_recorded_outcomes(q: Runtime) -> None:
    start(q)
    s = q.surface("conv", "queue")
    assert code(lambda: s.act("queue.bad", {}, client_id="c", seq=1)) == "handler_result_invalid"
    assert code(lambda: s.act("queue.hang", {}, client_id="c", seq=2)) == "handler_timeout"
    assert code(lambda: s.act("queue.hang", {}, client_id="c", seq=2)) == "handler_timeout"
    assert s.act("queue.push", {"item": "a"}, client_id="c", seq=3)["revision"] == 1


def test_a_worker_lost_mid_action_applies_nothing_once(
    file_runtime: Any, queue_bundle: Path
) -> None:
    rt = file_runtime(queue_bundle)
    start(rt)
    s = rt.surface("conv", "queue")
    s.act("queue.push", {"item": "a"}, client_id="c", seq=1)
    with pytest.raises(LineupError) as exc:
        s.act("queue.crash", {"item": "x"}, client_id="c", seq=2)
    assert exc.value.code == "delivery_interrupted"
    rt.settle()
    assert items(rt) == ["a"] and s.get().revision == 1
    # at most once: the same id answers the same outcome, and runs nothing again
    assert code(lambda: s.act("queue.crash", {"item": "x"}, client_id="c", seq=2)) == (
        "delivery_interrupted"
    )
    # the queue goes on, on a new worker
    assert s.act("queue.push", {"item": "b"}, client_id="c", seq=3)["revision"] == 2
    assert items(rt) == ["a", "b"]
    invariants.check(rt)


def test_an_action_delivered_when_the_runtime_stopped_ends_interrupted_on_open(
    tmp_path: Path, trust_file: Path, queue_bundle: Path
) -> None:
    """Recovery sees actions as it sees calls: one left `delivered` by a runtime that was
    killed (the row as a kill -9 mid-delivery leaves it) ends `delivery_interrupted` on the
    next open, and is never delivered again."""
    import sqlite3

    from lineup_runtime_lite import HostSimulator, VirtualClock

    db = tmp_path / "rt.db"
    with Runtime.open(
        db, trust=trust_file, clock=VirtualClock(), host=HostSimulator("manual")
    ) as rt:
        rt.install(queue_bundle)
        start(rt)
        rt.surface("conv", "queue").act("queue.peek", {}, client_id="c", seq=1)
    con = sqlite3.connect(db)
    with con:
        con.execute(
            "UPDATE ui_actions SET state='delivered', outcome=NULL, revision=NULL, "
            "ended_ms=NULL WHERE client_id='c' AND client_seq=1"
        )
    con.close()
    with Runtime.open(
        db, trust=trust_file, clock=VirtualClock(), host=HostSimulator("manual")
    ) as rt:
        assert engine_of(rt).facts.delivered_actions() == []  # recovered on open
        s = rt.surface("conv", "queue")
        with pytest.raises(LineupError) as exc:
            s.act("queue.peek", {}, client_id="c", seq=1)
        assert exc.value.code == "delivery_interrupted"
        assert getattr(exc.value, "action_id", None) == "c:1"
        assert engine_of(rt).workers == {}  # never delivered again: no worker was needed
        invariants.check(rt)


def test_replay_of_an_applied_action_after_a_restart(
    tmp_path: Path, trust_file: Path, queue_bundle: Path
) -> None:
    from lineup_runtime_lite import HostSimulator, VirtualClock

    db = tmp_path / "rt.db"
    with Runtime.open(
        db, trust=trust_file, clock=VirtualClock(), host=HostSimulator("manual")
    ) as rt:
        rt.install(queue_bundle)
        start(rt)
        first = rt.surface("conv", "queue").act("queue.push", {"item": "a"}, client_id="c", seq=1)
    with Runtime.open(
        db, trust=trust_file, clock=VirtualClock(), host=HostSimulator("manual")
    ) as rt:
        s = rt.surface("conv", "queue")
        assert s.act("queue.push", {"item": "a"}, client_id="c", seq=1) == first
        assert code(lambda: s.act("queue.push", {"item": "b"}, client_id="c", seq=1)) == (
            "action_id_conflict"
        )
        assert code(lambda: s.act("queue.push", {"item": "b"}, client_id="c", seq=3)) == (
            "action_out_of_order"
        )
        assert items(rt) == ["a"]
        assert s.act("queue.push", {"item": "b"}, client_id="c", seq=2)["revision"] == 2
        assert items(rt) == ["a", "b"]


@pytest.mark.store
def test_replay_of_an_action_still_queued_waits_for_its_outcome(q: Runtime) -> None:
    assert q.call("o1", "conv", "queue.open", {})["activation"] == "starting"
    s = q.surface("conv", "queue")
    assert code(lambda: s.act("queue.push", {"item": "a"}, client_id="c", seq=1, timeout=0)) == (
        "action_pending"
    )
    # the repeat waits (it appends nothing): here its own wait runs out too
    assert code(lambda: s.act("queue.push", {"item": "a"}, client_id="c", seq=1, timeout=0)) == (
        "action_pending"
    )
    assert len(engine_of(q).store.dump()["ui_actions"]) == 1
    import threading

    answers: list[Any] = []
    waiter = threading.Thread(
        target=lambda: answers.append(s.act("queue.push", {"item": "a"}, client_id="c", seq=1))
    )
    waiter.start()
    assert q.host.event("foreground_confirmed", conversation="conv", scope="queue")
    waiter.join(30)
    assert answers and answers[0]["result"]["count"] == 1
    assert items(q) == ["a"]


# -- one queue: a call never overtakes an accepted action --------------------------------------
@pytest.mark.store
def test_a_call_never_takes_the_fast_path_past_an_accepted_action(
    q: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Staged as a node that accepted an action before its owner's pump heard of it: the
    action is committed, nothing in this process marks its session busy; the next call on
    the idle session must still queue behind it (the facts say an action is ahead)."""
    start(q)
    s = q.surface("conv", "queue")
    delivery = engine_of(q).delivery
    with monkeypatch.context() as m:
        m.setattr(delivery, "kick", lambda session_id: None)
        m.setattr(delivery, "will_kick", lambda session_ids: None)
        assert (
            code(lambda: s.act("queue.push", {"item": "action"}, client_id="c", seq=1, timeout=0))
            == "action_pending"
        )
    assert items(q) == []
    # the session is idle in this process, its worker up: only the facts hold the call back
    msg = q.call("a1", "conv", "queue.add", {"item": "call"})
    q.settle()
    assert items(q) == ["action", "call"], msg
    assert q.call("a1", "conv", "queue.add", {"item": "call"})["result"] == 2


@pytest.mark.store
def test_the_queue_head_is_the_lowest_seq_over_calls_and_actions(q: Runtime) -> None:
    assert q.call("o1", "conv", "queue.open", {})["activation"] == "starting"
    s = q.surface("conv", "queue")
    expected = []
    for n in range(6):
        if n % 2:
            assert q.call(f"k{n}", "conv", "queue.add", {"item": f"t{n}"})["stage"] == "accepted"
        else:
            assert (
                code(
                    lambda n=n: s.act(
                        "queue.push", {"item": f"u{n}"}, client_id="c", seq=n // 2 + 1, timeout=0
                    )
                )
                == "action_pending"
            )
        expected.append(f"t{n}" if n % 2 else f"u{n}")
    assert q.host.event("foreground_confirmed", conversation="conv", scope="queue")
    q.settle()
    assert items(q) == expected
    invariants.check(q)


@pytest.mark.store
def test_agent_and_ui_writers_from_many_threads_end_as_the_serial_application(
    q: Runtime,
) -> None:
    import random
    import threading

    seed = 37
    print("seed", seed)
    start(q)
    s = q.surface("conv", "queue")
    frames: list[tuple[str, int, int]] = []
    off = s.subscribe(
        lambda kind, snap: frames.append(
            (kind, snap.revision, len((snap.data or {}).get("items", [])))
        )
    )
    agents, clients, per = 3, 4, 40
    errors: list[BaseException] = []

    def agent(n: int) -> None:
        try:
            for k in range(per):
                msg = q.call(f"g{n}-{k}", "conv", "queue.add", {"item": f"g{n}-{k}"})
                assert msg["stage"] == "result", msg
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    def client(n: int) -> None:
        rng = random.Random(seed * 100 + n)
        try:
            for k in range(1, per + 1):
                out = s.act("queue.push", {"item": f"u{n}-{k}"}, client_id=f"u{n}", seq=k)
                assert out["action_id"] == f"u{n}:{k}"
                if rng.random() < 0.25:  # a resend: the stored outcome, nothing appended
                    again = s.act("queue.push", {"item": f"u{n}-{k}"}, client_id=f"u{n}", seq=k)
                    assert again == out
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=agent, args=(n,)) for n in range(agents)]
    threads += [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(120)
    q.settle()
    off()
    assert not errors, errors
    total = (agents + clients) * per
    got = items(q)
    assert len(got) == total and len(set(got)) == total  # nothing lost, nothing doubled
    session = engine_of(q).facts.session("conv", "queue")
    assert session is not None
    assert got == _serial_order(q, session.app_session_id)  # nothing reordered
    assert s.get().revision == total
    # one frame per committed change, revisions strictly increasing, each a whole write
    assert frames[0][0] == "session_data.snapshot"
    changed = frames[1:]
    assert [f[1] for f in changed] == list(range(frames[0][1] + 1, total + 1))
    assert all(kind == "session_data.changed" and count == rev for kind, rev, count in changed)
    invariants.check(q)
    held = engine_of(q).held()
    assert held["outcomes"] == 0 and held["pumps"] == 0  # nothing held once answered


# -- a dev rebuild ---------------------------------------------------------------------------
def test_a_dev_rebuild_that_drops_a_queued_action_records_its_outcome(tmp_path: Path) -> None:
    """A session moved to a build that no longer declares a queued action (or whose params
    no longer validate) gets `unknown_action` / `invalid_params` as its recorded outcome; the
    queue goes on with the new code."""
    import shutil

    from lineup_build.dev import build_with_dev_key
    from lineup_runtime_lite import HostSimulator, VirtualClock

    project = tmp_path / "queue"
    shutil.copytree(APPS / "queue", project)
    first = build_with_dev_key(project, out_dir=tmp_path / "b1")
    rt = Runtime.open(
        tmp_path / "rt.db", trust=first.trust, clock=VirtualClock(), host=HostSimulator("manual")
    )
    try:
        rt.install(first.bundle, dev_build=True)
        assert rt.call("o1", "conv", "queue.open", {})["activation"] == "starting"
        s = rt.surface("conv", "queue")
        for seq, (name, params) in enumerate(
            [
                ("queue.push", {"item": "a"}),
                ("queue.refuse", {"item": "x"}),
                ("queue.peek", {}),
            ],
            start=1,
        ):
            with pytest.raises(LineupError) as exc:
                s.act(name, params, client_id="c", seq=seq, timeout=0)
            assert exc.value.code == "action_pending"
        actions = project / "queue_app" / "actions.py"
        text = actions.read_text()
        text = text.replace('@actions.action("queue.push")', "")
        text = text.replace(
            "async def refuse(ctx: ActionContext, item: str)",
            "async def refuse(ctx: ActionContext, item: int)",
        )
        actions.write_text(text)
        second = build_with_dev_key(project, out_dir=tmp_path / "b2")
        rt.install(second.bundle, dev_build=True)
        assert rt.move_dev_sessions("queue") == 1
        assert rt.host.event("foreground_confirmed", conversation="conv", scope="queue")
        rt.settle()
        assert code(lambda: s.act("queue.push", {"item": "a"}, client_id="c", seq=1)) == (
            "unknown_action"
        )
        with pytest.raises(LineupError) as exc:
            s.act("queue.refuse", {"item": "x"}, client_id="c", seq=2)
        assert exc.value.code == "invalid_params"
        assert exc.value.details[0]["path"] == "/item"
        assert s.act("queue.peek", {}, client_id="c", seq=3)["result"] == 0
        assert items(rt) == []
        # and the new build refuses the dropped action before accepting it
        assert code(lambda: s.act("queue.push", {"item": "b"}, client_id="c", seq=4)) == (
            "unknown_action"
        )
    finally:
        rt.close()


def test_a_worker_serving_other_actions_than_the_manifest_is_a_method_mismatch(
    tmp_path: Path, rt_key: SigningKey, trust: Any
) -> None:
    """The handshake compares the worker's actions with the manifest's, apart from its
    tools (which match here)."""
    from lineup_runtime_lite import HostSimulator, VirtualClock

    bundle = build_app(APPS / "queue", tmp_path / "queue", rt_key, MISMATCH=True)
    with Runtime.open(
        ":memory:", trust=trust, clock=VirtualClock(), host=HostSimulator("manual")
    ) as rt:
        rt.install(bundle)
        rt.call("m", "conv", "queue.read", {})
        rt.settle()
        [err] = [m for m in rt.outbox.all() if m["id"] == "m:error"]
        assert err["error"]["code"] == "activation_failed"
        assert err["error"]["details"] == {"reason": "method_mismatch"}


def test_async_surface_act_answers_on_the_callers_loop(trust: Any, queue_bundle: Path) -> None:
    import asyncio

    from lineup_runtime_lite import AsyncRuntime, HostSimulator, VirtualClock

    async def main() -> list[Any]:
        async with await AsyncRuntime.open(
            ":memory:", trust=trust, clock=VirtualClock(), host=HostSimulator("manual")
        ) as art:
            await art.install(queue_bundle)
            await art.call("up", "conv", "queue.read", {})
            await art.settle()
            s = art.surface("conv", "queue")
            # several clients at once, on one loop: each applied once, in one order
            outs: list[Any] = await asyncio.gather(
                *(
                    s.act("queue.push", {"item": f"{c}-{k}"}, client_id=c, seq=k)
                    for k in (1, 2, 3)
                    for c in ("a", "b")
                )
            )
            try:
                await s.act("queue.push", {"item": "x"}, client_id="a", seq=9)
            except LineupError as exc:
                outs.append(exc.code)
            snap = await s.get()
            return [outs, snap.revision, sorted(snap.data["items"])]  # type: ignore[index]

    outs, revision, got = asyncio.run(main())
    assert sorted(o["revision"] for o in outs[:-1]) == list(range(1, 7))
    assert outs[-1] == "action_out_of_order"
    assert revision == 6 and got == sorted(f"{c}-{k}" for k in (1, 2, 3) for c in "ab")


@pytest.mark.store
def test_an_action_left_delivered_by_a_failed_step_ends_interrupted_and_the_queue_goes_on(
    q: Runtime,
) -> None:
    """A pump step that committed an action `delivered` and failed before sending it (a
    fault right before the send): at most once, so the pump's next step ends it
    `delivery_interrupted` — nothing applied — and delivers what is behind it."""
    from lineup_runtime_lite.store import faults

    start(q)
    s = q.surface("conv", "queue")
    faults.arm("deliver.before_send")
    try:
        with pytest.raises(LineupError) as exc:
            s.act("queue.push", {"item": "a"}, client_id="c", seq=1)
    finally:
        faults.disarm()
    assert exc.value.code == "delivery_interrupted"
    assert s.act("queue.push", {"item": "b"}, client_id="c", seq=2)["revision"] == 1
    assert items(q) == ["b"]
    invariants.check(q)
