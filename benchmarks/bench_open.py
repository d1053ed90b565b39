"""Benchmark opening a large runtime database: the whole-file `quick_check` against the
clean-close rule (issue 24, item 5).

Builds a database of about `--mb` megabytes (default 1000) with the runtime's schema and
bulk inserts into `outbox` and `receipts` through `sqlite3` directly (well under a minute),
closes it cleanly once, then times `Store(path)` — the store's open, integrity check,
migration check and marker write included — `--runs` times per path, interleaved:

* before: `LINEUP_STORE_FULL_CHECK=1`, the whole-file `PRAGMA quick_check` on every open
  (what every open did before the rule; an open after an unclean close still does it);
* after: the last close was clean, so only the bounded check runs (page count against the
  file size, one read per root page).

The file stays in the OS page cache between runs, so "before" is the warm-cache figure; a
cold cache only widens the gap. Run it with the interpreter that has the toolchain:

    python benchmarks/bench_open.py [--mb 1000] [--runs 5] [--keep PATH]

It is not part of the test suite.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from lineup_runtime_lite.internals import FULL_CHECK_ENV
from lineup_runtime_lite.store.sqlite import Store

BODY = 2000  # bytes of each outbox body and receipt body


def build(path: Path, mb: int) -> float:
    """A database of about `mb` MB; returns the seconds it took."""
    started = time.perf_counter()
    Store(path).close()  # the schema, as the runtime creates it
    rows = mb * 1024 * 1024 // (2 * BODY + 200)
    pad = "x" * (BODY - 12)
    con = sqlite3.connect(path, isolation_level=None)
    con.execute("PRAGMA journal_mode=DELETE")  # no WAL to checkpoint after the bulk load
    con.execute("PRAGMA synchronous=OFF")
    con.execute("BEGIN")

    def outbox() -> Iterator[tuple[str, str, str]]:
        for i in range(rows):
            yield f"m{i:010d}", f"c{i:010d}", f"{i:012d}{pad}"

    def receipts() -> Iterator[tuple[str, str, int, str]]:
        for i in range(rows):
            yield f"c{i:010d}", "answer", 1, f"{i:012d}{pad}"

    con.executemany("INSERT INTO outbox (msg_id, call_id, body) VALUES (?, ?, ?)", outbox())
    con.executemany("INSERT INTO receipts VALUES (?, ?, ?, ?)", receipts())
    con.execute("COMMIT")
    con.close()
    Store(path).close()  # back to WAL, closed cleanly
    return time.perf_counter() - started


def time_open(path: Path, *, full: bool) -> float:
    if full:
        os.environ[FULL_CHECK_ENV] = "1"
    else:
        os.environ.pop(FULL_CHECK_ENV, None)
    started = time.perf_counter()
    store = Store(path)
    took = time.perf_counter() - started
    store.close()
    return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--keep", type=Path, default=None, help="build (or reuse) the file here")
    ap.add_argument("--smoke", action="store_true", help="a tiny size, one round (CI)")
    args = ap.parse_args()
    if args.smoke:
        args.mb = 1
        args.runs = 1
    with tempfile.TemporaryDirectory() as tmp:
        path = args.keep or Path(tmp) / "large.db"
        if not path.exists():
            print(f"built {path} in {build(path, args.mb):.1f} s")
        print(f"size {path.stat().st_size / 1e6:.0f} MB")
        time_open(path, full=True)  # one warm-up read of the whole file into the page cache
        before: list[float] = []
        after: list[float] = []
        for _ in range(args.runs):
            before.append(time_open(path, full=True))
            after.append(time_open(path, full=False))
        os.environ.pop(FULL_CHECK_ENV, None)
        for name, xs in (("before (quick_check)", before), ("after (clean close)", after)):
            print(
                f"{name:22} median {statistics.median(xs) * 1000:9.1f} ms"
                f"   min {min(xs) * 1000:9.1f}   max {max(xs) * 1000:9.1f}"
            )


if __name__ == "__main__":
    main()
