"""The measuring half of `bench_concurrency.py`: one variant, one round, JSON on stdout.

Run by `bench_concurrency.py` with the Python of the variant under test (this checkout's,
or a venv holding an older commit), so it imports only what every version has: the public
`Runtime` API, `lineup_build`'s build, signing and trust, and the standard library.

Usage: python concurrency_driver.py SPEC_JSON
  SPEC_JSON: {"mode": "threads" | "sequential" | "floor" | "startup" | "bundle" | "nodes"
              | "hold", ...}
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

T0_WALL = time.time()  # the interpreter has started and runs this module

#: The trivial app: an `app_ready` tool that answers its integer parameter.
APP = '''
from lineup_sdk import ToolContext, define_agent_tools

tools = define_agent_tools(app_scope="bench")


@tools.tool("bench.ping", activation="app_ready")
async def ping(ctx: ToolContext, n: int) -> int:
    """Answer n."""
    return n
'''
MANIFEST = (
    '[app]\nscope = "bench"\nname = "Bench"\nversion = "1.0.0"\n'
    'entry = "bench_app.tools"\ninclude = ["bench_app/**/*.py"]\n'
)
KEY_SEED = bytes(32)  # the bench signing key: fixed, printed by the benchmark


def emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def pct(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile of an ascending list."""
    return sorted_values[max(0, math.ceil(q * len(sorted_values)) - 1)]


def summary(latencies: list[float], elapsed: float) -> dict[str, Any]:
    lat = sorted(latencies)
    return {
        "calls": len(lat),
        "elapsed_s": elapsed,
        "calls_per_s": len(lat) / elapsed,
        "p50_ms": statistics.median(lat) * 1000,
        "p99_ms": pct(lat, 0.99) * 1000,
        "max_ms": lat[-1] * 1000,
    }


def trust_store() -> Any:
    from lineup_build.signing import key_from_seed
    from lineup_build.trust import TrustedKey, TrustStore

    key = key_from_seed(KEY_SEED)
    return TrustStore.from_keys([TrustedKey(key.key_id, key.public_raw, ("*",), None)])


def build_bundle(out: Path) -> Path:
    """Build the bench app with this interpreter's `lineup_build`."""
    from lineup_build.build import build_project
    from lineup_build.signing import key_from_seed

    app = out / "bench"
    (app / "bench_app").mkdir(parents=True, exist_ok=True)
    (app / "bench_app" / "__init__.py").write_text("")
    (app / "bench_app" / "tools.py").write_text(APP)
    (app / "lineup.toml").write_text(MANIFEST)
    result = build_project(app, signing_key=key_from_seed(KEY_SEED))
    assert result.ok and result.bundle is not None, result.diagnostics
    return Path(result.bundle)


def install(rt: Any, spec: dict[str, Any], tmp: Path) -> str:
    """Install the benchmark's bundle; a version that cannot read it (another bundle
    format) gets the same source built by its own build. Returns which one ran."""
    from lineup_sdk.errors import LineupError

    try:
        rt.install(spec["bundle"])
        return "shared bundle"
    except LineupError as exc:
        rt.install(build_bundle(tmp / "own"))
        return f"own build of the same source (shared bundle refused: {exc.code})"


def open_runtime(db: str) -> Any:
    from lineup_runtime_lite import HostSimulator, Runtime

    return Runtime.open(db, trust=trust_store(), host=HostSimulator("auto"))


def ready_sessions(rt: Any, conversations: int, warm_calls: int) -> None:
    """Untimed: every conversation's session made ready, then warmed with a few calls."""
    for c in range(conversations):
        first = rt.call(f"ready{c}", f"conv{c}", "bench.ping", {"n": -1})
        assert first["stage"] == "accepted", first
    rt.settle()
    for c in range(conversations):
        for w in range(warm_calls):
            msg = rt.call(f"warm{c}-{w}", f"conv{c}", "bench.ping", {"n": w})
            assert msg.get("result") == w, msg


