"""When a runtime fires what fell due: the real-clock timer armed for the next deadline, and
a virtual clock's `advance()` (from this loop or another thread) turned into a tick on the
runtime's loop, its time persisted first (SPEC 5: the database is the deadlines' only
source of truth; a running process arms its timer with the time remaining)."""

from __future__ import annotations

import asyncio
import threading

from lineup_runtime_lite.api.arguments import Owner

__all__ = ["Deadlines"]


class Deadlines:
    """The deadline timer of one `AsyncRuntime` (its engine may be replaced: a node that
    lost its lease registers again), created on the runtime's loop."""

    def __init__(self, rt: Owner) -> None:
        self._rt = rt
        self.loop = asyncio.get_running_loop()
        self.thread_id = threading.get_ident()
        self.handle: asyncio.TimerHandle | None = None
        self.fired_ms = -1  # the runtime-clock time the last `tick()` fired at

    def arm(self) -> None:
        """Arm the real-clock timer for the next deadline (on the loop)."""
        rt = self._rt
        if rt.clock.virtual or rt._closed:
            return
        if self.handle is not None:
            self.handle.cancel()
        due = rt._engine.next_deadline()
        if due is None:
            return
        delay = max(0.0, (due - rt.clock.now_ms()) / 1000)
        self.handle = self.loop.call_later(delay, lambda: rt._engine.spawn(self.fire()))

    def cancel(self) -> None:
        if self.handle is not None:
            self.handle.cancel()

    async def fire(self) -> None:
        try:
            await self._rt._engine.tick()
        finally:  # a failed tick leaves its facts due; the next timer fires them
            self.arm()

    async def _advance_to(self, now_ms: int) -> None:
        """The virtual clock moved: persist its time, then fire what fell due."""
        engine = self._rt._engine
        engine.store.set_meta("virtual_now_ms", str(now_ms))
        await engine.tick()

    def advanced(self, now_ms: int) -> None:
        """The virtual clock moved (`advance()` on this loop, or from another thread):
        schedule the tick; `await settle()` waits for it."""
        rt = self._rt
        if rt._closed or now_ms <= self.fired_ms:  # closed, or `tick()` fired it already
            return
        if threading.get_ident() == self.thread_id:
            rt._engine.spawn(self._advance_to(now_ms))
        else:
            self.loop.call_soon_threadsafe(lambda: rt._engine.spawn(self._advance_to(now_ms)))
