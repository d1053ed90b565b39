"""The Host relay: undelivered Host intents, ordered per instance (SPEC 5.7)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from lineup_runtime_lite.core.activations import intent_delivered, supersede_ended
from lineup_runtime_lite.drivers import STEP_TRIES, steps
from lineup_runtime_lite.drivers.shell import Shell
from lineup_runtime_lite.store import faults

__all__ = ["HostRelay"]

log = logging.getLogger("lineup.runtime")


class HostRelay:
    def __init__(
        self, shell: Shell, host_intent: Callable[[dict[str, Any]], Awaitable[None]] | None
    ) -> None:
        self.shell = shell
        self.host_intent = host_intent
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()  # set when a new intent arrives while relaying
        #: How often the Host refused the head intent of each instance (this process).
        self._refused: dict[str, int] = {}
        #: Callers waiting until their instances' intents were handed over (`handed_on`).
        self._waiters: list[tuple[dict[str, int], asyncio.Future[None]]] = []

    def kick(self) -> None:
        """Make sure the relay is sending the undelivered intents."""
        if self.host_intent is None:
            return
        if self._task is None or self._task.done():
            self._wake.clear()
            self._task = self.shell.spawn(self._relay())
        else:
            self._wake.set()  # a new intent need not wait out another one's backoff

    async def handed_on(self, instances: set[str]) -> None:
        """Return once the intents committed so far for `instances` were handed to the Host
        (SPEC 13.1: a call returns only when what it committed is with its consumer): each
        instance has no undelivered intent left, or the Host refused its next one since
        now (its retries go on in the background; nobody waits out a backoff)."""
        if self.host_intent is None or not instances or self._task is None:
            return
        if self._task is asyncio.current_task():
            return  # a Host that calls the runtime while taking an intent: never wait on itself
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(({i: self._refused.get(i, 0) for i in instances}, fut))
        self._answer_waiters()
        if self._task.done():  # the relay ended before this caller asked
            self._answer_waiters(everyone=True)
        await fut

    def _answer_waiters(self, *, everyone: bool = False) -> None:
        if not self._waiters:
            return
        pending = set() if everyone else {h.instance for h in self.shell.facts.intent_heads()}
        left = []
        for base, fut in self._waiters:
            done = all(
                inst not in pending or self._refused.get(inst, 0) > seen
                for inst, seen in base.items()
            )
            if done or fut.done():
                if not fut.done():
                    fut.set_result(None)
            else:
                left.append((base, fut))
        self._waiters = left

    async def _relay(self) -> None:
        try:
            await self._relay_pending()
        finally:  # the relay stopped: nobody waits on it any more
            self._answer_waiters(everyone=True)
            self._refused.clear()

    async def _relay_pending(self) -> None:
        """Send undelivered Host intents, oldest first but ordered per instance only: an
        intent the Host refuses is retried with backoff (then left for the next kick: a new
        intent, a clock tick, a retried call, or recovery) while other instances' intents
        go on. Each is marked delivered only after the Host acted, so a crash in between
        sends it again with the same dedup key. An intent whose activation has ended is
        superseded (never sent): `end_activation` marks it in the decision that ends the
        activation, `supersede_ended` covers older databases."""
        assert self.host_intent is not None
        shell = self.shell
        loop = asyncio.get_running_loop()
        failures: dict[str, int] = {}
        retry_at: dict[str, float] = {}
        while True:
            heads = [
                h for h in shell.facts.intent_heads() if failures.get(h.instance, 0) < STEP_TRIES
            ]
            if not heads:
                return
            superseded = supersede_ended(heads)
            if superseded is not None:
                await shell.decide(steps.decided(superseded))
                self._answer_waiters()
                continue
            now = loop.time()
            due = [h for h in heads if retry_at.get(h.instance, 0.0) <= now]
            if not due:
                self._wake.clear()
                wait = min(retry_at[h.instance] for h in heads) - now
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), wait)
                continue
            head = due[0]
            try:
                faults.hit("host.reconcile")
                await self.host_intent(json.loads(head.body))
                faults.hit("host.after_intent")
            except Exception as exc:
                tries = failures[head.instance] = failures.get(head.instance, 0) + 1
                if tries >= STEP_TRIES:
                    log.warning("the Host did not take intent %s: %s", head.id, exc)
                retry_at[head.instance] = loop.time() + 0.01 * (2**tries)
                self._refused[head.instance] = self._refused.get(head.instance, 0) + 1
                self._answer_waiters()
                continue
            failures.pop(head.instance, None)
            retry_at.pop(head.instance, None)
            await shell.decide(steps.decided(intent_delivered(head)))
            self._answer_waiters()
