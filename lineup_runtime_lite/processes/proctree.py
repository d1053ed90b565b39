"""CPU time of a process tree, read from `/proc` (no rlimit: the budget spans a worker's
whole life and every process it forks)."""

from __future__ import annotations

import os

__all__ = ["tree_cpu_s"]

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _stat(pid: str) -> tuple[int, int] | None:
    """`(ppid, CPU ticks)` of one process: its own user and system time plus that of the
    children it has reaped (so a child that ran and exited is counted once, by its parent)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read()
    except OSError:
        return None
    fields = raw[raw.rfind(b")") + 2 :].split()  # the name may hold spaces and brackets
    try:
        return int(fields[1]), sum(int(f) for f in fields[11:15])
    except (IndexError, ValueError):
        return None


def tree_cpu_s(root: int) -> float | None:
    """CPU-seconds used by `root` and every live descendant (and what they reaped);
    None where `/proc` is not there to read (not Linux)."""
    try:
        names = [n for n in os.listdir("/proc") if n.isdigit()]
    except OSError:
        return None
    children: dict[int, list[int]] = {}
    ticks: dict[int, int] = {}
    for name in names:
        got = _stat(name)
        if got is not None:
            pid = int(name)
            children.setdefault(got[0], []).append(pid)
            ticks[pid] = got[1]
    if root not in ticks:
        return None
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += ticks.get(pid, 0)
        todo.extend(children.get(pid, ()))
    return total / _TICK
