"""A node's life on the runtime's loop (`coordination.lifecycle.NodeLife`) with its ports
faked (a coordination and an engine that record what they are asked): the news reach the
engine of the moment, a lost lease stops it and starts a new one once the node registered
again, and nothing reaches an engine while the node rejoins or leaves. With one runtime
(`Solo`) there is nothing to run. No database, no threads."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from lineup_runtime_lite.coordination.lifecycle import NodeLife
from lineup_runtime_lite.coordination.solo import Solo
from lineup_runtime_lite.store.database import open_database
from lineup_sdk.errors import LineupError


class FakeEngine:
    def __init__(self, name: str, log: list[str]) -> None:
        self.name, self.log = name, log
        self.whys: list[str] = []  # what its waiters were told

    def on_wake(self, payloads: list[str]) -> None:
        self.log.append(f"{self.name}.wake {payloads}")

    async def take_over(self, session_ids: list[str]) -> None:
        self.log.append(f"{self.name}.take {session_ids}")

    def spawn(self, coro: Awaitable[Any]) -> Any:
        return asyncio.ensure_future(coro)

    def fail_waiters(self, why: str) -> None:
        self.log.append(f"{self.name}.fail")
        self.whys.append(why)

    async def close(self) -> None:
        self.log.append(f"{self.name}.close")


class FakeNodes(Solo):
    """A coordination whose registration fails `refusals` times, then succeeds."""

    def __init__(self, log: list[str], refusals: int = 0) -> None:
        self.log, self.refusals, self.joined = log, refusals, 0
        self.on_lost: Callable[[], None] = lambda: None
        self.on_wake: Callable[[list[str]], None] = lambda payloads: None
        self.on_taken: Callable[[list[str]], None] = lambda sids: None

    def join(self, **news: Any) -> None:
        self.joined += 1
        self.on_lost, self.on_wake, self.on_taken = (
            news["on_lost"],
            news["on_wake"],
            news["on_taken"],
        )

    def rejoin(self) -> None:
        if self.refusals:
            self.refusals -= 1
            self.log.append("rejoin refused")
            raise LineupError("runtime_locked", "not yet")
        self.log.append("rejoin")


def _life(nodes: FakeNodes, log: list[str]) -> tuple[NodeLife, list[FakeEngine]]:
    engines = [FakeEngine("e0", log)]

    async def restart() -> None:
        engines.append(FakeEngine(f"e{len(engines)}", log))
        log.append("restart")

    life = NodeLife(
        nodes,
        asyncio.get_running_loop(),
        engine=lambda: engines[-1],
        restart=restart,
        rejoined=lambda: log.append("armed"),
        shown="db",
    )
    return life.join(), engines


def test_a_lost_lease_stops_the_engine_and_starts_a_new_one_after_registering(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def go() -> tuple[list[str], int]:
        log: list[str] = []
        nodes = FakeNodes(log, refusals=1)
        life, _ = _life(nodes, log)
        life.woken(["c:1"])
        nodes.on_lost()  # the listener's thread hands it to the loop
        await asyncio.sleep(0)
        while life.rejoining:
            life.woken(["c:2"])  # nothing reaches an engine meanwhile
            life.taken(["s1"])
            await asyncio.sleep(0.05)
        life.woken(["c:3"])
        return log, nodes.joined

    log, joined = asyncio.run(go())
    assert log == [
        "e0.wake ['c:1']",
        "e0.fail",
        "e0.close",
        "rejoin refused",
        "rejoin",
        "restart",
        "armed",
        "e1.wake ['c:3']",
    ]
    assert joined == 2  # its threads started again for the new epoch
    # the operator reads why, on which database, and each refused registration's reason
    assert "node lost its lease on db: stopping and registering again" in caplog.text
    assert "registering again: not yet" in caplog.text


def test_a_node_that_leaves_hands_nothing_on_and_stops_its_rejoin() -> None:
    async def go() -> list[str]:
        log: list[str] = []
        nodes = FakeNodes(log, refusals=1000)
        life, _ = _life(nodes, log)
        life.lease_lost()
        await asyncio.sleep(0.05)
        await life.leave()
        life.woken([])
        life.taken(["s1"])
        life.lease_lost()
        await asyncio.sleep(0.3)
        return log

    log = asyncio.run(go())
    assert log[:2] == ["e0.fail", "e0.close"]
    assert set(log[2:]) == {"rejoin refused"}  # no restart, no news, no second rejoin


def test_one_runtime_has_nothing_to_coordinate(tmp_path: Path) -> None:
    store = open_database(tmp_path / "rt.db")
    try:
        solo = store.coordination
        assert isinstance(solo, Solo) and not solo.several()
        assert solo.mine("calls.app_session_id") == ("", ())
        assert not solo.lock("app_session_id=?", ("s1",))
        assert not solo.wake(["r:"]) and not solo.tell("c:1") and not solo.owner("s1")
    finally:
        store.close()


def test_sessions_taken_over_reach_the_engine_of_the_moment() -> None:
    async def go() -> list[str]:
        log: list[str] = []
        life, _ = _life(FakeNodes(log), log)
        life.taken(["s1", "s2"])
        await asyncio.sleep(0)  # the engine's task runs
        await asyncio.sleep(0)
        return log

    assert asyncio.run(go()) == ["e0.take ['s1', 's2']"]


class FailingEngine(FakeEngine):
    async def close(self) -> None:
        self.log.append(f"{self.name}.close failed")
        raise RuntimeError("the workers would not stop")


def test_an_engine_that_fails_to_stop_still_leaves_its_place_to_a_new_one(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The rejoin branch: whatever stopping the old engine raised, the node registers again
    and a new engine takes the news (what the old one left is the new one's to recover)."""

    async def go() -> tuple[list[str], list[str]]:
        log: list[str] = []
        nodes = FakeNodes(log)
        engines: list[FakeEngine] = [FailingEngine("e0", log)]

        async def restart() -> None:
            engines.append(FakeEngine(f"e{len(engines)}", log))
            log.append("restart")

        life = NodeLife(
            nodes,
            asyncio.get_running_loop(),
            engine=lambda: engines[-1],
            restart=restart,
            rejoined=lambda: log.append("armed"),
            shown="db",
        ).join()
        life.lease_lost()
        life.lease_lost()  # a second report while rejoining starts nothing more
        while life.rejoining:
            await asyncio.sleep(0.01)
        life.woken(["c:1"])
        return log, engines[0].whys

    log, whys = asyncio.run(go())
    assert whys == ["this node lost its lease and stopped before the call's final answer"]
    assert log == [
        "e0.fail",
        "e0.close failed",
        "rejoin",
        "restart",
        "armed",
        "e1.wake ['c:1']",
    ]
    # said, not raised
    assert "stopping after the lease was lost: the workers would not stop" in caplog.text


