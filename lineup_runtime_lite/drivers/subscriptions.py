"""The Surface's session-data subscriptions: snapshot first, then strictly increasing
revisions (the CAS replace itself is `deliveries.hold_replace`, committed with its
delivery's answer by `deliveries.commit_pending`)."""

from __future__ import annotations

import contextvars
import logging
import threading
from collections import deque
from collections.abc import Callable

from lineup_sdk.context import MAX_SESSION_DATA, Snapshot

__all__ = ["MAX_SESSION_DATA", "Listener", "SubscriptionHub"]

log = logging.getLogger("lineup.runtime")
Listener = Callable[[str, Snapshot], None]
#: The subscription whose listener is running (in its thread, and in the runtime calls it
#: makes: the sync `Runtime` runs them in a copy of the caller's context).
_DELIVERING: contextvars.ContextVar[_Subscription | None] = contextvars.ContextVar(
    "lineup_delivering", default=None
)


class _Subscription:
    """One Surface listener: its frames in order, delivered by its own thread.

    The thread runs only while frames wait, so a slow listener delays only its own frames,
    and a listener may call the runtime's API (it never runs on the runtime's loop).
    """

    def __init__(self, listener: Listener) -> None:
        self.listener = listener
        self._frames: deque[tuple[str, Snapshot]] = deque()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self.closed = False
        #: The newest revision queued (a revision relayed from another node comes once).
        self.revision = -1

    def push(self, kind: str, snap: Snapshot) -> None:
        with self._cond:
            if self.closed:
                return
            self.revision = max(self.revision, snap.revision)
            self._frames.append((kind, snap))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._drain, name="lineup-surface-listener", daemon=True
                )
                self._thread.start()

    def _drain(self) -> None:
        while True:
            with self._cond:
                if not self._frames or self.closed:
                    self._frames.clear()
                    self._thread = None
                    self._cond.notify_all()
                    return
                kind, snap = self._frames.popleft()
            token = _DELIVERING.set(self)
            try:
                self.listener(kind, snap)
            except Exception:  # a Surface listener never breaks the runtime
                log.warning("a session-data listener failed", exc_info=True)
            finally:
                _DELIVERING.reset(token)

    def delivering_here(self) -> bool:
        """Whether the caller is this subscription's listener: its thread, or a runtime
        call that listener is waiting for."""
        return self._thread is threading.current_thread() or _DELIVERING.get() is self

    def drained(self) -> bool:
        with self._cond:
            return self._thread is None

    def wait(self) -> None:
        """Until every frame pushed so far was delivered (not from the listener itself)."""
        with self._cond:
            if self._thread is threading.current_thread():
                return  # a listener waiting on itself would wait forever
            while self._thread is not None:
                self._cond.wait()

    def close(self) -> None:
        with self._cond:
            self.closed = True


class SubscriptionHub:
    """Surface listeners per `(scope, conversation_id)`.

    Registration and change frames are queued on the runtime's loop thread, so they share
    the session's serial order; each subscription's own thread then calls its listener
    (in that order), off the loop.
    """

    def __init__(self) -> None:
        self._subs: dict[tuple[str, str], dict[int, _Subscription]] = {}
        self._next = 0
        #: Removed subscriptions whose listener is still running (one that unsubscribes
        #: itself, as a client resyncing does): `pending` waits for them too.
        self._leaving: list[_Subscription] = []

    def add(self, key: tuple[str, str], listener: Listener, first: Snapshot) -> int:
        """Register and queue the current snapshot as the first frame."""
        self._next += 1
        sub = _Subscription(listener)
        self._subs.setdefault(key, {})[self._next] = sub
        sub.push("session_data.snapshot", first)
        return self._next

    def remove(self, key: tuple[str, str], token: int) -> None:
        subs = self._subs.get(key)
        if subs is None:
            return
        sub = subs.pop(token, None)
        if sub is not None:
            sub.close()
            self._leaving = [s for s in self._leaving if not s.drained()]
            if not sub.drained():
                self._leaving.append(sub)
        if not subs:
            del self._subs[key]

    def changed(self, key: tuple[str, str], snap: Snapshot) -> None:
        """Queue a committed revision for every listener of `key`."""
        for sub in list(self._subs.get(key, {}).values()):
            sub.push("session_data.changed", snap)

    def changed_elsewhere(self, key: tuple[str, str], snap: Snapshot) -> None:
        """A revision another node committed: queued for the listeners of `key` that have
        not seen it (SPEC 15: a subscription on a node that does not own the session)."""
        for sub in list(self._subs.get(key, {}).values()):
            if snap.revision > sub.revision:
                sub.push("session_data.changed", snap)

    def watched(self, key: tuple[str, str]) -> bool:
        return bool(self._subs.get(key))

    def subscription(self, key: tuple[str, str], token: int) -> _Subscription | None:
        return self._subs.get(key, {}).get(token)

    def pending(self) -> list[_Subscription]:
        """Subscriptions whose listeners still have frames to deliver (except the one
        whose listener is calling: it cannot wait for itself). Any thread."""
        live = [s for subs in list(self._subs.values()) for s in list(subs.values())]
        return [
            s for s in live + list(self._leaving) if not s.drained() and not s.delivering_here()
        ]

    def close(self) -> None:
        """Drop every listener (frames not yet delivered are dropped too)."""
        for subs in self._subs.values():
            for sub in subs.values():
                sub.close()
        self._subs.clear()
        self._leaving = []

    def __len__(self) -> int:
        return sum(len(subs) for subs in self._subs.values())
