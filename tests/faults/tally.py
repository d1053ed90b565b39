"""Counters the fault suite adds to, printed at the end of the run."""

from __future__ import annotations

from collections import Counter

from lineup_runtime_lite.store import faults

__all__ = ["COUNTS", "CRASHED", "NOTES", "crashed", "summary"]

#: `raise_faults`, `crash_faults`, `kills`, `restarts`, `calls_checked`, `events_checked`, ...
COUNTS: Counter[str] = Counter()
#: Points that crashed a driver process (`os._exit` at an armed point).
CRASHED: Counter[str] = Counter()
#: Free-form lines (the soak's seed and command).
NOTES: list[str] = []


def crashed(point: str) -> None:
    """A driver process exited at `point` in crash mode."""
    CRASHED[point] += 1
    COUNTS["crash_faults"] += 1


def summary() -> list[str]:
    fired = faults.fired()
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