def timed_agents(threads: int, calls: int, runtime: Callable[[int, int], Any]) -> dict[str, Any]:
    """`threads` threads, conversation `c` each, `calls` sequential `bench.ping` calls each
    (call `i` through `runtime(c, i)`), timed from one barrier: `summary`'s figures."""
    latencies: list[list[float]] = [[] for _ in range(threads)]
    errors: list[BaseException] = []
    barrier = threading.Barrier(threads + 1)

    def agent(c: int) -> None:
        try:
            barrier.wait()
            for i in range(calls):
                n = c * 100_000 + i
                rt = runtime(c, i)
                s = time.perf_counter()
                msg = rt.call(f"t{c}-{i}", f"conv{c}", "bench.ping", {"n": n})
                latencies[c].append(time.perf_counter() - s)
                if msg.get("result") != n:
                    raise AssertionError(msg)
        except BaseException as exc:
            errors.append(exc)

    pool = [threading.Thread(target=agent, args=(c,)) for c in range(threads)]
    for t in pool:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in pool:
        t.join()
    elapsed = time.perf_counter() - t0
    if errors:
        raise errors[0]
    return summary([x for lat in latencies for x in lat], elapsed)


def store_of(rt: Any) -> Any:
    """The runtime's store, for its counters, or None on a version that keeps it elsewhere
    (this driver also runs older commits, whose private attributes differ: e258c37 has no
    `AsyncRuntime` behind `Runtime`)."""
    art = getattr(rt, "_art", None)
    engine = getattr(art, "_engine", None)
    return getattr(engine, "store", None)


def mode_threads(spec: dict[str, Any], tmp: Path) -> dict[str, Any]:
    """`threads` threads, one conversation each, `calls` sequential calls each, timed from
    one barrier."""
    threads, calls = spec["threads"], spec["calls"]
    db = spec["db"] if spec["db"] == ":memory:" else str(tmp / "rt.db")
    if spec["db"].startswith("postgresql://"):
        db = spec["db"]  # the PostgreSQL store (benchmarks/bench_postgres.py)
    rt = open_runtime(db)
    try:
        how = install(rt, spec, tmp)
        ready_sessions(rt, threads, spec["warm_calls"])
        store = store_of(rt)  # the round trips are counted at its connection
        trips0 = getattr(store, "round_trips", None)
        commits0 = getattr(store, "commits", None)
        out = {**timed_agents(threads, calls, lambda c, i: rt), "install": how}
        if commits0 is not None:
            out["commits_per_call"] = (store.commits - commits0) / (threads * calls)
        if trips0 is not None:
            out["round_trips_per_call"] = (store.round_trips - trips0) / (threads * calls)
        return out
    finally:
        rt.close()


def mode_nodes(spec: dict[str, Any], tmp: Path) -> dict[str, Any]:
    """Runtime nodes on one PostgreSQL database, in this process (`bench_nodes.py`):
    `layout` `one` (a single node), `split` (each conversation's calls on the node its
    session is on) or `alternating` (each call on the other node from the one before).
    `threads` conversations x `calls` sequential calls, timed from one barrier; round
    trips summed over every node's connections."""
    from lineup_runtime_lite import HostSimulator, Runtime

    threads, calls, layout = spec["threads"], spec["calls"], spec["layout"]
    count = 1 if layout == "one" else 2
    rts = [
        Runtime.open(
            spec["db"],
            trust=trust_store(),
            host=HostSimulator("auto"),
            apps_dir=tmp / f"apps{k}",
            node_id=f"bench{k}",
        )
        for k in range(count)
    ]
    try:
        install(rts[0], spec, tmp)
        for c in range(threads):  # each session on node c % count
            first = rts[c % count].call(f"ready{c}", f"conv{c}", "bench.ping", {"n": -1})
            assert first["stage"] == "accepted", first
        for rt in rts:
            rt.settle()
        for c in range(threads):
            for w in range(spec["warm_calls"]):
                msg = rts[(c + w) % count].call(f"warm{c}-{w}", f"conv{c}", "bench.ping", {"n": w})
                assert msg.get("result") == w, msg
        stores = [store_of(rt) for rt in rts]
        trips0 = sum(st.round_trips for st in stores)
        out = timed_agents(
            threads,
            calls,
            lambda c, i: rts[(c + i) % count] if layout == "alternating" else rts[c % count],
        )
        out["round_trips_per_call"] = (sum(st.round_trips for st in stores) - trips0) / (
            threads * calls
        )
        return out
    finally:
        for rt in rts:
            rt.close()


