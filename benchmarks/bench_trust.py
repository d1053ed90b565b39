"""What verifying the database's record costs a worker start (issue 33, SPEC 16.1).

On the PostgreSQL store a node verifies the recorded bundle (signature, trust, every file)
before a version's first worker in a process, then caches that per (manifest sha256,
trust-store stamp); later worker starts check only the folder, as before. Bars:
  - the verification is at most 10% of the first worker start of a version after process
    start (a 1 MiB bundle);
  - every later worker start is no slower than at the baseline commit (default 89ded1c).

Workload, per driver process (a fresh process: nothing verified yet): a new database on a
throwaway PostgreSQL 15 server with its durable defaults; a node installs the bundle into its
apps cache and closes (untimed); a second runtime — the process start the bar speaks of —
opens the database with the same cache under `isolation="session"` (a worker per App
session), then times one call in a new conversation (activation, the first worker start,
the delivery), then `--later` more calls, each in a new conversation (a later worker start
each). The current checkout's driver also times the verification itself (reading the
recorded bytes, `load_bundle`, and checking and unpacking them, `verify_recorded`),
and both time the runtime's checks before a worker starts (`_check_trust` at the activation,
`_check_app` before the spawn): the part this change touched, without the spawn's noise.
The baseline and this checkout run side by side, interleaved round by round (`--rounds`, at
least 5); medians reported. The baseline's code runs from a `git worktree` of the commit,
given by `--base-tree` (made with `git worktree add DIR COMMIT` when missing).

Run: python benchmarks/bench_trust.py [--rounds 5] [--later 5] [--base-tree /work/wt/base-89ded1c]
         [--smoke]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from tests.pg_kit import fresh_database, pg_bindir, start_server  # noqa: E402

SEED = bytes(range(1, 33))

DRIVER = r"""
import json, sys, time
spec = json.loads(sys.argv[1])
import lineup_runtime_lite
assert lineup_runtime_lite.__file__.startswith(spec["root"]), lineup_runtime_lite.__file__
from lineup_build.signing import key_from_seed
from lineup_build.trust import TrustStore, TrustedKey
from lineup_runtime_lite import Runtime
import lineup_runtime_lite.api.async_runtime as ar
try:  # where the checks live: their own module since the house issue, AsyncRuntime before
    import lineup_runtime_lite.api.trusted_apps as ta
    home, names = ta, ("check_app", "check_trust")
    owner = ta.TrustedApps
except ImportError:
    home, names, owner = ar, ("_check_app", "_check_trust"), ar.AsyncRuntime

