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
from lineup_sdk.errors import LineupError
from tests.runtime.test_ui_actions import items, q, queue_bundle, start

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

        def send(n: int = n, entry: str = entry) -> tuple[str, Any]:
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
                    _outcome(lambda: s.act("queue.push", {"item": f"{name}.{n}"}, client_id=name, seq=n))
                )
        return seen

    rnd.shuffle(clients)
    with ThreadPoolExecutor(8) as pool:
        results = dict(zip(clients, pool.map(client, clients), strict=True))
    got = items(q)
    assert len(got) == len(clients) * per and len(set(got)) == len(got)
    for name, seen in results.items():
        assert all(kind == "ok" for kind, _ in seen), seen
        assert [seen[i][1] for i in range(0, 2 * per, 2)] == [seen[i][1] for i in range(1, 2 * per, 2)]
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
        ack, out = s.submit("queue.push", {"item": "a"}, client_id="c", seq=1)
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
            lambda: rt.surface("conv", "queue").act("queue.push", {"item": "a"}, client_id="c", seq=1)
        )
        # it was only queued: applied once, after the reopen, and the replay answers it
        assert kind == "ok" and value["revision"] == 1, (kind, value)
        assert items(rt) == ["a"]
    finally:
        rt.close()


def test_close_while_a_blocking_act_waits_does_not_hang(
    tmp_path: Path, trust: Any, queue_bundle: Path
) -> None:
    rt = Runtime.open(":memory:", trust=trust, clock=VirtualClock(), host=HostSimulator(policy="manual"))
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
        if rt._core.store.dump()["ui_actions"]:
            break
        threading.Event().wait(0.005)
    rt.close()
    waiter.join(30)
    assert not waiter.is_alive(), "act() hangs after close()"
    assert box == [("error", "action_pending")], box
