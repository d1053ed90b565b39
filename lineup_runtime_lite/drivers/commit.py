"""Group commit (RUNTIME-NOTES): decisions ready in the same loop turn, across sessions,
commit in one transaction, each in its own savepoint."""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import Callable, Generator
from typing import Any

from lineup_runtime_lite.core.decisions import Decision, NewSession
from lineup_runtime_lite.core.port import Facts, reading_as
from lineup_runtime_lite.store.database import Database
from lineup_sdk.errors import LineupError

__all__ = ["MAX_BATCH", "GroupCommit", "applying", "touched"]

#: The most decisions one transaction carries (the rest go in the next turn's).
MAX_BATCH = 256

Step = Callable[[Facts], Any]


class GroupCommit:
    """Queue steps; one `Store.batch` per loop turn runs them all.

    A step reads its facts and writes its decision inside its savepoint, so what it read
    is what it acts on. Nothing is sent before the commit that records it: the awaiting
    driver performs the effects only once its future resolves, after COMMIT.
    """

    def __init__(self, store: Database) -> None:
        self.store = store
        self._queue: list[tuple[Step, asyncio.Future[Any]]] = []
        self._handle: asyncio.Handle | None = None
        self._flushing = False
        #: A store whose batches run off the loop (PostgreSQL) gets one thread for them;
        #: while a batch is in flight there, the next one gathers on the loop.
        self._thread: _StoreThread | None = None
        if store.off_loop:
            self._thread = _StoreThread("lineup-store")
        #: Set by `close`: a step submitted or still queued then is refused, not run.
        self._closed = False
        #: How many batches and steps were committed (for the benchmarks and tests).
        self.batches = 0
        self.steps = 0

    def submit(self, step: Step) -> _Ticket:
        """Run `step` in this loop turn's batch; awaiting the ticket gives its result or
        its exception (the store's mapped error when the whole batch failed)."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Any] = loop.create_future()
        self._queue.append((step, fut))
        if self._handle is None:
            self._handle = loop.call_soon(self._flush)
        return _Ticket(self, fut)

    def _alone(self, loop: asyncio.AbstractEventLoop) -> bool:
        """Whether nothing but this batch's own flush is ready to run in this loop turn,
        so nothing else could join the batch (a loop that does not say, such as uvloop,
        is never taken to be alone: the batch then waits for its turn)."""
        ready = getattr(loop, "_ready", None)
        if ready is None or self._flushing:
            return False
        return len(ready) == 0 or (len(ready) == 1 and ready[0] is self._handle)

    def _flush(self) -> None:
        if self._handle is not None:
            self._handle.cancel()  # when called early, the scheduled flush has nothing left
            self._handle = None
        if not self._queue:
            return
        if self._closed:
            queued, self._queue = self._queue, []
            for _, fut in queued:
                if not fut.done():
                    fut.set_exception(_stopped())
            return
        if self._thread is not None:
            self._flush_off_loop()
            return
        batch, self._queue = self._queue[:MAX_BATCH], self._queue[MAX_BATCH:]
        if self._queue:
            self._handle = asyncio.get_running_loop().call_soon(self._flush)
        self._flushing = True
        try:
            results = self.store.batch([step for step, _ in batch])
        except BaseException as exc:  # nothing of the batch was kept (or COMMIT then a fault)
            for _, fut in batch:
                if not fut.done():
                    fut.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        finally:
            self._flushing = False
        self._resolve(batch, results)

    def _flush_off_loop(self) -> None:
        """Send the gathered steps to the store thread, unless a batch is in flight there
        (its landing sends what gathered meanwhile)."""
        assert self._thread is not None
        if self._flushing:
            return
        batch, self._queue = self._queue[:MAX_BATCH], self._queue[MAX_BATCH:]
        self._flushing = True
        loop = asyncio.get_running_loop()

        def landed(ok: bool, value: Any) -> None:  # on the store thread
            if not loop.is_closed():
                with contextlib.suppress(RuntimeError):  # closed meanwhile: nobody waits
                    loop.call_soon_threadsafe(self._landed, batch, ok, value)

        self._thread.submit(self.store.batch, [step for step, _ in batch], landed)

    def _landed(self, batch: list[tuple[Step, asyncio.Future[Any]]], ok: bool, value: Any) -> None:
        self._flushing = False
        if not ok:  # nothing of the batch was kept (or it is in doubt)
            for _, fut in batch:
                if not fut.done():
                    fut.set_exception(value)
        else:
            self._resolve(batch, value)
        if self._queue and self._handle is None:
            self._handle = asyncio.get_running_loop().call_soon(self._flush)

    def close(self) -> None:
        """Stop the store thread (after the batch in flight, if any); steps still queued
        and any submitted later are refused (`store_unavailable`)."""
        self._closed = True
        if self._thread is not None:
            self._thread.shutdown()

    def _resolve(self, batch: list[tuple[Step, asyncio.Future[Any]]], results: list[Any]) -> None:
        self.batches += 1
        self.steps += len(batch)
        for (_, fut), out in zip(batch, results, strict=True):
            if fut.done():  # its awaiting task was cancelled
                continue
            if isinstance(out, BaseException):
                fut.set_exception(out)
            else:
                fut.set_result(out)


class _StoreThread:
    """The store's one thread: it runs each batch handed to it and tells the batch's
    `landed` callback how it ended — one queue put to start it, one loop wake-up from
    `landed` to hear back (no executor future, lock and condition per batch)."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._jobs: queue.SimpleQueue[tuple[Any, ...] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def submit(
        self, fn: Callable[[Any], Any], arg: Any, landed: Callable[[bool, Any], None]
    ) -> None:
        if self._thread is None:  # started by the first batch, as an executor's would be
            self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
            self._thread.start()
        self._jobs.put((fn, arg, landed))

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            fn, arg, landed = job
            try:
                ok, value = True, fn(arg)
            except BaseException as exc:  # handed to the loop, which raises it there
                ok, value = False, exc
            landed(ok, value)

    def shutdown(self) -> None:
        """After the batch in flight and those queued before this (then it ends)."""
        if self._thread is not None:
            self._jobs.put(None)
            self._thread.join()


