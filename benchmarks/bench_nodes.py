"""Two runtime nodes on one PostgreSQL database beside one (issue 26, SPEC 15 "Speed").

Workload (`bench_postgres.py`'s): 50 conversations at once, 30 sequential `Runtime.call`s
each of the trivial `app_ready` tool `bench.ping`, sessions made ready and warmed first
(untimed), one thread per conversation from one barrier. Variants, interleaved round by
round (`--rounds`, at least 5; medians), each in a fresh driver process on a new database
of one throwaway PostgreSQL 15 server with its durable defaults:
  (a) one node;
  (b) two nodes, conversations split between them (each conversation's calls on the
      node its session is on);
  (c) two nodes, calls alternating (each call on the other node from the one before: half
      of them reach the node that does not own the session, which wakes the owner and
      waits for its answer through a notification).
Both nodes of (b) and (c) run in one driver process (one interpreter: on this 2-core
machine a second process would only compete with the server for the same cores); each has
its own connections, lease, listener and workers. Reported per variant: calls/s, p50/p99
latency and database round trips per call (summed over every node's connections).

Then the takeover: a node process (lease `--lease`, default 1 s) makes 50 sessions its own
and is SIGKILLed; the time from the kill until the other node owns all of them, and until a
call on one of them is answered there, is reported (`--rounds` times, median).

Run: python benchmarks/bench_nodes.py [--rounds 5] [--threads 50] [--calls 30] [--json]
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(Path(__file__).parent)]

from bench_concurrency import DRIVER, run_driver  # noqa: E402
from bench_postgres import workload_args  # noqa: E402

from tests.pg_kit import PgServer, fresh_database, start_server  # noqa: E402

LAYOUTS = ("one", "split", "alternating")


def takeover(server: PgServer, bundle: str, threads: int, lease_s: float) -> dict[str, float]:
    """Seconds from a node's SIGKILL to another owning its sessions, and to an answer."""
    import psycopg
    from concurrency_driver import trust_store

    from lineup_runtime_lite import HostSimulator, Runtime

    url = fresh_database(server)
    spec = {"mode": "hold", "db": url, "bundle": bundle, "threads": threads, "lease_s": lease_s}
    with tempfile.TemporaryDirectory(prefix="lineup-bench-hold-") as cwd:
        shutil.copyfile(DRIVER, Path(cwd) / DRIVER.name)
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
        env["PYTHONPATH"] = str(ROOT)
        proc = subprocess.Popen(
            [sys.executable, str(Path(cwd) / DRIVER.name), json.dumps(spec)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
            cwd=cwd,
        )
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert json.loads(line).get("held") == threads, line
            with tempfile.TemporaryDirectory(prefix="lineup-bench-taker-") as apps:
                rt = Runtime.open(
                    url,
                    trust=trust_store(),
                    host=HostSimulator("auto"),
                    apps_dir=apps,
                    node_id="taker",
                    node_lease_s=lease_s,
                )
                try:
                    with psycopg.connect(url, autocommit=True) as conn:
                        os.kill(proc.pid, signal.SIGKILL)
                        killed = time.monotonic()
                        while True:
                            row = conn.execute(
                                "SELECT count(*) FILTER (WHERE node_id <> 'taker') FROM owners"
                            ).fetchone()
                            if row is not None and row[0] == 0:
                                break
                            time.sleep(0.005)
                    owned = time.monotonic() - killed
                    msg = rt.call("after", "conv0", "bench.ping", {"n": 7})
                    answered = time.monotonic() - killed
                    assert msg.get("result") == 7, msg
                finally:
                    rt.close()
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=30)
    return {"owned_s": owned, "answered_s": answered, "after_lease_s": owned - lease_s}


def main() -> None:
    args = workload_args(__doc__, lambda ap: ap.add_argument("--lease", type=float, default=1.0))
    server = start_server(durable=True)
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in LAYOUTS}
    takeovers: list[dict[str, float]] = []
    try:
        with tempfile.TemporaryDirectory(prefix="lineup-bench-nodes-") as tmp:
            bundle = run_driver(
                sys.executable, {"mode": "bundle", "out": f"{tmp}/bench.lineup"}, current=True
            )["bundle"]
            base = {
                "mode": "nodes",
                "bundle": bundle,
                "threads": args.threads,
                "calls": args.calls,
                "warm_calls": args.warm_calls,
            }
            for r in range(args.rounds):
                order = list(LAYOUTS[r % 3 :] + LAYOUTS[: r % 3])  # rotated each round
                for name in order:
                    spec = {**base, "layout": name, "db": fresh_database(server), "round": r}
                    out = run_driver(sys.executable, spec, current=True)
                    results[name].append(out)
                    print(
                        f"round {r} {name}: {out['calls_per_s']:.0f} calls/s, "
                        f"p50 {out['p50_ms']:.2f} ms, "
                        f"{out['round_trips_per_call']:.2f} round trips/call",
                        file=sys.stderr,
                    )
                took = takeover(server, bundle, args.threads, args.lease)
                takeovers.append(took)
                print(
                    f"round {r} takeover: owned after {took['owned_s']:.2f} s, answered "
                    f"after {took['answered_s']:.2f} s (lease {args.lease} s)",
                    file=sys.stderr,
                )
    finally:
        server.stop()

    report: dict[str, Any] = {}
    for name in LAYOUTS:
        report[name] = {
            key: statistics.median(float(o[key]) for o in results[name])
            for key in ("calls_per_s", "p50_ms", "p99_ms", "round_trips_per_call")
        }
    report["takeover"] = {key: statistics.median(t[key] for t in takeovers) for key in takeovers[0]}
    report["takeover"]["lease_s"] = args.lease
    report["takeover_within_5s_of_lease"] = report["takeover"]["after_lease_s"] <= 5.0
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"{'variant':<14}{'calls/s':>10}{'p50 ms':>9}{'p99 ms':>9}{'trips/call':>12}")
    for name in LAYOUTS:
        row = report[name]
        print(
            f"{name:<14}{row['calls_per_s']:>10.0f}{row['p50_ms']:>9.2f}{row['p99_ms']:>9.2f}"
            f"{row['round_trips_per_call']:>12.2f}"
        )
    t = report["takeover"]
    print(
        f"takeover after SIGKILL (lease {args.lease} s): sessions owned after "
        f"{t['owned_s']:.2f} s ({t['after_lease_s']:.2f} s past the lease), a call answered "
        f"after {t['answered_s']:.2f} s"
    )


if __name__ == "__main__":
    main()
