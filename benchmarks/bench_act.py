"""UI Actions through the Python entry, beside the Agent's calls (issue 37, "Measure").

Workload 1 — `Surface.act` round trip: one ready App session on the SQLite file store (WAL,
synchronous=FULL). An Agent thread calls the writing tool `actbench.add` on that session at
a fixed `--rate` calls/s (default 20; each handler takes about 1 ms), while the main thread
asks for `--actions` UI Actions `actbench.tick` one after another (client `bench`, seq 1, 2,
3, …), each timed from `act()` to its outcome. After each round the session data must be
the serial application of every accepted operation: every add and every tick applied once,
in the session's order, and the revision equal to the number of writes.

Workload 2 — the 50-conversation calls/s of `bench_concurrency.py` (its driver, its
`threads` mode), for this checkout and for `--baselines` (default: 65799db, where UI Actions
and atomic deliveries began, and 89ded1c), each baseline installed non-editable in a venv
of its own. Atomic deliveries must cost no more than noise.

Every variant runs in its own process; the variants and workloads interleave over
`--rounds` rounds (the order rotates each round); medians and min–max are reported. The
workload is deterministic; the signing key seed is 32 zero bytes.

Run: python benchmarks/bench_act.py [--rounds 5] [--actions 200] [--rate 20]
         [--threads 50] [--calls 30] [--baselines 65799db,89ded1c] [--no-baseline] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_concurrency import baseline_python, run_driver  # noqa: E402

BASELINES = "65799db,89ded1c"

#: The measuring half, run in a child process of this checkout's Python.
ACT_DRIVER = '''
import json, math, statistics, sys, threading, time
from pathlib import Path

spec = json.loads(sys.argv[1])
from lineup_build.build import build_project
from lineup_build.signing import key_from_seed
from lineup_build.trust import TrustedKey, TrustStore
from lineup_runtime_lite import HostSimulator, Runtime

TOOLS = """
import asyncio
from lineup_sdk import ToolContext, define_agent_tools

tools = define_agent_tools(app_scope="actbench")


async def apply(session_data, entry):
    snap = await session_data.get()
    log = list((snap.data or {}).get("log", []))
    log.append(entry)
    await session_data.replace({"log": log}, expected_revision=snap.revision)
    return len(log)


@tools.tool("actbench.add", activation="app_ready")
async def add(ctx: ToolContext, n: int) -> int:
    \\"\\"\\"Append an Agent entry (about 1 ms of handler time).\\"\\"\\"
    await asyncio.sleep(0.001)
    return await apply(ctx.session_data, f"a{n}")
"""
ACTIONS = """
from lineup_sdk import ActionContext, define_ui_actions

from actbench_app.tools import apply

actions = define_ui_actions(app_scope="actbench")


@actions.action("actbench.tick")
async def tick(ctx: ActionContext, n: int) -> int:
    \\"\\"\\"Append a UI entry.\\"\\"\\"
    return await apply(ctx.session_data, f"u{n}")
