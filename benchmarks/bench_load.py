"""Load: many conversations calling one runtime at once (issue 6, item 6).

200 conversations × 50 calls each, concurrently (one thread per conversation, like one
Agent turn loop each), on one runtime over a real database file (WAL, synchronous=FULL).
Each conversation adds and lists to-do items (the `todo` template: a worker, session data
CAS) and starts and interrupts a Pomodoro (a runtime tool with a Host round trip).

`--mode closed` (default): each conversation waits for a to-do call's final answer before
its next call, as an Agent does. `--mode open`: every conversation fires its 50 calls
back to back (a burst; answers are mostly `accepted` and queue in the session).

Every conversation's to-do session is made ready and warmed first (untimed), so a timed
to-do call on it answers with its final result. The same workload then runs, in the same
process and with the same bundles, on a `:memory:` database: the file/`:memory:` ratio
says how much the disk costs.

Reports throughput, p50/p99 of `Runtime.call` and of the time to the final answer, peak
memory of the runtime and its workers (its child processes), a raw SQLite commit floor
measured in the same run, and the fault suite's invariant check over the database file.
Only the public API is used (nothing from `lineup_runtime_lite.internals`): calls, `settle()`, `call_record()`, the
outbox and session data; the invariant check reads the closed file.

Run: python benchmarks/bench_load.py [--conversations 200] [--calls 50] [--mode closed|open]
         [--no-memory]
"""

from __future__ import annotations

import argparse
import json
import resource
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def build(tmp: Path) -> tuple[list[Path], Any]:
    from lineup_build.build import build_project
    from lineup_build.init import init_project
    from lineup_build.signing import key_from_seed
    from lineup_build.trust import TrustedKey, TrustStore

    key = key_from_seed(bytes(range(32)))
    bundles = []
    for template in ("todo", "pomodoro"):
        root = tmp / template
        init_project(root, template=template, scope=template)
        result = build_project(root, signing_key=key)
        assert result.ok and result.bundle is not None, result.diagnostics
        bundles.append(result.bundle)
    trust = TrustStore.from_keys([TrustedKey(key.key_id, key.public_raw, ("*",), None)])
    return bundles, trust


def plan(conv: int, calls: int) -> list[tuple[str, str, dict[str, Any]]]:
    """One conversation's calls: to-dos throughout, a Pomodoro started and interrupted."""
    out: list[tuple[str, str, dict[str, Any]]] = []
    for i in range(calls):
        if i == calls // 5:
            out.append((f"c{conv}-{i}", "pomodoro.start", {"minutes": 25}))
        elif i == calls * 4 // 5:
            out.append((f"c{conv}-{i}", "pomodoro.interrupt", {}))
        elif i % 4 == 3:
            out.append((f"c{conv}-{i}", "todo.list", {}))
        else:
            out.append((f"c{conv}-{i}", "todo.add", {"title": f"item {i} of conversation {conv}"}))
    return out


def peak_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def sqlite_floor(path: Path, n: int) -> float:
    """Commits/s of raw SQLite, WAL + synchronous=FULL, 3 small rows per transaction."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, k TEXT, body TEXT)")
    body = "x" * 200
    t0 = time.perf_counter()
    for i in range(n):
        db.execute("BEGIN IMMEDIATE")
        for j in range(3):
            db.execute("INSERT INTO t (k, body) VALUES (?, ?)", (f"{i}:{j}", body))
        db.execute("COMMIT")
    elapsed = time.perf_counter() - t0
    db.close()
    return n / elapsed


def wait_final(rt: Any, call_id: str, *, timeout_s: float = 60.0) -> dict[str, Any]:
    """Poll the call's stored messages (`Runtime.call_record`) until its final answer."""
    deadline = time.monotonic() + timeout_s
    pause = 0.0005
    while True:
        record = rt.call_record(call_id)
        if record and record["messages"] and record["messages"][-1]["kind"] != "receipt":
            return dict(record["messages"][-1])
        if time.monotonic() > deadline:
            raise TimeoutError(f"{call_id} has no final answer after {timeout_s}s")
        time.sleep(pause)
        pause = min(pause * 2, 0.01)


def child_pids() -> list[int]:
    """Every live descendant of this process (the runtime's workers and their trees)."""
    import os

    out: list[int] = []
    todo = [os.getpid()]
    while todo:
        pid = todo.pop()
        try:
            tasks = list(Path(f"/proc/{pid}/task").iterdir())
        except OSError:
            continue
        for task in tasks:
            try:
                kids = [int(x) for x in (task / "children").read_text().split()]
            except OSError:
                continue
            out.extend(kids)
            todo.extend(kids)
    return out