def mode_hold(spec: dict[str, Any], tmp: Path) -> dict[str, Any]:
    """A node that makes `threads` sessions its own, says so, and then waits to be killed
    (`bench_nodes.py`'s takeover)."""
    from lineup_runtime_lite import HostSimulator, Runtime

    rt = Runtime.open(
        spec["db"],
        trust=trust_store(),
        host=HostSimulator("auto"),
        apps_dir=tmp / "apps-hold",
        node_id="held",
        node_lease_s=spec["lease_s"],
    )
    install(rt, spec, tmp)
    for c in range(spec["threads"]):
        rt.call(f"ready{c}", f"conv{c}", "bench.ping", {"n": -1})
    rt.settle()
    emit({"held": spec["threads"]})
    sys.stdin.readline()  # killed here
    rt.close()
    return {}


def mode_sequential(spec: dict[str, Any], tmp: Path) -> dict[str, Any]:
    """One ready session, `calls` sequential calls: `Runtime.call`, `Runtime.acall` from an
    asyncio caller, `AsyncRuntime.call` (when this version has it) and the raw SQLite floor
    doing this runtime's two FULL commits per call with the same rows."""
    import asyncio

    n = spec["calls"]
    out: dict[str, Any] = {}
    order = ["floor", "call", "acall", "async_runtime"]
    shift = spec.get("round", 0) % len(order)  # rotate the order round by round
    for what in order[shift:] + order[:shift]:
        sub = tmp / what
        sub.mkdir()
        if what == "floor":
            out["floor"] = floor(sub / "floor.db", schema_of(sub), 1, n, 1)
        elif what == "call":
            rt = open_runtime(str(sub / "rt.db"))
            try:
                install(rt, spec, sub)
                ready_sessions(rt, 1, spec["warm_calls"])
                lat = []
                t0 = time.perf_counter()
                for i in range(n):
                    s = time.perf_counter()
                    msg = rt.call(f"s{i}", "conv0", "bench.ping", {"n": i})
                    lat.append(time.perf_counter() - s)
                    assert msg.get("result") == i, msg
                out["call"] = summary(lat, time.perf_counter() - t0)
            finally:
                rt.close()
        elif what == "acall":
            rt = open_runtime(str(sub / "rt.db"))
            try:
                install(rt, spec, sub)
                ready_sessions(rt, 1, spec["warm_calls"])
                if not hasattr(rt, "acall"):
                    out["acall"] = None
                    continue

                async def drive(rt: Any = rt) -> dict[str, Any]:
                    lat = []
                    t0 = time.perf_counter()
                    for i in range(n):
                        s = time.perf_counter()
                        msg = await rt.acall(f"a{i}", "conv0", "bench.ping", {"n": i})
                        lat.append(time.perf_counter() - s)
                        assert msg.get("result") == i, msg
                    return summary(lat, time.perf_counter() - t0)

                out["acall"] = asyncio.run(drive())
            finally:
                rt.close()
        else:
            out["async_runtime"] = asyncio.run(async_runtime(spec, sub, n))
    return out


