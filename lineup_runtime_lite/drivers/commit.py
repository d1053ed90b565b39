"""Group commit (RUNTIME-NOTES): decisions ready in the same loop turn, across sessions,
commit in one transaction, each in its own savepoint."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from lineup_runtime_lite.store.facts import Facts
from lineup_runtime_lite.store.sqlite import Store

__all__ = ["MAX_BATCH", "GroupCommit"]

#: The most decisions one transaction carries (the rest go in the next turn's).
MAX_BATCH = 256

Step = Callable[[Facts], Any]


class GroupCommit:
    """Queue steps; one `Store.batch` per loop turn runs them all.

    A step reads its facts and writes its decision inside its savepoint, so what it read
    is what it acts on. Nothing is sent before the commit that records it: the awaiting
    driver performs the effects only once its future resolves, after COMMIT.
    """

    def __init__(self, store: Store) -> None:
        self.store = store
        self._queue: list[tuple[Step, asyncio.Future[Any]]] = []
        self._scheduled = False
        #: How many batches and steps were committed (for the benchmarks and tests).
        self.batches = 0
        self.steps = 0

    def submit(self, step: Step) -> asyncio.Future[Any]:
        """Run `step` in the next batch; the future gets its result or its exception (the
        store's mapped error when the whole batch failed)."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Any] = loop.create_future()
        self._queue.append((step, fut))
        if not self._scheduled:
            self._scheduled = True
            loop.call_soon(self._flush)
        return fut

    def _flush(self) -> None:
        batch, self._queue = self._queue[:MAX_BATCH], self._queue[MAX_BATCH:]
        if self._queue:
            asyncio.get_running_loop().call_soon(self._flush)
        else:
            self._scheduled = False
        try:
            results = self.store.batch([step for step, _ in batch])
        except BaseException as exc:  # nothing of the batch was kept (or COMMIT then a fault)
            for _, fut in batch:
                if not fut.done():
                    fut.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        self.batches += 1
        self.steps += len(batch)
        for (_, fut), out in zip(batch, results, strict=True):
            if fut.done():  # its awaiting task was cancelled
                continue
            if isinstance(out, BaseException):
                fut.set_exception(out)
            else:
                fut.set_result(out)
