"""A runtime process for kill -9 tests: plays calls and prints each acknowledged answer.

Usage: python driver.py DB TRUST BUNDLE START COUNT
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from lineup_runtime_lite import HostSimulator, Runtime, VirtualClock
from lineup_runtime_lite.internals import engine_of


def main() -> None:
    db, trust, bundle, start, count = sys.argv[1:6]
    rt = Runtime.open(db, trust=Path(trust), clock=VirtualClock(), host=HostSimulator("auto"))
    rt.install(bundle)
    for i in range(int(start), int(start) + int(count)):
        conv = f"conv{i % 3}"
        msg = rt.call(f"c{i}", conv, "probe.append", {"item": f"i{i}"})
        pids = [w.pid for w in engine_of(rt).workers.values() if w.pid]
        print(json.dumps({"call_id": f"c{i}", "stage": msg["stage"], "workers": pids}), flush=True)
        if i == int(start):
            rt.settle()  # later calls find a running worker (and a ready session)
    rt.settle()
    print("done", flush=True)
    rt.close()


if __name__ == "__main__":
    main()