def at_ms(stamp: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() * 1000


def run(
    db_path: Path | str, bundles: list[Path], trust: Any, conversations: int, calls: int, mode: str
) -> dict[str, Any]:
    from lineup_runtime_lite import HostSimulator, Runtime

    rt = Runtime.open(db_path, trust=trust, host=HostSimulator("auto"))
    worker_peak: dict[int, int] = {}
    try:
        for bundle in bundles:
            rt.install(bundle)
        for conv in range(conversations):  # untimed: every to-do session ready and warm
            rt.call(f"warm{conv}", f"conv{conv}", "todo.list", {})
        rt.settle()
        for conv in range(conversations):
            wait_final(rt, f"warm{conv}")
        latencies: list[list[float]] = [[] for _ in range(conversations)]
        to_final: list[list[float]] = [[] for _ in range(conversations)]
        submitted: dict[str, float] = {}
        stages: list[Counter[str]] = [Counter() for _ in range(conversations)]
        errors: list[BaseException] = []
        barrier = threading.Barrier(conversations + 1)

        def agent(conv: int) -> None:
            try:
                barrier.wait()
                for call_id, method, params in plan(conv, calls):
                    t = time.perf_counter()
                    submitted[call_id] = time.time() * 1000
                    msg = rt.call(call_id, f"conv{conv}", method, params)
                    latencies[conv].append(time.perf_counter() - t)
                    stages[conv][msg["stage"]] += 1
                    if mode == "closed" and method.startswith("todo."):
                        if msg["kind"] == "receipt":
                            wait_final(rt, call_id)
                        to_final[conv].append(time.perf_counter() - t)
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=agent, args=(c,)) for c in range(conversations)]
        for t in threads:
            t.start()
        barrier.wait()
        t0 = time.perf_counter()
        done = threading.Event()

        def sample_workers() -> None:
            while not done.is_set():
                for pid in child_pids():
                    worker_peak[pid] = max(worker_peak.get(pid, 0), peak_kb(pid))
                done.wait(0.2)

        sampler = threading.Thread(target=sample_workers, daemon=True)
        sampler.start()
        for t in threads:
            t.join()
        answered = time.perf_counter() - t0
        rt.settle()  # every queued call delivered, every final committed
        settled = time.perf_counter() - t0
        done.set()
        sampler.join()
        if errors:
            raise errors[0]
        all_lat = sorted(x for lat in latencies for x in lat)
        total = len(all_lat)
        finals: Counter[str] = Counter()
        final_lat = sorted(x for lat in to_final for x in lat)
        outbox = rt.outbox.all()
        for m in outbox:
            if m["kind"] != "receipt":
                finals[m["call_id"]] += 1
                if mode == "open" and m["app_scope"] == "todo" and m["call_id"] in submitted:
                    final_lat.append(max(0.0, at_ms(m["at"]) - submitted[m["call_id"]]) / 1000)
        final_lat.sort()
        timed = [call_id for c in range(conversations) for call_id, _, _ in plan(c, calls)]
        unanswered = [call_id for call_id in timed if finals[call_id] != 1]
        items_ok = all(
            len(((rt.surface(f"conv{c}", "todo").get().data) or {}).get("items", []))
            == sum(1 for _, m, _ in plan(c, calls) if m == "todo.add")
            for c in range(conversations)
        )
        mix: Counter[str] = Counter()
        for s in stages:
            mix.update(s)
        return {
            "mode": mode,
            "conversations": conversations,
            "calls": total,
            "wall_s_until_answered": answered,
            "wall_s_until_settled": settled,
            "throughput_calls_per_s": total / settled,
            "call_p50_ms": statistics.median(all_lat) * 1000,
            "call_p99_ms": all_lat[int(total * 0.99) - 1] * 1000,
            "max_ms": all_lat[-1] * 1000,
            "todo_final_p50_ms": statistics.median(final_lat) * 1000,
            "todo_final_p99_ms": final_lat[int(len(final_lat) * 0.99) - 1] * 1000,
            "runtime_peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "workers": len(worker_peak),
            "workers_peak_rss_mib": sum(worker_peak.values()) / 1024,
            "answers_by_stage": dict(mix),
            "calls_answered_once": sum(1 for call_id in timed if finals[call_id] == 1),
            "calls_without_one_final": len(unanswered),
            "outbox_items": len(outbox),
            "todo_items_all_present": items_ok,
        }
    finally:
        rt.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--conversations", type=int, default=200)
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--mode", choices=["closed", "open"], default="closed")
    parser.add_argument("--db", type=Path, help="database file (default: a temporary one)")
    parser.add_argument("--no-memory", action="store_true", help="skip the :memory: run")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--smoke", action="store_true", help="a tiny size, one round (CI)")
    args = parser.parse_args()
    if args.smoke:
        args.conversations = 2
        args.calls = 5  # a Pomodoro and to-dos in each
        args.no_memory = True
    from tests.faults import invariants

    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        db = args.db or tmp / "load.db"
        bundles, trust = build(tmp)
        floor = sqlite_floor(tmp / "floor.db", 2000)
        res = run(db, bundles, trust, args.conversations, args.calls, args.mode)
        t_check = time.perf_counter()
        stats = invariants.check_db(db)  # the closed file, as a crash would leave it
        res["invariants"] = "ok"
        res["invariant_check_s"] = time.perf_counter() - t_check
        res["calls_stored"] = stats.calls
        if not args.no_memory:
            mem = run(":memory:", bundles, trust, args.conversations, args.calls, args.mode)
            res["memory_throughput_calls_per_s"] = mem["throughput_calls_per_s"]
            res["memory_call_p50_ms"] = mem["call_p50_ms"]
            res["memory_call_p99_ms"] = mem["call_p99_ms"]
            res["file_over_memory_throughput"] = (
                res["throughput_calls_per_s"] / mem["throughput_calls_per_s"]
            )
    res["sqlite_floor_commits_per_s"] = floor
    res["python"] = sys.version.split()[0]
    res["sqlite"] = sqlite3.sqlite_version
    if args.json:
        print(json.dumps(res, indent=2))
    else:
        for k, v in res.items():
            shown = f"{v:10.2f}" if isinstance(v, float) else f"{v}"
            print(f"{k:30s} {shown}")
    assert res["calls_without_one_final"] == 0
    assert res["todo_items_all_present"]


if __name__ == "__main__":
    main()
