"""What a worker per App session costs (SPEC 13.3, `isolation`), side by side in one run.

For `isolation="app"` and `"session"`, interleaved round by round:

1. The first call of a new session: `Runtime.call` + `settle()` on a new conversation of an
   app that already serves another (under `session` that starts a worker; under `app` the
   worker is up).
2. Memory per idle session: the RSS of every worker process (the launcher outside the PID
   namespace and everything inside it), summed, divided by the sessions open.
3. Throughput at 50 conversations: `call_many` of one call per conversation, repeated, once
   every session is up (calls/s).

SPEC 13.3's rule for the default: `session` if the first call costs at most 150 ms more and
an idle session at most 40 MiB; else `app`. The run prints the verdict.

Run: python benchmarks/bench_isolation.py [--rounds 5] [--sessions 50] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
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

MODES = ("app", "session")


def _rss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _tree(root: int) -> list[int]:
    """`root` and its live descendants."""
    parents: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as fh:
                    raw = fh.read()
                parents[int(name)] = int(raw[raw.rfind(b")") + 2 :].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    out, frontier = [root], [root]
    while frontier:
        nxt = [p for p, pp in parents.items() if pp in frontier]
        out += nxt
        frontier = nxt
    return out


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
        workers = [w for w in engine_of(rt).workers.values() if w.pid]
        rss_kib = sum(_rss_kib(p) for w in workers for p in _tree(w.pid))
        calls, batches = 0, 5
        t0 = time.perf_counter()
        for b in range(batches):
            rt.call_many([(f"t{b}-{i}", c, "bench.ping", {"n": i}) for i, c in enumerate(convs)])
            rt.settle()
            calls += len(convs)
        rate = calls / (time.perf_counter() - t0)
    return {"first_ms": first_ms, "rss_mib_per_session": rss_kib / 1024 / sessions, "rate": rate}


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
    per_session = med["session"]["rss_mib_per_session"]
    verdict = "session" if extra_first <= 150 and per_session <= 40 else "app"
    out = {
        "median": med,
        "first_call_extra_ms": extra_first,
        "rss_mib_per_idle_session": per_session,
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
            f"worker RSS per session {m['rss_mib_per_session']:6.1f} MiB; "
            f"{args.sessions} conversations {m['rate']:7.0f} calls/s"
        )
    print(
        f"session costs {extra_first:+.1f} ms on a new session's first call (bar +150 ms) and "
        f"{per_session:.1f} MiB per idle session (bar 40 MiB): default by SPEC 13.3 = {verdict}"
    )


if __name__ == "__main__":
    main()