"""
key = key_from_seed(bytes(32))
tmp = Path(spec["tmp"])
app = tmp / "actbench"
(app / "actbench_app").mkdir(parents=True)
(app / "actbench_app" / "__init__.py").write_text("from actbench_app import actions  # noqa\\n")
(app / "actbench_app" / "tools.py").write_text(TOOLS)
(app / "actbench_app" / "actions.py").write_text(ACTIONS)
(app / "lineup.toml").write_text(
    '[app]\\nscope = "actbench"\\nname = "Act bench"\\nversion = "1.0.0"\\n'
    'entry = "actbench_app.tools"\\ninclude = ["actbench_app/**/*.py"]\\n'
)
built = build_project(app, signing_key=key)
assert built.ok and built.bundle is not None, built.diagnostics
trust = TrustStore.from_keys([TrustedKey(key.key_id, key.public_raw, ("*",), None)])
rt = Runtime.open(str(tmp / "rt.db"), trust=trust, host=HostSimulator("auto"))
try:
    rt.install(built.bundle)
    first = rt.call("ready", "c1", "actbench.add", {"n": 0})
    rt.settle()
    surface = rt.surface("c1", "actbench")
    rt.call("warm", "c1", "actbench.add", {"n": 1})
    surface.act("actbench.tick", {"n": 0}, client_id="warm", seq=1)
    stop = threading.Event()
    agent_calls = []

    def agent() -> None:
        period = 1.0 / spec["rate"]
        nxt = time.monotonic()
        i = 2
        while not stop.is_set():
            rt.call(f"agent{i}", "c1", "actbench.add", {"n": i})
            agent_calls.append(i)
            i += 1
            nxt += period
            delay = nxt - time.monotonic()
            if delay > 0:
                stop.wait(delay)

    thread = threading.Thread(target=agent)
    thread.start()
    lat = []
    try:
        for n in range(1, spec["actions"] + 1):
            t0 = time.perf_counter()
            out = surface.act("actbench.tick", {"n": n}, client_id="bench", seq=n)
            lat.append(time.perf_counter() - t0)
            assert out["action_id"] == f"bench:{n}", out
    finally:
        stop.set()
        thread.join()
    rt.settle()
    snap = surface.get()
    log = snap.data["log"]
    ticks = [e for e in log if e.startswith("u") and e != "u0"]
    adds = [e for e in log if e.startswith("a")]
    serial = (
        ticks == [f"u{n}" for n in range(1, spec["actions"] + 1)]
        and adds == [f"a{n}" for n in [0, 1, *agent_calls]]
        and snap.revision == len(log)
    )
    lat.sort()
    print(json.dumps({
        "actions": len(lat),
        "agent_calls": len(agent_calls),
        "p50_ms": statistics.median(lat) * 1000,
        "p99_ms": lat[max(0, math.ceil(0.99 * len(lat)) - 1)] * 1000,
        "max_ms": lat[-1] * 1000,
        "serial": serial,
    }))
finally:
    rt.close()
'''


def run_act(spec: dict[str, Any]) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PYTHONPATH"] = str(HERE.parent)
    with tempfile.TemporaryDirectory(prefix="lineup-bench-act-") as tmp:
        proc = subprocess.run(
            [sys.executable, "-c", ACT_DRIVER, json.dumps({**spec, "tmp": tmp})],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp,
            check=False,
        )
    if proc.returncode != 0:
        raise SystemExit(f"the act driver failed:\n{proc.stderr[-3000:]}")
    out: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


def spread(rows: list[dict[str, Any]], key: str) -> str:
    values = [r[key] for r in rows]
    return f"{statistics.median(values):8.1f} ({min(values):.1f}–{max(values):.1f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--actions", type=int, default=200)
    parser.add_argument("--rate", type=float, default=20.0, help="Agent calls/s beside")
    parser.add_argument("--threads", type=int, default=50)
    parser.add_argument("--calls", type=int, default=30, help="sequential calls per thread")
    parser.add_argument("--baselines", default=BASELINES, help="commits, comma-separated")
    parser.add_argument(
        "--baseline-dir",
        type=Path,
        default=Path(tempfile.gettempdir()) / "lineup-bench-baseline",
        help="where the baseline venvs are cached",
    )
    parser.add_argument("--no-baseline", action="store_true")
    parser.add_argument("--smoke", action="store_true", help="a tiny size, one round (CI)")
    args = parser.parse_args()
    if args.smoke:
        args.rounds, args.actions, args.threads, args.calls = 1, 5, 2, 2
        args.no_baseline = True
    here = sys.executable
    olds = (
        {}
        if args.no_baseline
        else {c: baseline_python(c, args.baseline_dir) for c in args.baselines.split(",") if c}
    )
    print(
        f"python {sys.version.split()[0]}  cpus {os.cpu_count()}  load "
        f"{os.getloadavg()[0]:.2f}  baselines {','.join(olds) or '-'}"
    )
    print(
        f"parameters: rounds={args.rounds} actions={args.actions} rate={args.rate}/s "
        f"threads={args.threads} calls/thread={args.calls}; deterministic workload, "
        "key seed = 32 zero bytes"
    )
    act_rows: list[dict[str, Any]] = []
    conc: dict[str, list[dict[str, Any]]] = {"this checkout": [], **{c: [] for c in olds}}
    with tempfile.TemporaryDirectory(prefix="lineup-bench-") as tmp_dir:
        bundle = str(Path(tmp_dir) / "bench.lineup")
        run_driver(here, {"mode": "bundle", "out": bundle}, current=True)
        common = {"bundle": bundle, "threads": args.threads, "calls": args.calls}
        common |= {"warm_calls": 1, "mode": "threads", "db": "file"}
        jobs: list[tuple[str, Any]] = [("act", None), ("this checkout", (here, True))]
        jobs += [(c, (py, False)) for c, py in olds.items()]
        for r in range(args.rounds):
            order = jobs[r % len(jobs) :] + jobs[: r % len(jobs)]
            for name, variant in order:
                if variant is None:
                    act_rows.append(run_act({"actions": args.actions, "rate": args.rate}))
                else:
                    python, current = variant
                    out = run_driver(python, {**common, "round": r}, current=current)
                    conc[name].append(out)
            print(f"# round {r + 1}/{args.rounds} done (load {os.getloadavg()[0]:.2f})")
    print(
        "\nSurface.act round trip, ms, median (min–max) over rounds, "
        f"{args.actions} actions beside {args.rate:g} Agent calls/s:"
    )
    print(
        f"  p50 {spread(act_rows, 'p50_ms')}   p99 {spread(act_rows, 'p99_ms')}   "
        f"max {spread(act_rows, 'max_ms')}"
    )
    serial = all(r["serial"] for r in act_rows)
    print(f"  final data = serial application of every accepted operation: {serial}")
    print(f"\n{args.threads} conversations × {args.calls} calls, calls/s and p99 ms:")
    for name, rows in conc.items():
        print(f"  {name:14} calls/s {spread(rows, 'calls_per_s')}   p99 {spread(rows, 'p99_ms')}")
    if not serial:
        raise SystemExit("the final data was not the serial application")


if __name__ == "__main__":
    main()
