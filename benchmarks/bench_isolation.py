"""What a worker per App session costs (SPEC 13.3, `isolation`; issue 43), side by side in
one run.

For `isolation="app"` and `"session"`, interleaved round by round (the order alternates):

1. The first call of a new session: `Runtime.call` + `settle()` on a new conversation of an
   app that already serves another (under `session` that starts a worker; under `app` the
   worker is up).
2. Memory per idle session, by PSS and USS from `/proc/<pid>/smaps_rollup` of every process
   the runtime started (every worker's tree, and what serves them from outside one: a warm
   image and its launcher, decision record 0007), divided by the sessions, with RSS beside
   them (RSS counts each page two processes share once per process, so it overstates what a
   session costs). Apart: the cold path's per-session launchers (a worker tree's root that
   has an init below it) per session, and the processes outside every worker's tree (an
   image and its launcher) in total.
3. Throughput at `--sessions` conversations (50): `call_many` of one call per conversation,
   repeated until `--calls` (2000; 250 made a window of a few tenths of a second, which
   the machine's other load swung by 2x either way), once every session is up and, under
   `session`, the image has made up its spares again (calls/s), as a ratio to `app`'s.
4. Worker start-up under `isolation="app"`, this checkout beside commit `--baseline`
   (89ded1c, before the warm image): a fresh process opens a runtime on a new database
   file, installs the app and times its first call (the worker's start, its handshake and
   the activation), each version in its own venv (the baseline's installed non-editable
   and cached under `--baseline-dir`, as bench_concurrency does), interleaved.

Issue 43's bars: the first call of a new session at most 20 ms over `app`, an idle session
at most 10 MiB PSS, throughput at 50 conversations at least 0.8x `app`'s, and worker
start-up under `app` no slower than at 89ded1c. SPEC 13.3's rule for the default: `session`
once the first two hold; else `app`. The run prints each bar and the verdict.

Run: python benchmarks/bench_isolation.py [--rounds 5] [--sessions 50] [--calls 2000]
         [--baseline 89ded1c]
         [--baseline-dir DIR] [--no-baseline] [--json] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.bench_concurrency import baseline_python  # noqa: E402
from benchmarks.bench_sandbox import _bundle  # noqa: E402
from lineup_runtime_lite.internals import engine_of  # noqa: E402
from lineup_runtime_lite.processes.proctree import Memory, process_memory, tree_pids  # noqa: E402

MODES = ("app", "session")
BASELINE = "89ded1c"

#: Worker start-up under `isolation="app"` in a fresh process, public API only (it runs
#: on the baseline's install too): the bundle and the bench key's seed come as arguments.
STARTUP_DRIVER = """
import json, sys, tempfile, time
from pathlib import Path
from lineup_build.signing import key_from_seed
from lineup_build.trust import TrustedKey, TrustStore
from lineup_runtime_lite import Runtime, VirtualClock

key = key_from_seed(bytes(range(32)))
trust = TrustStore.from_keys([TrustedKey(key.key_id, key.public_raw, ("*",), None)])
with tempfile.TemporaryDirectory() as tmp:
    with Runtime.open(Path(tmp) / "rt.db", trust=trust, clock=VirtualClock(),
                      isolation="app") as rt:
        rt.install(sys.argv[1])
        t0 = time.perf_counter()
        rt.call("first", "c1", "bench.ping", {"n": 1})
        rt.settle()
        first = (time.perf_counter() - t0) * 1000
        t0 = time.perf_counter()
        rt.call("second", "c1", "bench.ping", {"n": 2})
        rt.settle()
        second = (time.perf_counter() - t0) * 1000
        assert rt.call_record("first") is not None
