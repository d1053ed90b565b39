"""Runtime speed, side by side in one run (issue: reference runtime core).

1. SDK receive-entry dispatch (lookup, validation, handler call) for a trivial async
   handler, against MCP SDK's in-process `call_tool` on the same function (if installed).
2. End to end on a ready session with durable `synchronous=FULL` commits: validate,
   persist, deliver to the worker, persist the result, reply — against the raw SQLite
   floor doing the same commits per call with the same rows.
3. Memory with 100 concurrent App sessions.

Only the public API is used (workers are found as this process's child processes).

Run: python benchmarks/bench_runtime.py [--calls 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

APP = '''
from lineup_sdk import ToolContext, define_agent_tools

tools = define_agent_tools(app_scope="bench")


@tools.tool("bench.ping", activation="app_ready")
async def ping(ctx: ToolContext, n: int) -> int:
    """Answer n."""
    return n
'''


def dispatch_bench(n: int) -> dict[str, float]:
    from lineup_sdk import ToolContext
    from lineup_sdk._receive import Dispatcher

    namespace: dict[str, Any] = {}
    exec(compile(APP, "bench_app.py", "exec"), namespace)  # module-level, like a real app
    d = Dispatcher(namespace["tools"])
    ctx = ToolContext("c", "bench", "s", "conv", session_data=None)  # type: ignore[arg-type]

    async def ours() -> float:
        for _ in range(200):
            await d.dispatch("bench.ping", {"n": 1}, ctx)
        t0 = time.perf_counter()
        for _ in range(n):
            await d.dispatch("bench.ping", {"n": 1}, ctx)
        return (time.perf_counter() - t0) / n * 1e6

    out = {"lineup_dispatch_us": asyncio.run(ours())}
    try:
        from mcp.server.mcpserver import MCPServer
    except ImportError:
        return out
    server = MCPServer("bench")

    @server.tool()
    async def mping(n: int) -> int:
        """Answer n."""
        return n

    async def theirs() -> float:
        for _ in range(200):
            await server.call_tool("mping", {"n": 1})
        t0 = time.perf_counter()
        for _ in range(n):
            await server.call_tool("mping", {"n": 1})
        return (time.perf_counter() - t0) / n * 1e6

    out["mcp_call_tool_us"] = asyncio.run(theirs())
    return out


def sqlite_floor(path: Path, n: int) -> float:
    """Calls/s of raw SQLite doing this runtime's commits per ready-session call."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.execute(
        "CREATE TABLE calls (call_id TEXT PRIMARY KEY, fp TEXT, conv TEXT, scope TEXT, method TEXT, params TEXT, sid TEXT, aid TEXT, seq INTEGER, state TEXT, created INTEGER)"
    )
    db.execute(
        "CREATE TABLE receipts (call_id TEXT, stage TEXT, n INTEGER, body TEXT, PRIMARY KEY (call_id, stage))"
    )
    db.execute(
        "CREATE TABLE outbox (id INTEGER PRIMARY KEY AUTOINCREMENT, msg_id TEXT UNIQUE, call_id TEXT, body TEXT, acked INTEGER DEFAULT 0)"
    )
    db.execute("CREATE TABLE sessions (sid TEXT PRIMARY KEY, next_seq INTEGER)")
    db.execute("INSERT INTO sessions VALUES ('s', 1)")
    body = json.dumps(
        {"id": "x:result", "call_id": "x", "kind": "result", "result": 1, "stage": "result"}
    )
    t0 = time.perf_counter()
    for i in range(n):
        cid = f"c{i}"
        db.execute("BEGIN IMMEDIATE")  # accept + delivered
        db.execute("UPDATE sessions SET next_seq = next_seq + 1 WHERE sid='s'")
        db.execute(
            "INSERT INTO calls VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            (cid, "f" * 64, "conv", "bench", "bench.ping", '{"n":1}', "s", "a", i, "delivered", 0),
        )
        db.execute("COMMIT")
        db.execute("BEGIN IMMEDIATE")  # result + outbox
        db.execute("INSERT INTO receipts VALUES (?,?,?,?)", (cid, "result", 1, body))
        db.execute(
            "INSERT INTO outbox (msg_id, call_id, body) VALUES (?,?,?)",
            (cid + ":result", cid, body),
        )
        db.execute("UPDATE calls SET state='done' WHERE call_id=?", (cid,))
        db.execute("COMMIT")
    elapsed = time.perf_counter() - t0
    db.close()
    return n / elapsed


