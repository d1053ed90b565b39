"""Races on UI Actions (SPEC 17), staged deterministically, then repeated under load with
fixed seeds (printed): duplicate sends of one `(client_id, seq)`, resends racing their
original, many clients of one session from many threads, and `close()` while `act` waits."""

from __future__ import annotations

import random
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from lineup_runtime_lite import HostSimulator, Runtime, VirtualClock
from lineup_runtime_lite.internals import engine_of
from lineup_sdk.errors import LineupError
from tests.runtime.api.ui_actions_kit import items, q, queue_bundle, start

__all__ = ["q", "queue_bundle"]

REPEATS = 50


def _outcome(call: Any) -> tuple[str, Any]:
    try:
        return "ok", call()
    except LineupError as exc:
        return "error", exc.code


@pytest.mark.parametrize("seed", range(3))
def test_the_same_action_sent_twice_at_once_is_applied_once_with_one_outcome(
    q: Runtime, seed: int
) -> None:
    print(f"seed={seed}")
    rnd = random.Random(seed)
    start(q)
    s = q.surface("conv", "queue")
    for n in range(1, REPEATS + 1):
        barrier = threading.Barrier(2)
        entry = rnd.choice(["act", "submit"])

        def send(
            n: int = n, entry: str = entry, barrier: threading.Barrier = barrier
        ) -> tuple[str, Any]:
            barrier.wait()
            if entry == "submit":
                return _outcome(
                    lambda: s.submit("queue.push", {"item": str(n)}, client_id="c", seq=n)[
                        1
                    ].result(timeout=30)
                )
            return _outcome(lambda: s.act("queue.push", {"item": str(n)}, client_id="c", seq=n))

        with ThreadPoolExecutor(2) as pool:
            a, b = pool.map(lambda _: send(), range(2))
        assert a == b and a[0] == "ok", (seed, n, a, b)
    assert items(q) == [str(n) for n in range(1, REPEATS + 1)]
    assert s.get().revision == REPEATS


@pytest.mark.parametrize("seed", range(2))
def test_many_clients_from_many_threads_keep_each_clients_order(q: Runtime, seed: int) -> None:
    """8 clients, each sending seqs 1..25 with every seq sent twice (a resend racing its
    original), from 8 threads in a shuffled order per client: every action applied once,
    each client's items in its seq order."""
    print(f"seed={seed}")
    rnd = random.Random(seed)
    start(q)
    s = q.surface("conv", "queue")
    clients = [f"k{i}" for i in range(8)]
    per = 25

    def client(name: str) -> list[tuple[str, Any]]:
        seen = []
        for n in range(1, per + 1):
            for _ in range(2):  # original, then a resend
                seen.append(
                    _outcome(
                        lambda n=n: s.act(
                            "queue.push", {"item": f"{name}.{n}"}, client_id=name, seq=n
                        )
                    )
                )
        return seen

    rnd.shuffle(clients)
    with ThreadPoolExecutor(8) as pool:
        results = dict(zip(clients, pool.map(client, clients), strict=True))
    got = items(q)
    assert len(got) == len(clients) * per and len(set(got)) == len(got)
    for name, seen in results.items():
        assert all(kind == "ok" for kind, _ in seen), seen
        assert [seen[i][1] for i in range(0, 2 * per, 2)] == [
            seen[i][1] for i in range(1, 2 * per, 2)
        ]
        mine = [i for i in got if i.startswith(f"{name}.")]
        assert mine == [f"{name}.{n}" for n in range(1, per + 1)]
    assert s.get().revision == len(got)


