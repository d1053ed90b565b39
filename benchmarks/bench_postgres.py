"""The PostgreSQL store, one node, beside the SQLite file store (issue 25, SPEC 15 "Speed").

Workload: 50 conversations at once, 30 sequential `Runtime.call`s each (the trivial
`app_ready` tool `bench.ping` of `concurrency_driver.py`; sessions made ready and warmed
first, untimed), one thread per conversation from one barrier. Variants, interleaved round
by round (`--rounds`, at least 5; medians reported), each in a fresh driver process on this
checkout:
  (a) the SQLite file store (WAL, synchronous=FULL): the embedded default;
  (b) the PostgreSQL store on a throwaway PostgreSQL 15 server started from the machine's
      binaries with its durable defaults (fsync on), over loopback TCP; a new database per
      round.
Reported per variant: calls/s, p50/p99 latency, commits per call and, for PostgreSQL,
database round trips per call counted at the store's connections (each time one waits for
the server: a statement outside a pipeline, a sync, or a result asked for before it arrived;
statements sent in a pipeline without waiting are not). The bar (SPEC 15) is <= 1 round trip per call; the end-to-end
ratio PostgreSQL/SQLite is reported (no bar: on 2 cores the server competes with the
runtime for CPU).

Run: python benchmarks/bench_postgres.py [--rounds 5] [--threads 50] [--calls 30] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(Path(__file__).parent)]

from bench_concurrency import run_driver  # noqa: E402

from tests.pg_kit import fresh_database, pg_bindir, start_server  # noqa: E402


def workload_args(doc: str, extra: Callable[[argparse.ArgumentParser], None] | None = None) -> Any:
    """The 50-conversation workload's options (this benchmark's and `bench_nodes.py`'s),
    parsed and announced; exits without PostgreSQL server binaries."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=50)
    ap.add_argument("--calls", type=int, default=30)
    ap.add_argument("--warm-calls", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    if extra is not None:
        extra(ap)
    ap.add_argument("--smoke", action="store_true", help="a tiny size, one round (CI)")
    args = ap.parse_args()
    if args.smoke:
        args.rounds = 1
        args.threads = 2
        args.calls = 2
        args.warm_calls = 1
    if pg_bindir() is None:
        raise SystemExit("no PostgreSQL server binaries (pg_config --bindir, LINEUP_PG_BINDIR)")
    print(
        f"workload: {args.threads} conversations x {args.calls} calls, "
        f"{args.warm_calls} warm-up calls each; {args.rounds} interleaved rounds",
        file=sys.stderr,
    )
    return args


def main() -> None:
    args = workload_args(__doc__)
    server = start_server(durable=True)
    results: dict[str, list[dict[str, Any]]] = {"sqlite_file": [], "postgresql": []}
    try:
        with tempfile.TemporaryDirectory(prefix="lineup-bench-pg-") as tmp:
            bundle = run_driver(
                sys.executable, {"mode": "bundle", "out": f"{tmp}/bench.lineup"}, current=True
            )["bundle"]
            base = {
                "mode": "threads",
                "bundle": bundle,
                "threads": args.threads,
                "calls": args.calls,
                "warm_calls": args.warm_calls,
            }
            for r in range(args.rounds):
                order = ["sqlite_file", "postgresql"]
                if r % 2:
                    order.reverse()
                for name in order:
                    db = "file" if name == "sqlite_file" else fresh_database(server)
                    out = run_driver(sys.executable, {**base, "db": db, "round": r}, current=True)
                    results[name].append(out)
                    print(
                        f"round {r} {name}: {out['calls_per_s']:.0f} calls/s, "
                        f"p50 {out['p50_ms']:.2f} ms, "
                        f"{out.get('round_trips_per_call', float('nan')):.2f} round trips/call",
                        file=sys.stderr,
                    )
    finally:
        server.stop()

    def med(name: str, key: str) -> float:
        return statistics.median(float(o[key]) for o in results[name])

    report: dict[str, Any] = {}
    for name in results:
        report[name] = {
            key: med(name, key)
            for key in ("calls_per_s", "p50_ms", "p99_ms", "commits_per_call")
            + (("round_trips_per_call",) if name == "postgresql" else ())
        }
    report["postgresql_over_sqlite_calls_per_s"] = (
        report["postgresql"]["calls_per_s"] / report["sqlite_file"]["calls_per_s"]
    )
    report["round_trip_bar_met"] = report["postgresql"]["round_trips_per_call"] <= 1.0
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(
        f"{'variant':<14}{'calls/s':>10}{'p50 ms':>9}{'p99 ms':>9}{'commits/call':>14}{'trips/call':>12}"
    )
    for name in ("sqlite_file", "postgresql"):
        row = report[name]
        trips = row.get("round_trips_per_call")
        print(
            f"{name:<14}{row['calls_per_s']:>10.0f}{row['p50_ms']:>9.2f}{row['p99_ms']:>9.2f}"
            f"{row['commits_per_call']:>14.2f}{'' if trips is None else f'{trips:.2f}':>12}"
        )
    print(f"PostgreSQL / SQLite calls/s: {report['postgresql_over_sqlite_calls_per_s']:.2f}")


if __name__ == "__main__":
    main()