def build_bundle(tmp: Path) -> tuple[Path, Any]:
    from lineup_build.build import build_project
    from lineup_build.signing import key_from_seed
    from lineup_build.trust import TrustedKey, TrustStore

    app = tmp / "bench"
    (app / "bench_app").mkdir(parents=True)
    (app / "bench_app" / "__init__.py").write_text("")
    (app / "bench_app" / "tools.py").write_text(APP)
    (app / "lineup.toml").write_text(
        '[app]\nscope = "bench"\nname = "Bench"\nversion = "1.0.0"\nentry = "bench_app.tools"\ninclude = ["bench_app/**/*.py"]\n'
    )
    key = key_from_seed(bytes(32))
    result = build_project(app, signing_key=key)
    assert result.ok and result.bundle is not None
    trust = TrustStore.from_keys([TrustedKey(key.key_id, key.public_raw, ("*",), None)])
    return result.bundle, trust


def rss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:  # exited meanwhile
        pass
    return 0


def child_pids() -> list[int]:
    """Every live descendant of this process, found by walking `/proc` (Linux): the
    runtime's workers without reaching into the runtime."""
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


def e2e(tmp: Path, n: int) -> dict[str, Any]:
    from lineup_runtime_lite import HostSimulator, Runtime

    bundle, trust = build_bundle(tmp)
    rt = Runtime.open(tmp / "rt.db", trust=trust, host=HostSimulator("auto"))
    try:
        rt.install(bundle)
        rt.call("warm", "conv", "bench.ping", {"n": 0})
        rt.settle()
        for i in range(200):
            rt.call(f"w{i}", "conv", "bench.ping", {"n": i})
        lat = []
        t0 = time.perf_counter()
        for i in range(n):
            s = time.perf_counter()
            msg = rt.call(f"c{i}", "conv", "bench.ping", {"n": i})
            lat.append(time.perf_counter() - s)
            assert msg["result"] == i
        elapsed = time.perf_counter() - t0
        lat.sort()
        out: dict[str, Any] = {
            "calls": n,
            "calls_per_s": n / elapsed,
            "p50_ms": statistics.median(lat) * 1000,
            "p99_ms": lat[int(len(lat) * 0.99) - 1] * 1000,
        }
        # memory with 100 concurrent App sessions (one worker per app version serves them)
        for c in range(100):
            rt.call(f"open{c}", f"conv{c}", "bench.ping", {"n": c})
        rt.settle()
        workers = child_pids()  # the workers (and their trees): this process's descendants
        out["sessions"] = len(rt.store_dump()["app_sessions"])
        out["workers"] = len(workers)
        out["runtime_rss_mib"] = rss_kb(os.getpid()) / 1024
        out["worker_rss_mib"] = sum(rss_kb(pid) for pid in workers) / 1024
        out["runtime_peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        return out
    finally:
        rt.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--smoke", action="store_true", help="a tiny size, one round (CI)")
    args = parser.parse_args()
    if args.smoke:
        args.calls = 5
    print("python", sys.version.split()[0], "sqlite", sqlite3.sqlite_version)
    d = dispatch_bench(20000)
    for k, v in d.items():
        print(f"{k:28s} {v:8.2f}")
    with tempfile.TemporaryDirectory() as tmp:
        floor = sqlite_floor(Path(tmp) / "floor.db", args.calls)
        res = e2e(Path(tmp), args.calls)
    print(f"{'sqlite_floor_calls_per_s':28s} {floor:8.0f}   (2 FULL commits per call, same rows)")
    for k, v in res.items():
        print(f"{k:28s} {v:8.2f}" if isinstance(v, float) else f"{k:28s} {v:8d}")
    print(f"{'ratio_to_floor':28s} {res['calls_per_s'] / floor:8.2%}")


if __name__ == "__main__":
    main()