def test_leave_stops_a_restart_under_way_and_waits_for_it() -> None:
    async def go() -> tuple[list[str], bool]:
        log: list[str] = []
        nodes = FakeNodes(log)
        engines = [FakeEngine("e0", log)]
        go_on = asyncio.Event()

        async def restart() -> None:
            log.append("restart begins")
            await go_on.wait()
            engines.append(FakeEngine("e1", log))
            log.append("restart done")

        life = NodeLife(
            nodes,
            asyncio.get_running_loop(),
            engine=lambda: engines[-1],
            restart=restart,
            rejoined=lambda: log.append("armed"),
            shown="db",
        ).join()
        life.lease_lost()
        while "restart begins" not in log:
            await asyncio.sleep(0.01)
        await life.leave()
        go_on.set()
        for _ in range(5):
            await asyncio.sleep(0)
        return log, len(engines) == 1

    log, no_new_engine = asyncio.run(go())
    assert log == ["e0.fail", "e0.close", "rejoin", "restart begins"]
    assert no_new_engine


def test_a_node_that_left_hands_no_news_on() -> None:
    async def go() -> tuple[list[str], bool]:
        log: list[str] = []
        life, _ = _life(FakeNodes(log), log)
        await life.leave()  # no rejoin under way
        life.woken(["c:1"])
        life.taken(["s1"])
        life.lease_lost()
        await asyncio.sleep(0.05)
        return log, life.rejoining

    log, rejoining = asyncio.run(go())
    assert log == [] and not rejoining


def test_news_from_the_coordinations_threads_reach_the_engine_on_the_loop() -> None:
    """The heartbeat's and listener's threads hand their news to the loop; once the loop
    is closed there is nobody to tell, and telling raises nothing."""

    async def go() -> tuple[list[str], FakeNodes]:
        log: list[str] = []
        nodes = FakeNodes(log)
        _life(nodes, log)
        thread = threading.Thread(target=lambda: (nodes.on_wake(["c:1"]), nodes.on_taken(["s1"])))
        thread.start()
        thread.join()
        for _ in range(5):
            await asyncio.sleep(0)
        return log, nodes

    log, nodes = asyncio.run(go())
    assert log == ["e0.wake ['c:1']", "e0.take ['s1']"]
    nodes.on_wake(["c:2"])  # the loop is closed
    nodes.on_taken(["s2"])
    nodes.on_lost()
    assert log == ["e0.wake ['c:1']", "e0.take ['s1']"]