def test_close_while_act_waits_answers_the_waiter_and_reopen_applies_it_at_most_once(
    tmp_path: Path, trust: Any, queue_bundle: Path
) -> None:
    db = tmp_path / "rt.db"
    clock = VirtualClock()
    rt = Runtime.open(db, trust=trust, clock=clock, host=HostSimulator(policy="manual"))
    rt.install(queue_bundle)
    assert rt.call("o1", "conv", "queue.open", {})["activation"] == "starting"
    s = rt.surface("conv", "queue")
    box: list[tuple[str, Any]] = []
    accepted = threading.Event()

    def wait() -> None:
        _, out = s.submit("queue.push", {"item": "a"}, client_id="c", seq=1)
        accepted.set()
        box.append(_outcome(lambda: out.result(timeout=30)))

    waiter = threading.Thread(target=wait)
    waiter.start()
    assert accepted.wait(30)
    rt.close()
    waiter.join(30)
    assert not waiter.is_alive(), "the waiter hangs after close()"
    assert box == [("error", "action_pending")], box
    rt = Runtime.open(db, trust=trust, clock=clock, host=HostSimulator(policy="manual"))
    try:
        rt.host.event("foreground_confirmed", conversation="conv", scope="queue")
        rt.settle()
        kind, value = _outcome(
            lambda: rt.surface("conv", "queue").act(
                "queue.push", {"item": "a"}, client_id="c", seq=1
            )
        )
        # it was only queued: applied once, after the reopen, and the replay answers it
        assert kind == "ok" and value["revision"] == 1, (kind, value)
        assert items(rt) == ["a"]
    finally:
        rt.close()


def test_close_while_a_blocking_act_waits_does_not_hang(
    tmp_path: Path, trust: Any, queue_bundle: Path
) -> None:
    rt = Runtime.open(
        ":memory:", trust=trust, clock=VirtualClock(), host=HostSimulator(policy="manual")
    )
    rt.install(queue_bundle)
    assert rt.call("o1", "conv", "queue.open", {})["activation"] == "starting"
    s = rt.surface("conv", "queue")
    box: list[tuple[str, Any]] = []
    waiter = threading.Thread(
        target=lambda: box.append(
            _outcome(lambda: s.act("queue.push", {"item": "a"}, client_id="c", seq=1, timeout=60))
        )
    )
    waiter.start()
    # let it be accepted (the action is in the store) before closing
    for _ in range(2000):
        if engine_of(rt).store.dump()["ui_actions"]:
            break
        threading.Event().wait(0.005)
    rt.close()
    waiter.join(30)
    assert not waiter.is_alive(), "act() hangs after close()"
    assert box == [("error", "action_pending")], box


def test_a_flood_of_clients_holds_nothing_in_memory_per_client(q: Runtime) -> None:
    """10k distinct clients on one App session: their marks and outcomes live in the store
    (SPEC 17 keeps them for the session's life); the engine holds nothing per client once
    answered, and the process's memory does not grow with the number of clients."""
    import gc
    import tracemalloc

    start(q)
    s = q.surface("conv", "queue")
    sizes = []
    tracemalloc.start()
    try:
        for batch in range(4):
            for n in range(2_500):
                s.act("queue.peek", {}, client_id=f"b{batch}n{n}", seq=1)
            gc.collect()
            sizes.append(tracemalloc.get_traced_memory()[0])
            held = engine_of(q).held()
            assert held["outcomes"] == 0 and held["queued_decisions"] == 0, held
    finally:
        tracemalloc.stop()
    print("traced bytes after 2.5k/5k/7.5k/10k clients:", sizes)
    assert len(engine_of(q).store.dump()["ui_action_clients"]) == 10_000
    # growth from 2.5k to 10k clients stays below 200 bytes a client (caches are bounded)
    assert sizes[-1] - sizes[0] < 200 * 7_500, sizes


@pytest.mark.parametrize("seed", [7])
def test_actions_accepted_while_the_worker_is_killed_run_once_on_the_next_worker(
    file_runtime: Any, queue_bundle: Path, seed: int
) -> None:
    """An action that kills its worker, raced by other clients' actions and an Agent call
    accepted while the worker dies: the crashing one is interrupted (nothing applied, once),
    every other one applied exactly once, in the session's order."""
    print(f"seed={seed}")
    rnd = random.Random(seed)
    rt = file_runtime(queue_bundle)
    start(rt)
    s = rt.surface("conv", "queue")
    expected: list[str] = []
    for round_ in range(1, 6):
        barrier = threading.Barrier(3)
        order = ["crash", "push", "call"]
        rnd.shuffle(order)

        def go(what: str, r: int = round_, barrier: threading.Barrier = barrier) -> tuple[str, Any]:
            barrier.wait()
            if what == "crash":
                return _outcome(
                    lambda: s.act("queue.crash", {"item": f"x{r}"}, client_id="k", seq=r)
                )
            if what == "push":
                return _outcome(
                    lambda: s.act("queue.push", {"item": f"p{r}"}, client_id="p", seq=r)["revision"]
                )
            return _outcome(lambda: rt.call(f"a{r}", "conv", "queue.add", {"item": f"a{r}"}))

        with ThreadPoolExecutor(3) as pool:
            got = dict(zip(order, pool.map(go, order), strict=True))
        rt.settle()
        assert got["crash"] == ("error", "delivery_interrupted"), (round_, got)
        assert got["push"][0] == "ok", (round_, got)
        expected += [f"p{round_}", f"a{round_}"]
        now = items(rt)
        assert sorted(now) == sorted(expected) and not any(i.startswith("x") for i in now)
        assert s.get().revision == len(expected)