def _stopped() -> LineupError:
    return LineupError(
        "store_unavailable",
        "the runtime stopped before this step was written; nothing of it was kept",
        hint="retry the same call_id (it replays once the runtime answers again)",
    )


class _Ticket:
    """A step's place in a batch. Awaiting it when nothing else is ready in this loop turn
    commits the batch at once (nothing could join it by waiting): the awaiting caller then
    finds its result without yielding to the loop."""

    __slots__ = ("_commit", "_fut")

    def __init__(self, commit: GroupCommit, fut: asyncio.Future[Any]) -> None:
        self._commit, self._fut = commit, fut

    def __await__(self) -> Generator[Any, None, Any]:
        fut = self._fut
        if not fut.done() and self._commit._alone(fut.get_loop()):
            self._commit._flush()
        return fut.__await__()


def applying(
    step: Callable[[Facts], Decision | None],
    will_kick: Callable[[tuple[str, ...]], None],
    owns: Callable[[str], bool],
    own: Callable[[set[str]], None],
) -> Callable[[Facts], Decision | None]:
    """The batch step: decide, then write the decision's changes (a guard that finds no
    row raises `LostRace`, so the savepoint is rolled back and the decision dropped). The
    sessions a written decision kicks are marked at once, so a later decision of the same
    batch never sends past their queue (`DeliveryDriver.idle`); the owners of other nodes'
    sessions it touched are woken when it commits (SPEC 15)."""

    def run(tx: Facts) -> Decision | None:
        decision = step(tx)
        if decision is not None:
            for change in decision.changes:
                tx.apply(change)
            new = {c.app_session_id for c in decision.changes if isinstance(c, NewSession)}
            if new:
                own(new)
            remote = [sid for sid in touched(decision) if not owns(sid)]
            if remote:  # what the owner does with it (`Engine.on_wake`)
                wakes = [f"s:{sid}" for sid in remote]
                wakes += [f"a:{act_id}" for act_id in decision.drive]
                if decision.host:
                    wakes += [f"h:{sid}" for sid in remote]
                tx.wake(wakes)
            kick = tuple(sid for sid in decision.kick if sid not in remote)
            if kick:
                will_kick(kick)
        return decision

    return reading_as(step, run)


def touched(decision: Decision) -> list[str]:
    """The App sessions a decision writes to or kicks, in order, once each."""
    out: dict[str, None] = dict.fromkeys(decision.kick)
    for change in decision.changes:
        sid = getattr(change, "app_session_id", None)
        if isinstance(sid, str):
            out[sid] = None
    return list(out)
