"""Memory of worker trees by PSS and USS, RSS beside them (SPEC 13.3, the conversations row):
the `/proc/<pid>/smaps_rollup` parser on fixed texts, and the live sums on this process."""

from __future__ import annotations

import os
import sys
import time

import pytest

from lineup_runtime_lite.processes import proctree
from lineup_runtime_lite.processes.proctree import (
    Memory,
    parse_smaps_rollup,
    process_memory,
    tree_memory,
    tree_pids,
)

ROLLUP = """\
55a617c3b000-7ffc3aeed000 ---p 00000000 00:00 0                          [rollup]
Rss:               48000 kB
Pss:               26400 kB
Pss_Dirty:         20000 kB
Pss_Anon:          19000 kB
Pss_File:           7400 kB
Pss_Shmem:             0 kB
Shared_Clean:      24000 kB
Shared_Dirty:        100 kB
Private_Clean:      3000 kB
Private_Dirty:     20900 kB
Referenced:        48000 kB
Anonymous:         19000 kB
Swap:                  0 kB
SwapPss:               0 kB
Locked:                0 kB
"""


def test_a_rollup_gives_rss_pss_and_private_pages_as_uss() -> None:
    assert parse_smaps_rollup(ROLLUP) == Memory(rss=48000, pss=26400, uss=23900)


def test_the_header_line_and_pss_subtotals_are_not_taken_for_totals() -> None:
    # `Pss_Dirty` and the rest must not overwrite `Pss`; the header's colons are no field
    shuffled = "\n".join(reversed(ROLLUP.splitlines()))
    assert parse_smaps_rollup(shuffled) == Memory(rss=48000, pss=26400, uss=23900)


@pytest.mark.parametrize(
    "text",
    ["", "Rss: 12 kB\n", "00400000-00401000 r-xp 00000000 08:01 1 /bin/x\n", "Pss: lots kB\n"],
)
def test_a_text_without_a_pss_line_gives_none(text: str) -> None:
    assert parse_smaps_rollup(text) is None


def test_memory_adds_field_by_field_and_reports_kib() -> None:
    total = Memory(10, 6, 4) + Memory(20, 9, 7)
    assert total == Memory(rss=30, pss=15, uss=11)
    assert total.as_kib() == {"pss_kib": 15, "uss_kib": 11, "rss_kib": 30}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_live_tree_is_summed_over_every_process_in_it() -> None:
    own = process_memory(os.getpid())
    assert own is not None and 0 < own.uss <= own.pss <= own.rss
    assert tree_pids(os.getpid())[0] == os.getpid()
    # the pytest process's tree holds at least itself: its sum is no less than its own
    tree = tree_memory(os.getpid())
    assert tree is not None and tree.rss >= own.rss // 2
    assert tree_pids(2**22 + 7) == [] and tree_memory(2**22 + 7) is None


def test_a_tree_sums_every_process_it_can_read_and_skips_the_rest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a launcher (10), its namespace's init (11) and a child that is gone by now (12)
    monkeypatch.setattr(proctree, "tree_pids", lambda root: [10, 11, 12])
    each = {10: Memory(6000, 4400, 900), 11: Memory(40000, 22000, 21000), 12: None}
    monkeypatch.setattr(proctree, "process_memory", each.get)
    assert proctree.tree_memory(10) == Memory(rss=46000, pss=26400, uss=21900)
    monkeypatch.setattr(proctree, "process_memory", lambda pid: None)
    assert proctree.tree_memory(10) is None


def test_heartbeats_within_max_age_share_one_read_of_the_process_table(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each session worker's heartbeat reads its CPU time from a table of every process;
    50 of them each reading their own cost the runtime a tenth of its CPU (issue 43). A
    read younger than `max_age_s` is shared; an older one, or `max_age_s=0`, is read anew."""
    reads: list[int] = []
    now = [100.0]
    pid = os.getpid()

    def read_table() -> tuple[dict[int, list[int]], dict[int, int]]:
        reads.append(1)
        return {}, {pid: 100 * len(reads)}

    monkeypatch.setattr(proctree, "_read_table", read_table)
    monkeypatch.setattr(proctree, "_last", None)
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    assert proctree.tree_cpu_s(pid, max_age_s=0.5) == 100 / proctree._TICK
    now[0] += 0.49
    assert proctree.tree_cpu_s(pid, max_age_s=0.5) == 100 / proctree._TICK  # shared
    assert len(reads) == 1
    now[0] += 0.02
    assert proctree.tree_cpu_s(pid, max_age_s=0.5) == 200 / proctree._TICK  # too old
    assert proctree.tree_cpu_s(pid) == 300 / proctree._TICK  # max_age_s=0: always read
    assert len(reads) == 3
