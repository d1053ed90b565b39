"""The Surface SDK's client rules in Python (TIS2-04, SPEC 5.5 and 14), for the replay of
fixtures with Surface steps: a duplicate or older revision is ignored; on a revision gap or
a bridge reconnect the client drops its subscription, `get()`s again and resubscribes, so
its listener sees only increasing revisions. `drop_frame` and `reconnect` are the faults of
the dev Host's seam, applied here on the way from the runtime to the client."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from lineup_sdk.context import Snapshot
from lineup_sdk.errors import LineupError

__all__ = ["SurfaceClient", "surface_write_refused"]

SNAPSHOT = "session_data.snapshot"
CHANGED = "session_data.changed"


def surface_write_refused() -> LineupError:
    """What a Surface's `replace` gets this iteration (SPEC 5.5, 14): only handlers write
    session data; Surface writes wait for the mutation queue."""
    return LineupError(
        "session_data_write_not_allowed",
        "a Surface cannot write session data this iteration; a tool handler writes it",
        hint="change session data from a tool handler (ctx.session_data.replace)",
    )


class SurfaceClient:
    """One subscribed Surface listener over `rt.surface(conversation, scope)`.

    `seen` holds what the listener received, as `{frame, revision, data}` (a resync's
    `get()` arrives as a snapshot).
    """

    def __init__(self, surface: Any) -> None:
        self.surface = surface
        self.seen: list[dict[str, Any]] = []
        self._last = -1
        self._drop = 0
        self._lock = threading.RLock()
        self._generation = 0
        self._unsubscribe: Callable[[], None] | None = None

    def start(self) -> None:
        """Subscribe (the current snapshot arrives first)."""
        with self._lock:
            self._generation += 1
            generation = self._generation
        self._unsubscribe = self.surface.subscribe(
            lambda kind, snap: self._frame(generation, kind, snap)
        )

    def _deliver(self, kind: str, snap: Snapshot) -> None:
        if snap.revision <= self._last:
            return  # a duplicate or an older revision
        self._last = snap.revision
        self.seen.append({"frame": kind, "revision": snap.revision, "data": snap.data})

    def _frame(self, generation: int, kind: str, snap: Snapshot) -> None:
        with self._lock:
            if generation != self._generation:
                return  # a frame of a subscription this client already dropped
            if kind == CHANGED and self._drop > 0:
                self._drop -= 1  # lost on the way (the fault)
                return
            gap = kind == CHANGED and self._last >= 0 and snap.revision > self._last + 1
            if not gap:
                self._deliver(kind, snap)
        if gap:
            self._resync()

    def _resync(self) -> None:
        # never holds the lock across a runtime call: the new subscription's first frame
        # arrives on another thread while `subscribe` waits for it
        with self._lock:
            self._generation += 1  # what the old subscription still sends is ignored
            off, self._unsubscribe = self._unsubscribe, None
        if off is not None:
            off()
        snap = self.surface.get()
        with self._lock:
            self._deliver(SNAPSHOT, snap)
        self.start()

    def drop_frames(self, count: int) -> None:
        """The fault seam: lose the next `count` change frames."""
        with self._lock:
            self._drop += count

    def reconnect(self) -> None:
        """The bridge closed and came back: get again and resubscribe."""
        self._resync()

    def stop(self) -> None:
        with self._lock:
            self._generation += 1
            off, self._unsubscribe = self._unsubscribe, None
        if off is not None:
            off()