async def async_runtime(spec: dict[str, Any], sub: Path, n: int) -> dict[str, Any] | None:
    """The same sequential calls through `AsyncRuntime` (None when this version has none)."""
    try:
        from lineup_runtime_lite import AsyncRuntime  # type: ignore[attr-defined]
    except ImportError:
        return None
    from lineup_runtime_lite import HostSimulator

    art = await AsyncRuntime.open(
        str(sub / "rt.db"), trust=trust_store(), host=HostSimulator("auto")
    )
    try:
        await art.install(spec["bundle"])
        first = await art.call("ready0", "conv0", "bench.ping", {"n": -1})
        assert first["stage"] == "accepted", first
        await art.settle()
        for w in range(spec["warm_calls"]):
            msg = await art.call(f"warm0-{w}", "conv0", "bench.ping", {"n": w})
            assert msg.get("result") == w, msg
        lat = []
        t0 = time.perf_counter()
        for i in range(n):
            s = time.perf_counter()
            msg = await art.call(f"s{i}", "conv0", "bench.ping", {"n": i})
            lat.append(time.perf_counter() - s)
            assert msg.get("result") == i, msg
        return summary(lat, time.perf_counter() - t0)
    finally:
        await art.close()


def schema_of(tmp: Path) -> list[str]:
    """The runtime's own schema: the DDL of a database `Runtime.open` just created."""
    rt = open_runtime(str(tmp / "schema.db"))
    rt.close()
    db = sqlite3.connect(tmp / "schema.db")
    try:
        rows = db.execute(
            "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%' "
            "ORDER BY CASE type WHEN 'table' THEN 0 ELSE 1 END, rowid"
        ).fetchall()
    finally:
        db.close()
    return [r[0] for r in rows]


