"""Named fault points: a test-only hook that can fail (raise) or crash (exit) the runtime,
or make the disk fail as SQLite reports it (full, I/O error, read-only).

In production nothing is armed and `hit()` is a dictionary lookup.
"""

from __future__ import annotations

import os
import sqlite3
from collections import Counter

__all__ = ["DISK_MODES", "POINTS", "FaultInjected", "arm", "disarm", "fired", "hit", "hits"]

#: Every named point. A test asserts each one is exercised by the suite.
POINTS: tuple[str, ...] = (
    "commit.before",  # before BEGIN of a state change
    "commit.after_write",  # inside the transaction, after the writes, before COMMIT
    "commit.after",  # after COMMIT, before any reconcile step
    "deliver.before_send",  # worker delivery: after `delivered` committed, before sending
    "deliver.after_reply",  # worker delivery: reply received, before the result commit
    "host.reconcile",  # before the Host simulator is asked to act
    "host.after_intent",  # the Host acted; before the intent is marked delivered
    "outbox.fetch",  # while the Agent drains the outbox
    "outbox.ack",  # the Agent has the messages; before the ack is committed
    "recover.step",  # between recovery steps
)


class FaultInjected(Exception):
    """Raised at an armed point in `raise` mode."""


#: Disk failures as SQLite raises them, for the modes that simulate one.
DISK_MODES: dict[str, str] = {
    "full": "database or disk is full",
    "ioerror": "disk I/O error",
    "readonly": "attempt to write a readonly database",
}


_ARMED: dict[str, tuple[str, int]] = {}
_HITS: Counter[str] = Counter()
_FIRED: Counter[str] = Counter()


def arm(point: str, mode: str = "raise", *, after: int = 0) -> None:
    """Arm `point` to fail on its `after`+1-th hit: `raise` FaultInjected, `crash`
    (os._exit), or a disk failure (`full`, `ioerror`, `readonly`: the
    `sqlite3.OperationalError` SQLite itself would raise)."""
    if point not in POINTS:
        raise ValueError(f"unknown fault point {point!r}")
    if mode not in ("raise", "crash", *DISK_MODES):
        raise ValueError(f"mode is raise, crash or one of {sorted(DISK_MODES)}")
    _ARMED[point] = (mode, after)


def disarm(point: str | None = None) -> None:
    """Disarm one point, or every point."""
    if point is None:
        _ARMED.clear()
    else:
        _ARMED.pop(point, None)


def hits() -> Counter[str]:
    """How often each point was reached (armed or not) in this process."""
    return Counter(_HITS)


def fired() -> Counter[str]:
    """How often each point actually failed in `raise` mode in this process (a `crash`
    ends the process, so its parent counts those)."""
    return Counter(_FIRED)


def hit(point: str) -> None:
    """Mark `point`; fail or crash here if it is armed."""
    _HITS[point] += 1
    armed = _ARMED.get(point)
    if armed is None:
        return
    mode, after = armed
    if after > 0:
        _ARMED[point] = (mode, after - 1)
        return
    del _ARMED[point]
    if mode == "crash":
        os._exit(137)
    _FIRED[point] += 1
    if mode in DISK_MODES:
        raise sqlite3.OperationalError(DISK_MODES[mode])
    raise FaultInjected(point)
