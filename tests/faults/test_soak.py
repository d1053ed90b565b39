"""F20: crash/restart soak. A driver process runs a seeded random mix of todo, probe and
Pomodoro calls, Host events and clock moves across many conversations; it is `kill -9`ed
at random points or crashes at a random armed fault point; the database is checked raw,
reopened, settled and checked again. Acknowledged answers must be present, unchanged.

Reproducible by default: a fixed seed (`LINEUP_SOAK_SEED`, default 20261201; `random`
draws one, always printed) and a fixed number of cycles (`LINEUP_SOAK_CYCLES`, default 50;
`0` runs for `LINEUP_SOAK_SECONDS` instead). The seed fixes the workload, the kill points
and the armed crash points; how far a driver got before a SIGKILL landed still depends on
timing, as does the order of background steps:

    LINEUP_SOAK_SEED=random LINEUP_SOAK_CYCLES=200 python -m pytest tests/faults/test_soak.py -s
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
import time
from pathlib import Path
from typing import Any

from lineup_runtime_lite import VirtualClock
from lineup_runtime_lite.store import faults
from tests.faults import invariants, tally
from tests.faults.harness import Env

#: Answers that are never persisted (rejections before anything is stored).
REJECTED = ("invalid_params", "unknown_method", "call_id_conflict")
#: Where a soak cycle may crash instead of being killed from outside.
SOAK_POINTS = [p for p in faults.POINTS if not p.startswith(("outbox.", "recover."))]


def persisted(db: Path) -> dict[tuple[str, str], dict[str, Any]]:
    con = sqlite3.connect(db)
    try:
        rows = con.execute("SELECT call_id, stage, body FROM receipts").fetchall()
    finally:
        con.close()
    return {(r[0], r[1]): json.loads(r[2]) for r in rows}


def worker_processes(marker: str) -> list[int]:
    """Live worker processes whose command line mentions `marker` (Linux /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            stat = (entry / "stat").read_text().split()
        except OSError:
            continue
        if "lineup_sdk._worker" in cmd and marker in cmd and stat[2] != "Z":
            found.append(int(entry.name))
    return found


def test_F20_sigkill_at_random_points_of_a_mixed_workload(sqlite_env: Env) -> None:
    env = sqlite_env  # reads the file between kills (the crash points run on both)
    asked = os.environ.get("LINEUP_SOAK_SEED", "20261201")
    seed = random.SystemRandom().randrange(10**9) if asked == "random" else int(asked)
    seconds = float(os.environ.get("LINEUP_SOAK_SECONDS", "35"))
    cycles_wanted = int(os.environ.get("LINEUP_SOAK_CYCLES", "50"))
    repro = (
        f"LINEUP_SOAK_SEED={seed} LINEUP_SOAK_CYCLES=<cycles> "
        "python -m pytest tests/faults/test_soak.py -s"
    )
    print(f"\nsoak seed={seed} ({repro})")
    rnd = random.Random(seed)
    acked: dict[tuple[str, str], dict[str, Any]] = {}
    rejected: set[str] = set()
    events = clock_moves = kills = crashes = clean = 0
    end = time.monotonic() + seconds
    cycle = 0
    while (cycles_wanted and cycle < cycles_wanted) or (
        not cycles_wanted and time.monotonic() < end
    ):
        spec: dict[str, Any] = {
            "seed": rnd.randrange(2**32),
            "prefix": f"k{cycle}",
            "steps": rnd.randint(15, 70),
            "conversations": 10,
        }
        kill_after = None
        if rnd.random() < 0.6:
            kill_after = rnd.randint(2, spec["steps"])  # kill -9 from outside
        else:  # or crash inside the runtime at a random armed point
            spec["arm"] = [rnd.choice(SOAK_POINTS), "crash", rnd.randint(0, 30)]
        context = f"seed={seed} cycle={cycle} spec={spec} kill_after={kill_after}"
        run = env.drive(soak=spec, kill_after=kill_after)
        if run.returncode == -9:
            kills += 1
        elif run.returncode == 137:
            crashes += 1
            tally.crashed(spec["arm"][0])
        else:
            clean += 1
        for line in run.lines:
            if line.get("kind") == "call":
                msg = line["msg"]
                if msg["kind"] == "error" and msg["error"]["code"] in REJECTED:
                    rejected.add(msg["call_id"])
                else:
                    acked[(msg["call_id"], msg["stage"])] = msg
            elif line.get("kind") == "event":
                events += 1
            elif line.get("kind") == "advance":
                clock_moves += 1
        try:
            invariants.check_db(env.db)  # the raw state right after the crash
            stored = persisted(env.db)
            for key, msg in acked.items():  # acknowledged ⇒ present, never rewritten
                assert stored.get(key) == msg, f"acknowledged {key} is missing or changed"
            with env.open() as rt:  # restart: recovery, then the full check
                rt.settle()
                invariants.check(rt)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{context}\nreplay: {repro}") from exc
        cycle += 1
    # in the end every call reaches exactly one final: let every deadline pass
    with env.open(clock=VirtualClock(env.saved_now() + 4 * 60 * 60_000)) as rt:
        rt.settle()
        stats = invariants.check(rt)
        dump = rt.store_dump()
        calls = {r[0] for r in dump["calls"]}
    assert stats.pending == 0 and stats.finals == stats.calls, (stats, seed)
    assert not (rejected & calls), "a rejected call was stored"
    deadline = time.monotonic() + 10
    while worker_processes(str(env.db.parent)):  # a killed runtime leaves no worker behind
        assert time.monotonic() < deadline, "orphaned workers"
        time.sleep(0.05)
    tally.COUNTS["soak_cycles"] += cycle
    tally.COUNTS["soak_kill9"] += kills
    tally.COUNTS["soak_calls_checked"] += stats.calls
    tally.COUNTS["soak_host_events"] += events
    tally.COUNTS["soak_clock_moves"] += clock_moves
    note = (
        f"soak: seed={seed} cycles={cycle} (kill -9: {kills}, crash at a fault point: "
        f"{crashes}, clean: {clean}); calls checked={stats.calls} finals={stats.finals} "
        f"receipts={stats.receipts} outbox={stats.outbox} operations={stats.operations} "
        f"host events={events} clock moves={clock_moves}; acknowledged messages={len(acked)} "
        f"all present; replay: LINEUP_SOAK_SEED={seed} LINEUP_SOAK_CYCLES={cycle} "
        "python -m pytest tests/faults/test_soak.py"
    )
    tally.NOTES.append(note)
    print(note)
    assert cycle >= 3, "the soak ran too few cycles to mean anything"