@pytest.mark.parametrize("seed", [11])
def test_an_action_racing_its_activations_failure_is_refused_or_fails_with_it(
    q: Runtime, seed: int
) -> None:
    """`act` and the Host's `user_left` at once, 20 times: the action is either refused
    before acceptance (`app_not_running`, nothing persisted) or accepted and failed with
    the activation (`activation_cancelled`); never applied, never left waiting."""
    print(f"seed={seed}")
    rnd = random.Random(seed)
    seen = set()
    for n in range(20):
        conv = f"conv{n}"
        assert q.call(f"o{n}", conv, "queue.open", {})["activation"] == "starting"
        s = q.surface(conv, "queue")
        barrier = threading.Barrier(2)
        order = ["act", "leave"]
        rnd.shuffle(order)

        def go(
            what: str, s: Any = s, conv: str = conv, barrier: threading.Barrier = barrier
        ) -> tuple[str, Any]:
            barrier.wait()
            if what == "act":
                return _outcome(
                    lambda: s.act("queue.push", {"item": "a"}, client_id="c", seq=1, timeout=30)
                )
            return _outcome(lambda: q.host.event("user_left", conversation=conv, scope="queue"))

        with ThreadPoolExecutor(2) as pool:
            got = dict(zip(order, pool.map(go, order), strict=True))
        q.settle()
        assert got["act"] in (
            ("error", "app_not_running"),
            ("error", "activation_cancelled"),
        ), (n, got)
        seen.add(got["act"][1])
        assert items(q, conv) == []
        assert len(engine_of(q).store.dump()["ui_actions"]) <= n + 1
    print("outcomes seen:", sorted(seen))


def test_duplicates_and_an_agent_call_released_in_one_loop_turn_share_one_order(
    q: Runtime,
) -> None:
    """Staged: the runtime's loop is held while one action is sent twice and an Agent call
    once (from three threads), then released so all three decide in one turn (one group
    commit batch where they coalesce): the action applied once, both sends answered the
    same, and the list in the session's `seq` order over calls and actions."""
    from tests.runtime.api.ui_actions_kit import _serial_order

    start(q)
    s = q.surface("conv", "queue")
    loop = q._loop
    batches = []
    for n in range(1, REPEATS + 1):
        gate, held = threading.Event(), threading.Event()

        def hold(held: threading.Event = held, gate: threading.Event = gate) -> None:
            held.set()
            gate.wait(30)

        loop.call_soon_threadsafe(hold)
        assert held.wait(30)
        before = engine_of(q).commits.batches
        sends = [
            lambda n=n: _outcome(
                lambda: s.act("queue.push", {"item": f"u{n}"}, client_id="c", seq=n)
            ),
            lambda n=n: _outcome(
                lambda: s.act("queue.push", {"item": f"u{n}"}, client_id="c", seq=n)
            ),
            lambda n=n: _outcome(lambda: q.call(f"a{n}", "conv", "queue.add", {"item": f"a{n}"})),
        ]
        with ThreadPoolExecutor(3) as pool:
            futures = [pool.submit(send) for send in sends]
            while len(loop._ready) < 4:  # type: ignore[attr-defined]  # hold + three sends
                threading.Event().wait(0.001)
            gate.set()
            first, second, call = (f.result(timeout=60) for f in futures)
        batches.append(engine_of(q).commits.batches - before)
        assert first == second and first[0] == "ok", (n, first, second)
        assert call[0] == "ok", call
    q.settle()
    print("batches per round:", batches)
    got = items(q)
    assert sorted(got) == sorted(
        [f"u{n}" for n in range(1, REPEATS + 1)] + [f"a{n}" for n in range(1, REPEATS + 1)]
    )
    session = engine_of(q).facts.session("conv", "queue")
    assert session is not None and got == _serial_order(q, session.app_session_id)
