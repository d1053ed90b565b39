"""CPU time and memory of a process tree, read from `/proc` (no rlimit: the budget spans a
worker's whole life and every process it forks).

Memory is counted by PSS (each shared page divided among the processes that map it) and USS
(the pages only that process maps), with RSS beside them: RSS counts a page shared by a
launcher and its worker, or by two workers, once per process, so summing RSS over several
workers overstates what they cost (SPEC 13.3, the conversations row).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

__all__ = [
    "Memory",
    "parse_smaps_rollup",
    "process_memory",
    "tree_cpu_s",
    "tree_memory",
    "tree_pids",
]

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


Table = tuple[dict[int, list[int]], dict[int, int]]

#: The last table read and when (`time.monotonic()`): one worker's heartbeat may reuse
#: what another's read a moment ago (`tree_cpu_s`'s `max_age_s`).
_last: tuple[float, Table] | None = None


def _table(max_age_s: float = 0.0) -> Table | None:
    """Children by parent and CPU ticks by pid of every live process, read at most
    `max_age_s` ago; None without `/proc`."""
    global _last
    now = time.monotonic()
    last = _last
    if last is not None and now - last[0] < max_age_s:
        return last[1]
    table = _read_table()
    if table is not None:
        _last = (now, table)
    return table


def _read_table() -> Table | None:
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
    return children, ticks


def _walk(root: int, children: dict[int, list[int]]) -> list[int]:
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, ()))
    return out


def tree_cpu_s(root: int, max_age_s: float = 0.0) -> float | None:
    """CPU-seconds used by `root` and every live descendant (and what they reaped), from
    a table of every process read at most `max_age_s` ago (a read costs one `stat` per
    process on the machine: 50 session workers' heartbeats each reading their own spent
    a tenth of the runtime's CPU); None where `/proc` is not there to read (not Linux),
    or `root` started after that read."""
    table = _table(max_age_s)
    if table is None or root not in table[1]:
        return None
    children, ticks = table
    return sum(ticks.get(pid, 0) for pid in _walk(root, children)) / _TICK


def tree_pids(root: int) -> list[int]:
    """`root` and its live descendants, root first ([] where `root` is gone or there is
    no `/proc`)."""
    table = _table()
    if table is None or root not in table[1]:
        return []
    return _walk(root, table[0])


@dataclass(frozen=True)
class Memory:
    """Memory of one process or a sum of several, in KiB: `pss` (shared pages divided
    among their users), `uss` (private pages only), `rss` (every resident page, shared ones
    counted in full)."""

    rss: int = 0
    pss: int = 0
    uss: int = 0

    def __add__(self, other: Memory) -> Memory:
        return Memory(self.rss + other.rss, self.pss + other.pss, self.uss + other.uss)

    def as_kib(self) -> dict[str, int]:
        return {"pss_kib": self.pss, "uss_kib": self.uss, "rss_kib": self.rss}


def parse_smaps_rollup(text: str) -> Memory | None:
    """The `Rss`, `Pss` and `Private_Clean + Private_Dirty` (USS) lines of a
    `/proc/<pid>/smaps_rollup`; None when it has no `Pss` line (not that file, or a
    kernel thread's empty one)."""
    fields: dict[str, int] = {}
    for line in text.splitlines():
        name, sep, rest = line.partition(":")
        if not sep:
            continue
        parts = rest.split()
        if len(parts) == 2 and parts[1] == "kB" and parts[0].isdigit():
            fields[name] = int(parts[0])
    if "Pss" not in fields:
        return None
    return Memory(
        rss=fields.get("Rss", 0),
        pss=fields["Pss"],
        uss=fields.get("Private_Clean", 0) + fields.get("Private_Dirty", 0),
    )


def process_memory(pid: int) -> Memory | None:
    """One process's memory from its `smaps_rollup` (Linux ≥ 4.14); None where it cannot
    be read (gone, not ours to read, or no such file on this platform)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            return parse_smaps_rollup(fh.read())
    except OSError:
        return None


def tree_memory(root: int) -> Memory | None:
    """The summed memory of `root` and its live descendants (a worker's launcher, the
    namespace's init and whatever it started); None where none of them can be read."""
    got = [m for m in (process_memory(pid) for pid in tree_pids(root)) if m is not None]
    if not got:
        return None
    total = Memory()
    for m in got:
        total += m
    return total
