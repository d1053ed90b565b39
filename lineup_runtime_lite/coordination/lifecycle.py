"""A node's life on the runtime's loop (SPEC 15): the coordination's news — wake-ups from
the listener, sessions the heartbeat took over, a lost lease — handed to the loop and to
the engine of the moment; after a lost lease, the engine stopped and a new one started
once the node has registered again.

With one runtime (`Solo`) nothing ever arrives: `join` starts nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from lineup_runtime_lite.coordination import Coordination
from lineup_sdk.errors import LineupError

__all__ = ["NodeEngine", "NodeLife"]

log = logging.getLogger("lineup.runtime")


class NodeEngine(Protocol):
    """What the node's life asks of the runtime's engine."""

    def on_wake(self, payloads: list[str]) -> None: ...
    def take_over(self, session_ids: list[str]) -> Awaitable[None]: ...
    def spawn(self, coro: Awaitable[Any]) -> Any: ...
    def fail_waiters(self, why: str) -> None: ...
    def close(self) -> Awaitable[None]: ...


class NodeLife:
    """The node's news on `loop`, for the engine `engine()` returns.

    `restart()` makes, loads and recovers a new engine (after the node registered again);
    `rejoined()` runs once it has (the runtime arms its timer). `shown` names the
    database in the log.
    """

    def __init__(
        self,
        coordination: Coordination,
        loop: asyncio.AbstractEventLoop,
        *,
        engine: Callable[[], NodeEngine],
        restart: Callable[[], Awaitable[None]],
        rejoined: Callable[[], None],
        shown: str,
    ) -> None:
        self._coordination = coordination
        self._loop = loop
        self._engine = engine
        self._restart = restart
        self._rejoined = rejoined
        self._shown = shown
        #: The node lost its lease and is registering again: news wait for the new engine.
        self.rejoining = False
        #: `leave` began (the runtime closes): a lease lost now starts no rejoin.
        self.leaving = False
        self._task: asyncio.Future[None] | None = None

    def join(self) -> NodeLife:
        """Start the node's heartbeat and listener, their news handed to the loop."""
        loop = self._loop

        def on_loop(fn: Callable[..., Any], *args: Any) -> None:
            with contextlib.suppress(RuntimeError):  # the loop closed: nothing to tell
                loop.call_soon_threadsafe(fn, *args)

        self._coordination.join(
            on_wake=lambda payloads: on_loop(self.woken, payloads),
            on_taken=lambda sids: on_loop(self.taken, sids),
            on_lost=lambda: on_loop(self.lease_lost),
        )
        return self

    def _quiet(self) -> bool:
        return self.leaving or self.rejoining

    def woken(self, payloads: list[str]) -> None:
        """Wake-ups from the nodes (`Engine.on_wake`; none: the polling tick)."""
        if not self._quiet():
            self._engine().on_wake(payloads)

    def taken(self, session_ids: list[str]) -> None:
        """Sessions of a node whose lease lapsed, taken over by this one."""
        if not self._quiet():
            engine = self._engine()
            engine.spawn(engine.take_over(session_ids))

    def lease_lost(self) -> None:
        """This node lost its lease (stopped, partitioned, starved): it stops — its
        workers, drivers and waiters go, it can write nothing more — and registers again
        with a new epoch, recovering whatever sessions are still its."""
        if self._quiet():
            return
        self.rejoining = True
        self._task = asyncio.ensure_future(self._rejoin())

    async def _rejoin(self) -> None:
        old = self._engine()
        log.warning("node lost its lease on %s: stopping and registering again", self._shown)
        old.fail_waiters("this node lost its lease and stopped before the call's final answer")
        try:
            await old.close()
        except Exception as exc:  # what stopping left is the next engine's to recover
            log.warning("stopping after the lease was lost: %s", exc)
        while not self.leaving:
            try:
                await asyncio.to_thread(self._coordination.rejoin)
                await self._restart()
                break
            except LineupError as exc:
                log.warning("registering again: %s", exc.message)
                await asyncio.sleep(0.25)
        self.rejoining = False
        if not self.leaving:
            self.join()
            self._rejoined()

    async def leave(self) -> None:
        """The runtime closes: no news is handed on, and a rejoin under way stops."""
        self.leaving = True
        task = self._task
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