def floor(path: Path, schema: list[str], sessions: int, calls: int, group: int) -> dict[str, Any]:
    """Raw SQLite doing what the runtime writes for a ready-session call, in its schema:
    accept as `delivered` (the session's next seq, the call row), then the result (receipt,
    outbox item, the call `done`) — `group` calls' rows in each of the two FULL commits
    (1: the two commits of every call; more: the group-commit floor)."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.execute("PRAGMA foreign_keys=ON")
    for ddl in schema:
        db.execute(ddl)
    db.execute("BEGIN IMMEDIATE")
    for s in range(sessions):
        db.execute(
            "INSERT INTO app_sessions (app_session_id, conversation_id, scope, version, "
            "created_ms, next_seq) VALUES (?,?,?,?,?,?)",
            (f"sess{s:028d}", f"conv{s}", "bench", "1.0.0", 0, 1),
        )
        db.execute(
            "INSERT INTO activations (activation_id, app_session_id, trigger_call_id, state, "
            "requires_foreground, worker_ready, deadline_ms, created_ms) "
            "VALUES (?,?,?,?,?,?,?,?)",
            (f"act{s:029d}", f"sess{s:028d}", f"ready{s}", "ready", 0, 1, 0, 0),
        )
    db.execute("COMMIT")
    fp = "f" * 64

    def accept(i: int) -> None:
        s = i % sessions
        sid = f"sess{s:028d}"
        seq = db.execute(
            "SELECT next_seq FROM app_sessions WHERE app_session_id=?", (sid,)
        ).fetchone()[0]
        db.execute("UPDATE app_sessions SET next_seq=next_seq+1 WHERE app_session_id=?", (sid,))
        db.execute(
            "INSERT INTO calls (call_id, fingerprint, conversation_id, scope, method, params, "
            "app_session_id, activation_id, seq, state, created_ms) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            (
                f"t{s}-{i}",
                fp,
                f"conv{s}",
                "bench",
                "bench.ping",
                json.dumps({"n": i}),
                sid,
                f"act{s:029d}",
                seq,
                "delivered",
                1_700_000_000_000 + i,
            ),
        )

    def result(i: int) -> None:
        cid = f"t{i % sessions}-{i}"
        body = json.dumps(
            {
                "app_scope": "bench",
                "at": "2024-01-01T00:00:00.000Z",
                "call_id": cid,
                "id": f"{cid}:result",
                "kind": "result",
                "result": i,
                "stage": "result",
            },
            sort_keys=True,
            separators=(",", ":"),
        )
        n = db.execute(
            "SELECT COALESCE(MAX(n), 0) FROM receipts WHERE call_id=?", (cid,)
        ).fetchone()[0]
        db.execute(
            "INSERT OR IGNORE INTO receipts (call_id, stage, n, body) VALUES (?,?,?,?)",
            (cid, "result", n + 1, body),
        )
        db.execute(
            "INSERT INTO outbox (msg_id, call_id, body) VALUES (?,?,?)",
            (f"{cid}:result", cid, body),
        )
        db.execute("UPDATE calls SET state='done' WHERE call_id=?", (cid,))

    t0 = time.perf_counter()
    for start in range(0, calls, group):
        batch = range(start, min(calls, start + group))
        db.execute("BEGIN IMMEDIATE")
        for i in batch:
            accept(i)
        db.execute("COMMIT")
        db.execute("BEGIN IMMEDIATE")
        for i in batch:
            result(i)
        db.execute("COMMIT")
    elapsed = time.perf_counter() - t0
    db.close()
    return {"calls": calls, "group": group, "elapsed_s": elapsed, "calls_per_s": calls / elapsed}


def mode_floor(spec: dict[str, Any], tmp: Path) -> dict[str, Any]:
    schema = schema_of(tmp)
    out = {}
    for k in spec["groups"]:
        out[str(k)] = floor(tmp / f"floor{k}.db", schema, spec["threads"], spec["total"], k)
    return out


def mode_startup(spec: dict[str, Any], tmp: Path) -> dict[str, Any]:
    """What a user pays before the first call: imports, `Runtime.open` on a new file, and
    (separately) the first call's activation, i.e. the worker start."""
    t_imp = time.perf_counter()
    from lineup_runtime_lite import HostSimulator, Runtime

    imported = time.perf_counter()
    trust = trust_store()
    t_open = time.perf_counter()
    rt = Runtime.open(str(tmp / "rt.db"), trust=trust, host=HostSimulator("auto"))
    opened = time.perf_counter()
    opened_wall = time.time()
    try:
        install(rt, spec, tmp)
        t_first = time.perf_counter()
        rt.call("first", "conv0", "bench.ping", {"n": 1})
        rt.settle()
        first = time.perf_counter() - t_first
    finally:
        rt.close()
    return {
        "interpreter_ms": (T0_WALL - spec["spawned_at"]) * 1000,
        "spawn_to_open_ms": (opened_wall - spec["spawned_at"]) * 1000,
        "import_ms": (imported - t_imp) * 1000,
        "open_ms": (opened - t_open) * 1000,
        "import_and_open_ms": (opened - t_imp) * 1000,
        "first_call_ready_ms": first * 1000,
    }


def main() -> None:
    spec = json.loads(sys.argv[1])
    with tempfile.TemporaryDirectory(prefix="lineup-bench-") as tmp_dir:
        tmp = Path(tmp_dir)
        mode = spec["mode"]
        if mode == "threads":
            out = mode_threads(spec, tmp)
        elif mode == "sequential":
            out = mode_sequential(spec, tmp)
        elif mode == "floor":
            out = mode_floor(spec, tmp)
        elif mode == "startup":
            out = mode_startup(spec, tmp)
        elif mode == "nodes":
            out = mode_nodes(spec, tmp)
        elif mode == "hold":
            out = mode_hold(spec, tmp)
        elif mode == "bundle":
            dest = Path(spec["out"])
            built = build_bundle(tmp)
            dest.write_bytes(built.read_bytes())
            out = {"bundle": str(dest)}
        else:
            raise SystemExit(f"unknown mode {mode!r}")
    out["pid"] = os.getpid()
    emit(out)


if __name__ == "__main__":
    main()
