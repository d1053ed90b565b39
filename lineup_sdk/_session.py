"""Client-side session-data subscriber: drop duplicates, resync on a gap or reconnect."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from lineup_sdk.context import Snapshot

__all__ = ["SessionDataSource", "SessionDataSubscriber"]


class SessionDataSource(Protocol):
    """What the Surface's bridge offers: get and subscribe."""

    def get(self) -> Snapshot: ...

    def subscribe(self, listener: Callable[[str, Snapshot], None]) -> Callable[[], None]: ...


class SessionDataSubscriber:
    """Keeps a view of one session's data with strictly increasing revisions.

    Frames with a revision at or below the last applied one are ignored; a frame that skips
    a revision (or a bridge reconnect) drops the subscription, reads again with `get()`,
    and subscribes anew.

    Args:
        source: The bridge's get/subscribe.
        on_change: Called with every snapshot applied, in revision order.
    """

    def __init__(self, source: SessionDataSource, on_change: Callable[[Snapshot], None]) -> None:
        self._source = source
        self._on_change = on_change
        self._unsubscribe: Callable[[], None] | None = None
        self.current: Snapshot | None = None
        self.resyncs = 0

    def start(self) -> None:
        """Read, then subscribe (the first frame may already be newer)."""
        self._apply(self._source.get())
        self._unsubscribe = self._source.subscribe(self._frame)

    def stop(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None

    def reconnect(self) -> None:
        """The bridge reconnected: resync from scratch."""
        self._resync()

    def _apply(self, snap: Snapshot) -> None:
        if self.current is not None and snap.revision <= self.current.revision:
            return
        self.current = snap
        self._on_change(snap)

    def _frame(self, kind: str, snap: Snapshot) -> None:
        cur = self.current
        if kind == "session_data.snapshot" or cur is None:
            self._apply(snap)
        elif snap.revision <= cur.revision:
            return  # duplicate or older
        elif snap.revision == cur.revision + 1:
            self._apply(snap)
        else:
            self._resync()

    def _resync(self) -> None:
        self.resyncs += 1
        self.stop()
        self.start()
