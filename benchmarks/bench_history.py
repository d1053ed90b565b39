"""A runtime with a long history beside a fresh one (issue 36): `Runtime.open`, a timer
tick's loop block and sequential calls/s, interleaved rounds; and the one-time migration of
such a database from store schema 3 to 4.

The history (`tests/history_kit.py`): `--calls` finished calls with their receipts,
acknowledged outbox items, App sessions (20 calls each), activations, Host intents and
Pomodoro operations, written by SQL directly in a few seconds per 100k calls, into a
database where the bench app is installed and one session is ready. Each round, for the
fresh database and then the history one (the order rotates):

* open: `Runtime.open` of the file (recovery included) to its return, then closed; the
  same with the file's pages dropped from the page cache first (`posix_fadvise
  DONTNEED`: what open reads from disk, as after a reboot, is timed too); and
  `AsyncRuntime.open` (no runtime thread to start) in the next step;
* tick: `AsyncRuntime`'s timer tick with nothing due, `--ticks` times: the event loop is
  blocked for all of it (its reads run on the loop), median per round;
* calls/s: `--seq-calls` sequential `AsyncRuntime.call`s in one ready session (after an
  untimed one that starts its worker).

Migration: a copy of the history database put back at schema 3 (schema 4's indexes
dropped), then opened once: the open that migrates, timed (a one-time cost).

Run: python benchmarks/bench_history.py [--calls 1000000] [--rounds 5] [--smoke]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(Path(__file__).parent)]

from concurrency_driver import build_bundle, trust_store  # noqa: E402

from lineup_runtime_lite.internals import engine_of  # noqa: E402
from tests.history_kit import add_history  # noqa: E402


def prepare(path: Path, bundle: Path, calls: int) -> float:
    """A database with the bench app installed, one session ready and `calls` finished
    calls of history; returns the seconds the history took to write."""
    from lineup_runtime_lite import HostSimulator, Runtime

    with Runtime.open(path, trust=trust_store(), host=HostSimulator("auto")) as rt:
        rt.install(bundle)
        assert rt.call("ready", "conv", "bench.ping", {"n": -1})["stage"] == "accepted"
        rt.settle()
    started = time.perf_counter()
    if calls:
        con = sqlite3.connect(path, isolation_level=None)
        con.execute("PRAGMA synchronous=OFF")
        con.execute("BEGIN")
        add_history(con, calls, scope="bench", version="1.0.0")
        con.execute("COMMIT")
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        con.close()
        from lineup_runtime_lite.store.sqlite import Store

        Store(path).close()  # closed cleanly, as a runtime leaves it
    return time.perf_counter() - started


def evict(path: Path) -> None:
    """Drop the database's pages (and its `-wal`'s) from the page cache (Linux)."""
    for name in (str(path), f"{path}-wal"):
        if os.path.exists(name) and hasattr(os, "posix_fadvise"):
            fd = os.open(name, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def time_open(path: Path, *, cold: bool = False) -> float:
    from lineup_runtime_lite import HostSimulator, Runtime

    if cold:
        evict(path)
    started = time.perf_counter()
    rt = Runtime.open(path, trust=trust_store(), host=HostSimulator("auto"))
    took = time.perf_counter() - started
    rt.close()
    return took


async def _ticks_and_calls(
    path: Path, ticks: int, calls: int, tag: str
) -> tuple[float, float, float]:
    from lineup_runtime_lite import AsyncRuntime, HostSimulator

    trust, host = trust_store(), HostSimulator("auto")
    started = time.perf_counter()
    art = await AsyncRuntime.open(path, trust=trust, host=host)
    opened = time.perf_counter() - started
    try:
        blocks = []
        for _ in range(ticks):
            started = time.perf_counter()
            await engine_of(art).tick()  # nothing is due: the loop is blocked for all of it
            blocks.append(time.perf_counter() - started)
        warm = await art.call(f"{tag}-warm", "conv", "bench.ping", {"n": 0})  # a worker starts
        if warm["stage"] == "accepted":
            await art.settle()
        started = time.perf_counter()
        for i in range(calls):
            msg = await art.call(f"{tag}-{i}", "conv", "bench.ping", {"n": i})
            assert msg.get("result") == i, msg
        rate = calls / (time.perf_counter() - started)
        return opened, statistics.median(blocks), rate
    finally:
        await art.close()


def migration(path: Path, scratch: Path) -> float:
    """Seconds of the open that moves a copy of `path` from schema 3 to 4."""
    from lineup_runtime_lite.internals import V4_INDEXES
    from lineup_runtime_lite.store.sqlite import Store

    copy = scratch / "v3.db"
    shutil.copyfile(path, copy)
    con = sqlite3.connect(copy, isolation_level=None)
    for stmt in V4_INDEXES:
        con.execute(f"DROP INDEX {stmt.split(' ON ')[0].split()[-1]}")
    con.execute("UPDATE meta SET value='3' WHERE key='schema_version'")
    con.execute("VACUUM")
    con.close()
    started = time.perf_counter()
    Store(copy).close()
    took = time.perf_counter() - started
    copy.unlink()
    return took


def spread(xs: list[float], scale: float = 1000.0) -> str:
    return (
        f"median {statistics.median(xs) * scale:9.2f}  min {min(xs) * scale:9.2f}  "
        f"max {max(xs) * scale:9.2f}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=1_000_000, help="finished calls of history")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--ticks", type=int, default=20)
    ap.add_argument("--seq-calls", type=int, default=300)
    ap.add_argument("--keep", type=Path, help="build (or reuse) the databases in this folder")
    ap.add_argument("--smoke", action="store_true", help="a tiny size, one round (CI)")
    args = ap.parse_args()
    if args.smoke:
        args.calls, args.rounds, args.ticks, args.seq_calls = 2000, 1, 2, 5
    print(
        f"python {sys.version.split()[0]}  sqlite {sqlite3.sqlite_version}  cpus {os.cpu_count()}"
        f"  load {os.getloadavg()[0]:.2f}  history {args.calls} calls  rounds {args.rounds}"
    )
    with tempfile.TemporaryDirectory(prefix="lineup-history-") as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        bundle = build_bundle(Path(tmp) / "build")
        dbs = {"fresh": folder / "fresh.db", "history": folder / f"history-{args.calls}.db"}
        for name, path in dbs.items():
            if not path.exists():
                took = prepare(path, bundle, 0 if name == "fresh" else args.calls)
                print(f"# {name}: built in {took:.1f} s, {path.stat().st_size / 1e6:.0f} MB")
        migrated = migration(dbs["history"], Path(tmp))
        print(f"migration 3 -> 4 on {args.calls} calls: {migrated * 1000:.0f} ms (once)")
        got: dict[str, dict[str, list[float]]] = {
            name: {"open": [], "cold": [], "aopen": [], "tick": [], "rate": []} for name in dbs
        }
        for r in range(args.rounds):
            names = list(dbs)[r % 2 :] + list(dbs)[: r % 2]
            for name in names:
                got[name]["open"].append(time_open(dbs[name]))
                got[name]["cold"].append(time_open(dbs[name], cold=True))
                aopen, block, rate = asyncio.run(
                    _ticks_and_calls(dbs[name], args.ticks, args.seq_calls, f"r{r}")
                )
                got[name]["aopen"].append(aopen)
                got[name]["tick"].append(block)
                got[name]["rate"].append(rate)
            print(f"# round {r + 1}/{args.rounds} done (load {os.getloadavg()[0]:.2f})")
    for name in dbs:
        print(f"\n{name}:")
        print(f"  Runtime.open (ms)      {spread(got[name]['open'])}")
        print(f"  Runtime.open cold (ms) {spread(got[name]['cold'])}")
        print(f"  AsyncRuntime.open (ms) {spread(got[name]['aopen'])}")
        print(f"  tick block (ms)        {spread(got[name]['tick'])}")
        print(f"  calls/s                {spread(got[name]['rate'], 1.0)}")
    ratio = statistics.median(got["history"]["rate"]) / statistics.median(got["fresh"]["rate"])
    print(
        f"\nhistory / fresh calls/s {ratio:.2f} (target >= 0.9); Runtime.open "
        f"{statistics.median(got['history']['open']) * 1000:.1f} ms, cold "
        f"{statistics.median(got['history']['cold']) * 1000:.1f} ms, AsyncRuntime.open "
        f"{statistics.median(got['history']['aopen']) * 1000:.1f} ms (target <= 10); tick "
        f"{statistics.median(got['history']['tick']) * 1000:.2f} ms (target <= 1)"
    )


if __name__ == "__main__":
    main()
