"""What a worker per App session costs (SPEC 13.3, `isolation`), side by side in one run.

For `isolation="app"` and `"session"`, interleaved round by round:

1. The first call of a new session: `Runtime.call` + `settle()` on a new conversation of an
   app that already serves another (under `session` that starts a worker; under `app` the
   worker is up).
2. Memory per idle session, by PSS and USS from `/proc/<pid>/smaps_rollup` of every
   process of each worker's tree — the launcher outside the PID namespace and everything
   inside it — summed per session, with RSS beside them (RSS counts each page the launcher
   and the worker, or two workers, share once per process, so it overstates what a session
   costs); the launcher's own share is reported apart.
3. Throughput at 50 conversations: `call_many` of one call per conversation, repeated, once
   every session is up (calls/s).

SPEC 13.3's rule for the default: `session` if the first call costs at most 20 ms more and
an idle session at most 10 MiB PSS; else `app`. The run prints the verdict.

Run: python benchmarks/bench_isolation.py [--rounds 5] [--sessions 50] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.bench_sandbox import _bundle  # noqa: E402
from lineup_runtime_lite.internals import engine_of  # noqa: E402
from lineup_runtime_lite.processes.proctree import Memory, process_memory, tree_pids  # noqa: E402

MODES = ("app", "session")


def _session_memory(rt: Any, sessions: int) -> dict[str, float]:
    """MiB per idle session: PSS, USS and RSS of every worker tree (launcher included),
    and the launchers' PSS apart (a tree's root, when it has an init below it)."""
    total, launchers = Memory(), Memory()
    for worker in engine_of(rt).workers.values():
        if not worker.pid:
            continue
        pids = tree_pids(worker.pid)
        for pid in pids:
            got = process_memory(pid)
            if got is not None:
                total += got
                if pid == worker.pid and len(pids) > 1:
                    launchers += got
    mib = 1024 * sessions
    return {
        "pss_mib_per_session": total.pss / mib,
        "uss_mib_per_session": total.uss / mib,
        "rss_mib_per_session": total.rss / mib,
        "launcher_pss_mib_per_session": launchers.pss / mib,
    }


def _final(rt: Any, call_id: str, conversation: str, n: int) -> None:
    msg = rt.call(call_id, conversation, "bench.ping", {"n": n})
    if msg["stage"] == "accepted":
        rt.settle()
    record = rt.call_record(call_id)
    assert record is not None and any(m["stage"] == "result" for m in record["messages"])


def one_round(bundle: Path, trust: Any, mode: str, sessions: int, tmp: Path) -> dict[str, float]:
    from lineup_runtime_lite import Runtime, VirtualClock

    db = Path(tempfile.mkdtemp(dir=tmp)) / "rt.db"
    with Runtime.open(db, trust=trust, clock=VirtualClock(), isolation=mode) as rt:
        rt.install(bundle)
        _final(rt, "warm", "c-warm", 0)  # the app is up, one session served
        t0 = time.perf_counter()
        _final(rt, "first", "c-first", 1)
        first_ms = (time.perf_counter() - t0) * 1000
        for i in range(sessions - 2):
            _final(rt, f"open{i}", f"c{i}", i)
        convs = ["c-warm", "c-first", *(f"c{i}" for i in range(sessions - 2))]
        memory = _session_memory(rt, sessions)
        calls, batches = 0, 5
        t0 = time.perf_counter()
        for b in range(batches):
            rt.call_many([(f"t{b}-{i}", c, "bench.ping", {"n": i}) for i, c in enumerate(convs)])
            rt.settle()
            calls += len(convs)
        rate = calls / (time.perf_counter() - t0)
    return {"first_ms": first_ms, **memory, "rate": rate}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--smoke", action="store_true", help="a tiny size, one round (CI)")
    args = parser.parse_args()
    if args.smoke:
        args.rounds = 1
        args.sessions = 2
    got: dict[str, list[dict[str, float]]] = {m: [] for m in MODES}
    with tempfile.TemporaryDirectory(prefix="bench-isolation-") as t:
        tmp = Path(t)
        bundle, trust = _bundle(tmp)  # bench_sandbox's one-tool app
        for r in range(args.rounds):
            for mode in MODES if r % 2 == 0 else MODES[::-1]:
                got[mode].append(one_round(bundle, trust, mode, args.sessions, tmp))
    med = {m: {k: statistics.median(x[k] for x in got[m]) for k in got[m][0]} for m in MODES}
    extra_first = med["session"]["first_ms"] - med["app"]["first_ms"]
    per_session = med["session"]["pss_mib_per_session"]
    verdict = "session" if extra_first <= 20 and per_session <= 10 else "app"
    out = {
        "median": med,
        "first_call_extra_ms": extra_first,
        "pss_mib_per_idle_session": per_session,
        "rss_mib_per_idle_session": med["session"]["rss_mib_per_session"],
        "throughput_vs_app": med["session"]["rate"] / med["app"]["rate"],
        "default_by_spec_13_3": verdict,
        "rounds": args.rounds,
        "sessions": args.sessions,
    }
    if args.json:
        print(json.dumps(out, indent=2))
        return
    for mode in MODES:
        m = med[mode]
        print(
            f"{mode:8} first call of a new session {m['first_ms']:7.1f} ms; "
            f"per session PSS {m['pss_mib_per_session']:5.1f} MiB "
            f"(USS {m['uss_mib_per_session']:5.1f}, RSS {m['rss_mib_per_session']:5.1f}, "
            f"launcher PSS {m['launcher_pss_mib_per_session']:4.1f}); "
            f"{args.sessions} conversations {m['rate']:7.0f} calls/s"
        )
    print(
        f"session costs {extra_first:+.1f} ms on a new session's first call (bar +20 ms), "
        f"{per_session:.1f} MiB PSS per idle session (bar 10 MiB), and runs "
        f"{out['throughput_vs_app']:.2f}x app's throughput: default by SPEC 13.3 = {verdict}"
    )


if __name__ == "__main__":
    main()
