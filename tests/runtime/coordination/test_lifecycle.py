"""A node's life on the runtime's loop (`coordination.lifecycle.NodeLife`) with its ports
faked (a coordination and an engine that record what they are asked): the news reach the
engine of the moment, a lost lease stops it and starts a new one once the node registered
again, and nothing reaches an engine while the node rejoins or leaves. With one runtime
(`Solo`) there is nothing to run. No database, no threads."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from lineup_runtime_lite.coordination.lifecycle import NodeLife
from lineup_runtime_lite.coordination.solo import Solo
from lineup_runtime_lite.store.database import open_database
from lineup_sdk.errors import LineupError


class FakeEngine:
    def __init__(self, name: str, log: list[str]) -> None:
        self.name, self.log = name, log

    def on_wake(self, payloads: list[str]) -> None:
        self.log.append(f"{self.name}.wake {payloads}")

    async def take_over(self, session_ids: list[str]) -> None:
        self.log.append(f"{self.name}.take {session_ids}")

    def spawn(self, coro: Awaitable[Any]) -> Any:
        return asyncio.ensure_future(coro)

    def fail_waiters(self, why: str) -> None:
        self.log.append(f"{self.name}.fail")

    async def close(self) -> None:
        self.log.append(f"{self.name}.close")


class FakeNodes(Solo):
    """A coordination whose registration fails `refusals` times, then succeeds."""

    def __init__(self, log: list[str], refusals: int = 0) -> None:
        self.log, self.refusals, self.joined = log, refusals, 0
        self.on_lost: Callable[[], None] = lambda: None

    def join(self, **news: Any) -> None:
        self.joined += 1
        self.on_lost = news["on_lost"]

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


def test_a_lost_lease_stops_the_engine_and_starts_a_new_one_after_registering() -> None:
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
