"""Counters the fault suite adds to, printed at the end of the run.

Under pytest-xdist each worker keeps its own counters (and `faults.fired()` is per
process): a worker hands them to the controller at its session's end (`snapshot`, in
`workeroutput`) and the controller adds them up (`merge`) before printing the summary
(the hooks are in tests/conftest.py, the conftest the controller loads).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from lineup_runtime_lite.store import faults

__all__ = ["COUNTS", "CRASHED", "NOTES", "crashed", "merge", "snapshot", "summary"]

#: `raise_faults`, `crash_faults`, `kills`, `restarts`, `calls_checked`, `events_checked`, ...
COUNTS: Counter[str] = Counter()
#: Points that crashed a driver process (`os._exit` at an armed point).
CRASHED: Counter[str] = Counter()
#: Free-form lines (the soak's seed and command).
NOTES: list[str] = []
#: Points that raised in other processes: the xdist workers, added up by `merge`.
_FIRED_ELSEWHERE: Counter[str] = Counter()


def crashed(point: str) -> None:
    """A driver process exited at `point` in crash mode."""
    CRASHED[point] += 1
    COUNTS["crash_faults"] += 1


def snapshot() -> dict[str, Any]:
    """This process's figures, as plain JSON-able values (what a worker sends)."""
    return {
        "counts": dict(COUNTS),
        "crashed": dict(CRASHED),
        "notes": list(NOTES),
        "fired": dict(faults.fired() + _FIRED_ELSEWHERE),
    }


def merge(figures: dict[str, Any]) -> None:
    """Add a worker's `snapshot()` to this process's figures."""
    COUNTS.update(figures.get("counts", {}))
    CRASHED.update(figures.get("crashed", {}))
    NOTES.extend(figures.get("notes", []))
    _FIRED_ELSEWHERE.update(figures.get("fired", {}))


def summary() -> list[str]:
    fired = faults.fired() + _FIRED_ELSEWHERE
    if not (COUNTS or fired or NOTES):
        return []
    lines = [
        f"fault points: {len(faults.POINTS)}; raised in-process: {sum(fired.values())} "
        f"at {len(fired)} points; crashed a process: {sum(CRASHED.values())} "
        f"at {len(CRASHED)} points",
    ]
    lines += [f"  {p}: raise {fired[p]}, crash {CRASHED[p]}" for p in faults.POINTS]
    lines += [f"{k}: {v}" for k, v in sorted(COUNTS.items())]
    lines += NOTES
    return lines
