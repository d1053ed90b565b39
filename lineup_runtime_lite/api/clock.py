"""Clocks: real wall time, or a virtual clock that only moves when told (simulation, tests)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Protocol

from lineup_runtime_lite.core.timestamps import LAST_MS, format_ts

__all__ = ["LAST_MS", "Clock", "RealClock", "VirtualClock", "format_ts", "parse_duration"]


def parse_duration(text: str) -> int:
    """`"25m"`, `"90s"`, `"1h30m"`, `"500ms"` → milliseconds.

    Raises:
        ValueError: not a duration.
    """
    import re

    units = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
    parts = re.findall(r"(\d+)(ms|s|m|h|d)", text.strip())
    if not parts or "".join(n + u for n, u in parts) != text.strip().replace(" ", ""):
        raise ValueError(f"{text!r} is not a duration like 25m, 90s, 1h30m or 500ms")
    return sum(int(n) * units[u] for n, u in parts)


class Clock(Protocol):
    """What the runtime needs from time: wall time for facts, a way to be woken."""

    virtual: bool

    def now_ms(self) -> int:
        """Wall-clock time in Unix milliseconds."""
        ...

    def on_advance(self, listener: Callable[[int], None]) -> None:
        """Call `listener(now_ms)` after the clock jumps (virtual clocks only)."""
        ...


class RealClock:
    """The system clock."""

    virtual = False

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def on_advance(self, listener: Callable[[int], None]) -> None:
        """Real time never jumps on request; nothing to register."""


class VirtualClock:
    """A clock that moves only through `advance()`; its time persists with the database."""

    virtual = True

    def __init__(self, start_ms: int = 1_767_225_600_000) -> None:  # 2026-01-01T00:00:00Z
        self._now = start_ms
        self._lock = threading.Lock()
        self._listeners: list[Callable[[int], None]] = []

    def now_ms(self) -> int:
        with self._lock:
            return self._now

    def set(self, ms: int) -> None:
        """Restore a persisted time (never moves backwards)."""
        with self._lock:
            self._now = max(self._now, ms)

    def on_advance(self, listener: Callable[[int], None]) -> None:
        self._listeners.append(listener)

    def advance(self, ms: int) -> int:
        """Move forward by `ms` and let the runtime fire whatever fell due; returns now."""
        if ms < 0:
            raise ValueError("a virtual clock never moves backwards")
        with self._lock:
            self._now += ms
            now = self._now
        for listener in list(self._listeners):
            listener(now)
        return now