key = key_from_seed(bytes.fromhex(spec["seed"]))
trust = TrustStore.from_keys([TrustedKey(key.key_id, key.public_raw, ("*",), "bench")])
verify_s = []
if hasattr(home, "verify_recorded"):
    inner = home.verify_recorded
    def timed(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            verify_s.append(time.perf_counter() - t0)
    home.verify_recorded = timed
    from lineup_runtime_lite.store.postgres import PostgresStore
    load = PostgresStore.load_bundle
    def timed_load(self, digest):  # reading the recorded bytes is part of verifying them
        t0 = time.perf_counter()
        try:
            return load(self, digest)
        finally:
            verify_s.append(time.perf_counter() - t0)
    PostgresStore.load_bundle = timed_load
import inspect
phase = ["install"]
checks = {"first": 0.0, "later": 0.0}  # seconds in the runtime's app checks, by phase
def timing(fn):
    if inspect.iscoroutinefunction(fn):
        async def wrapped(self, *args):
            t0 = time.perf_counter()
            try:
                return await fn(self, *args)
            finally:
                checks[phase[0]] = checks.get(phase[0], 0.0) + time.perf_counter() - t0
    else:
        def wrapped(self, *args):
            t0 = time.perf_counter()
            try:
                return fn(self, *args)
            finally:
                checks[phase[0]] = checks.get(phase[0], 0.0) + time.perf_counter() - t0
    return wrapped
for name in names:  # what a worker start checks (both versions)
    setattr(owner, name, timing(getattr(owner, name)))
opts = dict(trust=trust, apps_dir=spec["apps"], isolation="session")
with Runtime.open(spec["db"], node_id="installer", **opts) as rt:
    rt.install(spec["bundle"])

def one(rt, n):
    t0 = time.perf_counter()
    rt.call(f"c{n}", f"conv{n}", "probe.echo", {"text": "x"})
    rt.settle()
    took = time.perf_counter() - t0
    final = [m for m in rt.outbox.all() if m["call_id"] == f"c{n}" and m["kind"] != "receipt"]
    assert final and final[0]["kind"] == "result", final
    return took

with Runtime.open(spec["db"], node_id="bench", **opts) as rt:
    phase[0] = "first"
    first = one(rt, 0)
    phase[0] = "later"
    later = [one(rt, n) for n in range(1, spec["later"] + 1)]
out = {"first_s": first, "later_s": later, "verify_s": verify_s}
out["first_checks_s"] = checks["first"]
out["later_checks_s"] = checks["later"] / spec["later"]
print(json.dumps(out))
"""


def _bundle(tmp: Path) -> Path:
    """The probe app plus a 1 MiB module nobody imports: a 1 MiB bundle."""
    from lineup_build.build import build_project
    from lineup_build.signing import key_from_seed

    src = tmp / "src"
    shutil.copytree(ROOT / "tests" / "runtime" / "apps" / "probe", src)
    line = "# " + "0123456789abcdef" * 4 + "\n"
    (src / "probe_app" / "blob.py").write_text(line * ((1 << 20) // len(line)))
    result = build_project(src, signing_key=key_from_seed(SEED), out_dir=tmp / "out")
    assert result.ok and result.bundle is not None
    return result.bundle


def _driver(root: Path, spec: dict[str, Any], tmp: Path) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PYTHONPATH"] = str(root)
    script = tmp / "trust_driver.py"
    script.write_text(DRIVER)
    proc = subprocess.run(
        [sys.executable, str(script), json.dumps({**spec, "root": str(root)})],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp,
        timeout=600,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"driver for {root} failed ({proc.returncode}):\n{proc.stderr}")
    out: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--later", type=int, default=5)
    ap.add_argument("--base", default="89ded1c")
    ap.add_argument("--base-tree", type=Path, default=Path("/work/wt/base-89ded1c"))
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--smoke", action="store_true", help="a tiny size, one round (CI)")
    args = ap.parse_args()
    if args.smoke:  # one round, this checkout as its own baseline (no worktree is made)
        args.rounds, args.later, args.base_tree = 1, 1, ROOT
    if pg_bindir() is None:
        raise SystemExit("no PostgreSQL server binaries (pg_config --bindir, LINEUP_PG_BINDIR)")
    if not args.base_tree.exists():
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", str(args.base_tree), args.base],
            check=True,
        )
    roots = {"base": args.base_tree.resolve(), "current": ROOT}
    results: dict[str, list[dict[str, Any]]] = {"base": [], "current": []}
    server = start_server(durable=True)
    try:
        with tempfile.TemporaryDirectory(prefix="lineup-bench-trust-") as name:
            tmp = Path(name)
            bundle = _bundle(tmp)
            print(f"bundle: {bundle.stat().st_size} bytes", file=sys.stderr)
            for r in range(args.rounds):
                order = ["base", "current"] if r % 2 == 0 else ["current", "base"]
                for variant in order:
                    run = tmp / f"{variant}-{r}"
                    run.mkdir()
                    spec = {
                        "db": fresh_database(server),
                        "apps": str(run / "apps"),
                        "bundle": str(bundle),
                        "seed": SEED.hex(),
                        "later": args.later,
                    }
                    out = _driver(roots[variant], spec, run)
                    results[variant].append(out)
                    print(
                        f"round {r} {variant}: first {out['first_s'] * 1000:.1f} ms, later "
                        f"median {statistics.median(out['later_s']) * 1000:.1f} ms, verify "
                        f"{sum(out['verify_s']) * 1000:.2f} ms, checks first "
                        f"{out['first_checks_s'] * 1000:.2f} ms, later "
                        f"{out['later_checks_s'] * 1000:.2f} ms",
                        file=sys.stderr,
                    )
    finally:
        server.stop()

    def med(variant: str, fn: Any) -> float:
        return statistics.median(fn(o) for o in results[variant])

    report: dict[str, Any] = {}
    for variant in results:
        report[variant] = {
            "first_start_ms": med(variant, lambda o: o["first_s"] * 1000),
            "later_start_ms": med(variant, lambda o: statistics.median(o["later_s"]) * 1000),
            "verify_ms": med(variant, lambda o: sum(o["verify_s"]) * 1000),
            "verifications_per_process": med(variant, lambda o: len(o["verify_s"]) // 2),
            "first_checks_ms": med(variant, lambda o: o["first_checks_s"] * 1000),
            "later_checks_ms": med(variant, lambda o: o["later_checks_s"] * 1000),
        }
    cur = report["current"]
    report["verify_share_of_first_start"] = cur["verify_ms"] / cur["first_start_ms"]
    base = report["base"]
    report["later_current_over_base"] = cur["later_start_ms"] / base["later_start_ms"]
    report["later_checks_current_over_base"] = cur["later_checks_ms"] / base["later_checks_ms"]
    report["verify_bar_met"] = report["verify_share_of_first_start"] <= 0.10
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(
        f"{'variant':<10}{'first ms':>10}{'later ms':>10}{'verify ms':>11}{'verifies':>10}"
        f"{'checks 1st ms':>15}{'checks later ms':>17}"
    )
    for variant in ("base", "current"):
        row = report[variant]
        print(
            f"{variant:<10}{row['first_start_ms']:>10.1f}{row['later_start_ms']:>10.1f}"
            f"{row['verify_ms']:>11.2f}{row['verifications_per_process']:>10.0f}"
            f"{row['first_checks_ms']:>15.2f}{row['later_checks_ms']:>17.2f}"
        )
    print(
        f"verification / first start: {report['verify_share_of_first_start']:.1%} (bar 10%); "
        f"later starts current / base: {report['later_current_over_base']:.2f} end to end, "
        f"{report['later_checks_current_over_base']:.2f} in the runtime's checks"
    )


if __name__ == "__main__":
    main()
