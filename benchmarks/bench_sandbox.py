"""What containment costs (issue: contain MiniApp code), side by side in one run.

Every figure is measured for `sandbox="best_effort"` (everything this platform enforces)
and `sandbox="off"`, interleaved round by round so machine noise hits both alike:

1. Worker start: the first call on a cold app, through `Runtime.call` + `settle()` until
   its result is stored (process start-up, imports, sandbox set-up, handshake included).
2. A ready session: sequential calls/s through `Runtime.call` on a file database.
3. `lineup build` of the 1,000-tool app (benchmarks/bench_build.py's generator) as a whole
   CLI process, `--sandbox best_effort` against `--sandbox off`.
4. The control groups of round 3 (SPEC 13.3): creating and removing one worker's `pids`
   and `memory` groups, and worker start with them against best_effort without them
   (`simulate_unavailable("cgroups")`), in the same interleaved rounds.

Targets: start within +50 ms, calls/s within -5 %, build within +5 %.

Run: python benchmarks/bench_sandbox.py [--rounds 7] [--calls 1000] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
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


def _bundle(tmp: Path) -> tuple[Path, Any]:
    from lineup_build.build import build_project
    from lineup_build.signing import key_from_seed
    from lineup_build.trust import TrustedKey, TrustStore

    root = tmp / "bench"
    (root / "bench_app").mkdir(parents=True)
    (root / "bench_app" / "__init__.py").write_text("")
    (root / "bench_app" / "tools.py").write_text(APP)
    (root / "lineup.toml").write_text(
        '[app]\nscope = "bench"\nname = "Bench"\nversion = "1.0.0"\n'
        'entry = "bench_app.tools"\ninclude = ["bench_app/**/*.py"]\n'
    )
    key = key_from_seed(bytes(range(32)))
    result = build_project(root, signing_key=key)
    assert result.ok and result.bundle is not None
    trust = TrustStore.from_keys([TrustedKey(key.key_id, key.public_raw, ("*",), None)])
    return result.bundle, trust


def cold_start_ms(bundle: Path, trust: Any, mode: str, tmp: Path) -> float:
    """One fresh runtime: first call on a cold app until its result is stored
    (`no_cgroups`: best_effort with the control groups treated as unavailable)."""
    from lineup_sdk.sandbox import simulate_unavailable

    if mode == "no_cgroups":
        with simulate_unavailable("cgroups"):
            return cold_start_ms(bundle, trust, "best_effort", tmp)
    return _cold_start_ms(bundle, trust, mode, tmp)


def _cold_start_ms(bundle: Path, trust: Any, mode: str, tmp: Path) -> float:
    from lineup_runtime_lite import Runtime, VirtualClock

    with Runtime.open(":memory:", trust=trust, clock=VirtualClock(), sandbox=mode) as rt:
        rt.install(bundle)
        t0 = time.perf_counter()
        rt.call("c0", "conv", "bench.ping", {"n": 1})
        rt.settle()
        elapsed = (time.perf_counter() - t0) * 1000
        assert any(m["id"] == "c0:result" for m in rt.outbox.all())
    return elapsed


def calls_per_s(bundle: Path, trust: Any, mode: str, tmp: Path, n: int) -> float:
    """Sequential calls on a ready session, file database (the embedded default)."""
    from lineup_runtime_lite import Runtime, VirtualClock

    db = Path(tempfile.mkdtemp(dir=tmp)) / "rt.db"
    with Runtime.open(db, trust=trust, clock=VirtualClock(), sandbox=mode) as rt:
        rt.install(bundle)
        rt.call("w0", "conv", "bench.ping", {"n": 0})
        rt.settle()
        for i in range(20):  # warm the path
            rt.call(f"w{i + 1}", "conv", "bench.ping", {"n": i})
        t0 = time.perf_counter()
        for i in range(n):
            msg = rt.call(f"c{i}", "conv", "bench.ping", {"n": i})
            assert msg.get("result") == i, msg
        return n / (time.perf_counter() - t0)


def cgroups_ms(n: int) -> float | None:
    """Median time to create one worker's groups with their limits and remove them."""
    from lineup_sdk.sandbox import _cgroups

    if not _cgroups.available():
        return None
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        groups = _cgroups.create(1024, 64)
        assert groups.dirs, "no group could be created"
        assert groups.remove()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def build_s(app: Path, key: Path, mode: str, out: Path) -> float:
    lineup = str(Path(sys.executable).with_name("lineup"))
    t0 = time.perf_counter()
    proc = subprocess.run(
        [lineup, "build", str(app), "--key", str(key), "--out", str(out), "--sandbox", mode],
        capture_output=True,
        check=False,
    )
    elapsed = time.perf_counter() - t0
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--build-rounds", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--smoke", action="store_true", help="a tiny size, one round (CI)")
    args = parser.parse_args()
    if args.smoke:
        args.rounds = 1
        args.calls = 5
        args.build_rounds = 1

    from benchmarks.bench_build import generate
    from lineup_build.signing import write_keypair
    from lineup_sdk.sandbox import describe, probe

    modes = ("best_effort", "off")
    out: dict[str, Any] = {"enforced": describe(probe("best_effort"))}
    with tempfile.TemporaryDirectory(prefix="bench-sandbox-") as t:
        tmp = Path(t)
        bundle, trust = _bundle(tmp)
        start_modes = (*modes, "no_cgroups")
        starts: dict[str, list[float]] = {m: [] for m in start_modes}
        rates: dict[str, list[float]] = {m: [] for m in modes}
        groups: list[float] = []
        for r in range(args.rounds):
            order = modes if r % 2 == 0 else modes[::-1]
            for mode in start_modes if r % 2 == 0 else start_modes[::-1]:
                starts[mode].append(cold_start_ms(bundle, trust, mode, tmp))
            cg = cgroups_ms(20)
            if cg is not None:
                groups.append(cg)
            for mode in order:
                rates[mode].append(calls_per_s(bundle, trust, mode, tmp, args.calls))
        app = generate(tmp / "app1000", 1000)
        key, _, _ = write_keypair(tmp / "keys")
        builds: dict[str, list[float]] = {m: [] for m in modes}
        build_s(app, key, "off", tmp / "warm")  # warm the page cache once
        for r in range(args.build_rounds):
            for mode in modes if r % 2 == 0 else modes[::-1]:
                builds[mode].append(build_s(app, key, mode, tmp / f"out-{mode}-{r}"))
    med = statistics.median
    s_on, s_off = med(starts["best_effort"]), med(starts["off"])
    s_bare = med(starts["no_cgroups"])
    cg_ms = med(groups) if groups else None
    c_on, c_off = med(rates["best_effort"]), med(rates["off"])
    b_on, b_off = med(builds["best_effort"]), med(builds["off"])
    out.update(
        {
            "worker_start_ms": {
                "sandboxed": s_on,
                "off": s_off,
                "delta_ms": s_on - s_off,
                "sandboxed_without_cgroups": s_bare,
                "cgroups_delta_ms": s_on - s_bare,
            },
            "cgroups_create_remove_ms": cg_ms,
            "ready_calls_per_s": {"sandboxed": c_on, "off": c_off, "ratio": c_on / c_off},
            "build_1000_tools_s": {"sandboxed": b_on, "off": b_off, "ratio": b_on / b_off},
            "rounds": args.rounds,
            "calls": args.calls,
            "build_rounds": args.build_rounds,
        }
    )
    if args.json:
        print(json.dumps(out, indent=2))
        return
    print(out["enforced"])
    print(
        f"worker start (first call, cold app): sandboxed {s_on:.1f} ms, off {s_off:.1f} ms, "
        f"delta {s_on - s_off:+.1f} ms (target +50 ms); without cgroups {s_bare:.1f} ms "
        f"(cgroups {s_on - s_bare:+.1f} ms)"
    )
    print(
        "one worker's pids + memory groups, create and remove: "
        + (f"{cg_ms:.2f} ms" if cg_ms is not None else "no cgroups here")
    )
    print(
        f"ready session calls/s: sandboxed {c_on:.0f}, off {c_off:.0f}, "
        f"ratio {c_on / c_off:.3f} (target >= 0.95)"
    )
    print(
        f"lineup build, 1,000 tools: sandboxed {b_on:.2f} s, off {b_off:.2f} s, "
        f"ratio {b_on / b_off:.3f} (target <= 1.05)"
    )


if __name__ == "__main__":
    main()