print(json.dumps({"first_call_ms": first, "warm_call_ms": second}))
"""


def _session_memory(rt: Any, sessions: int) -> dict[str, float]:
    """MiB per idle session: PSS, USS and RSS of every process this runtime started
    (every worker's tree, and an image or launcher outside them); apart, the cold path's
    launchers per session (a tree's root, when it has an init below it) and the processes
    outside every worker's tree in total (a warm image and its launcher)."""
    in_trees: set[int] = set()
    launchers = Memory()
    for worker in engine_of(rt).workers.values():
        if not worker.pid:
            continue
        pids = tree_pids(worker.pid)
        in_trees.update(pids)
        got = process_memory(worker.pid) if len(pids) > 1 else None
        if got is not None:
            launchers += got
    total, outside = Memory(), Memory()
    for pid in tree_pids(os.getpid())[1:]:  # every process this one started, itself aside
        got = process_memory(pid)
        if got is not None:
            total += got
            if pid not in in_trees:
                outside += got
    mib = 1024 * sessions
    return {
        "pss_mib_per_session": total.pss / mib,
        "uss_mib_per_session": total.uss / mib,
        "rss_mib_per_session": total.rss / mib,
        "launcher_pss_mib_per_session": launchers.pss / mib,
        "outside_workers_pss_mib": outside.pss / 1024,
    }


def worker_startup(python: Path | str, bundle: Path, *, current: bool) -> dict[str, float]:
    """One fresh process of `python` (this checkout's, or the baseline venv's, started
    outside the repository so that it sees only its own install)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    if current:
        env["PYTHONPATH"] = str(ROOT)
    with tempfile.TemporaryDirectory(prefix="lineup-bench-iso-") as cwd:
        proc = subprocess.run(
            [str(python), "-c", STARTUP_DRIVER, str(bundle)],
            capture_output=True,
            text=True,
            env=env,
            cwd=cwd,
            timeout=600,
        )
    if proc.returncode != 0:
        raise RuntimeError(f"the start-up driver failed ({proc.returncode}):\n{proc.stderr}")
    out: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


def _final(rt: Any, call_id: str, conversation: str, n: int) -> None:
    msg = rt.call(call_id, conversation, "bench.ping", {"n": n})
    if msg["stage"] == "accepted":
        rt.settle()
    record = rt.call_record(call_id)
    assert record is not None and any(m["stage"] == "result" for m in record["messages"])


def _spares_made(rt: Any, timeout_s: float = 30.0) -> None:
    """Wait (real time) until no image is making a spare: under `session`, each new
    session takes a spare and the image makes it up again in the background (a fork, a
    control-group move, the checks); that is a new session's cost, not throughput's."""
    deadline = time.monotonic() + timeout_s
    while any(image.making for image in engine_of(rt).pool.images.values()):
        if time.monotonic() > deadline:
            raise RuntimeError(f"the image's spares were not made within {timeout_s:g} s")
        time.sleep(0.005)


def one_round(
    bundle: Path, trust: Any, mode: str, sessions: int, tmp: Path, total_calls: int = 2000
) -> dict[str, float]:
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
        _spares_made(rt)  # the last sessions' spares are made up outside the timed phase
        memory = _session_memory(rt, sessions)
        calls, batches = 0, max(5, -(-total_calls // sessions))
        t0 = time.perf_counter()
        for b in range(batches):
            rt.call_many([(f"t{b}-{i}", c, "bench.ping", {"n": i}) for i, c in enumerate(convs)])
            rt.settle()
            calls += len(convs)
        rate = calls / (time.perf_counter() - t0)
    return {"first_ms": first_ms, **memory, "rate": rate}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument(
        "--calls",
        type=int,
        default=2000,
        help="calls per throughput phase (at least 5 per conversation)",
    )
    parser.add_argument("--baseline", default=BASELINE, help="the commit to compare start-up with")
    parser.add_argument(
        "--baseline-dir",
        type=Path,
        default=Path(tempfile.gettempdir()) / "lineup-bench-baseline",
        help="where the baseline venv is cached",
    )
    parser.add_argument("--no-baseline", action="store_true")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--smoke", action="store_true", help="a tiny size, one round (CI)")
    args = parser.parse_args()
    if args.smoke:  # every measurement and report line runs; the baseline only when asked
        args.rounds = 1
        args.sessions = 2
        args.calls = 10
        args.no_baseline = args.no_baseline or args.baseline == BASELINE
    old = None if args.no_baseline else baseline_python(args.baseline, args.baseline_dir)
    head = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    print(
        f"python {sys.version.split()[0]}  cpus {os.cpu_count()}  checkout {head or '?'}  "
        f"baseline {args.baseline if old else '-'}  load {os.getloadavg()[0]:.2f}  "
        f"rounds {args.rounds}  sessions {args.sessions}  calls {args.calls}  (no randomness: fixed workload)",
        flush=True,
    )
    got: dict[str, list[dict[str, float]]] = {m: [] for m in MODES}
    startup: dict[str, list[dict[str, float]]] = {"checkout": [], "baseline": []}
    with tempfile.TemporaryDirectory(prefix="bench-isolation-") as t:
        tmp = Path(t)
        bundle, trust = _bundle(tmp)  # bench_sandbox's one-tool app
        for r in range(args.rounds):
            for mode in MODES if r % 2 == 0 else MODES[::-1]:
                got[mode].append(one_round(bundle, trust, mode, args.sessions, tmp, args.calls))
            versions = [("checkout", sys.executable, True)]
            if old is not None:
                versions.append(("baseline", str(old), False))
            for name, python, current in versions if r % 2 == 0 else versions[::-1]:
                startup[name].append(worker_startup(python, bundle, current=current))
            print(f"# round {r + 1}/{args.rounds} (load {os.getloadavg()[0]:.2f})", flush=True)
    report(got, startup, args)


def report(
    got: dict[str, list[dict[str, float]]],
    startup: dict[str, list[dict[str, float]]],
    args: argparse.Namespace,
) -> None:
    med = {m: {k: statistics.median(x[k] for x in got[m]) for k in got[m][0]} for m in MODES}
    extra_first = med["session"]["first_ms"] - med["app"]["first_ms"]
    per_session = med["session"]["pss_mib_per_session"]
    throughput = med["session"]["rate"] / med["app"]["rate"]
    start = {
        name: statistics.median(x["first_call_ms"] for x in rows)
        for name, rows in startup.items()
        if rows
    }
    spread = {
        name: (min(x["first_call_ms"] for x in rows), max(x["first_call_ms"] for x in rows))
        for name, rows in startup.items()
        if rows
    }
    verdict = "session" if extra_first <= 20 and per_session <= 10 else "app"
    bars = {
        "first call of a new session <= +20 ms over app": extra_first <= 20,
        "PSS per idle session <= 10 MiB": per_session <= 10,
        f"throughput at {args.sessions} conversations >= 0.8x app": throughput >= 0.8,
    }
    if "baseline" in start:
        bars[f"worker start-up under app no slower than {args.baseline}"] = (
            start["checkout"] <= start["baseline"]
        )
    out = {
        "median": med,
        "first_call_extra_ms": extra_first,
        "pss_mib_per_idle_session": per_session,
        "rss_mib_per_idle_session": med["session"]["rss_mib_per_session"],
        "throughput_vs_app": throughput,
        "worker_startup_app_ms": start,
        "worker_startup_app_ms_min_max": spread,
        "bars": bars,
        "default_by_spec_13_3": verdict,
        "rounds": args.rounds,
        "sessions": args.sessions,
        "baseline": args.baseline if "baseline" in start else None,
    }
    if args.json:
        print(json.dumps(out, indent=2))
        return
    for mode in MODES:
        m = med[mode]
        print(
            f"{mode:8} first call of a new session {m['first_ms']:7.1f} ms; "
            f"per session PSS {m['pss_mib_per_session']:5.1f} MiB "
            f"(USS {m['uss_mib_per_session']:5.1f}, RSS {m['rss_mib_per_session']:5.1f}; "
            f"cold launchers' PSS {m['launcher_pss_mib_per_session']:4.1f}); outside every "
            f"worker's tree (image, its launcher) {m['outside_workers_pss_mib']:5.1f} MiB PSS "
            f"in all; {args.sessions} conversations {m['rate']:7.0f} calls/s"
        )
    for name, ms in start.items():
        label = "this checkout" if name == "checkout" else args.baseline
        low, high = spread[name]
        print(
            f"worker start-up under app, {label:13}: first call {ms:6.1f} ms "
            f"(min {low:.1f}, max {high:.1f})"
        )
    print(
        f"session costs {extra_first:+.1f} ms on a new session's first call, "
        f"{per_session:.1f} MiB PSS per idle session, and runs {throughput:.2f}x app's "
        f"throughput: default by SPEC 13.3 = {verdict}"
    )
    for bar, held in bars.items():
        print(f"  {'met    ' if held else 'NOT met'}  {bar}")


if __name__ == "__main__":
    main()
