"""Benchmark `lineup diff` of two 1,000-tool bundles as a whole process.

Generates the 1,000-tool MiniApp of `bench_build.py` (half keyword tools with `Field`
constraints, half one pydantic model each), builds it as 1.0.0 and, with every keyword
tool's `title` tightened (`max_length` 200 → 100), as 1.1.0; then times fresh processes,
Python start-up and imports included, each figure the median of `--runs`:

* `lineup diff OLD.lineup NEW.lineup` (500 breaking changes, exit 1);
* the same with `--json`;
* `lineup diff OLD.lineup OLD.lineup` (no change, exit 0);
* `lineup --version` as the floor of any `lineup` process.

Target: the first figure under 1 s. CPU time (user + system of the process) is printed
too: on a shared machine it is the steadier figure. Run it with the interpreter that has
the toolchain:

    python benchmarks/bench_diff.py [--tools 1000] [--runs 7] [--json]

It is not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_build import generate

PY = sys.executable
LINEUP = str(Path(PY).with_name("lineup"))
TARGET_S = 1.0


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run(cmd: list[str], env: dict[str, str], expect: int) -> tuple[float, float]:
    """Wall time and CPU time (user + system) of one fresh process."""
    cpu, start = _cpu(), time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, check=False)
    elapsed, cpu = time.perf_counter() - start, _cpu() - cpu
    if proc.returncode != expect:
        raise SystemExit(
            f"{' '.join(cmd)} exited {proc.returncode}, expected {expect}\n"
            f"{proc.stdout.decode()[-2000:]}\n{proc.stderr.decode()[-2000:]}"
        )
    return elapsed, cpu


def _build(app: Path, key: Path, out: Path, env: dict[str, str]) -> Path:
    subprocess.run(
        [LINEUP, "build", str(app), "--key", str(key), "--out", str(out)],
        env=env,
        check=True,
        capture_output=True,
    )
    (bundle,) = out.glob("*.lineup")
    return bundle


def main(argv: list[str] | None = None) -> int:
    """Build the two bundles, time the diffs, print the figures."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tools", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=7, help="fresh processes per figure")
    ap.add_argument("--json", action="store_true", help="print one JSON document")
    ap.add_argument("--smoke", action="store_true", help="a tiny size, one round (CI)")
    args = ap.parse_args(argv)
    if args.smoke:
        args.tools = 5
        args.runs = 1
    env = {k: v for k, v in os.environ.items() if not k.startswith("LINEUP_")}
    env["SOURCE_DATE_EPOCH"] = "1700000000"
    tmp = Path(tempfile.mkdtemp(prefix="lineup-bench-diff-"))
    try:
        subprocess.run(
            [LINEUP, "keygen", "--out", str(tmp / "key"), "--json"],
            env=env,
            check=True,
            capture_output=True,
        )
        key = tmp / "key" / "lineup-signing.pem"
        app = generate(tmp / "old", args.tools)
        old = _build(app, key, tmp / "dist-old", env)
        for tools in (app / "bench_app").glob("tools_*.py"):
            text = tools.read_text()
            tools.write_text(text.replace("max_length=200)]", "max_length=100)]"))
        toml = app / "lineup.toml"
        toml.write_text(toml.read_text().replace('version = "1.0.0"', 'version = "1.1.0"'))
        new = _build(app, key, tmp / "dist-new", env)
        figures = {
            "diff_s": [LINEUP, "diff", str(old), str(new)],
            "diff_json_s": [LINEUP, "diff", str(old), str(new), "--json"],
            "diff_same_s": [LINEUP, "diff", str(old), str(old)],
            "version_s": [LINEUP, "--version"],
        }
        expect = {"diff_s": 1, "diff_json_s": 1, "diff_same_s": 0, "version_s": 0}
        samples: dict[str, list[tuple[float, float]]] = {k: [] for k in figures}
        for k, cmd in figures.items():  # warm the page cache; discarded
            _run(cmd, env, expect[k])
        for _ in range(args.runs):
            for k, cmd in figures.items():
                samples[k].append(_run(cmd, env, expect[k]))
        report = json.loads(
            subprocess.run(figures["diff_json_s"], env=env, capture_output=True).stdout
        )
        results: dict[str, Any] = {
            "python": sys.version.split()[0],
            "tools": args.tools,
            "runs": args.runs,
            "bundle_bytes": old.stat().st_size,
            "changes": len(report["changes"]),
            "breaking": report["breaking"],
        }
        for k, values in samples.items():
            walls, cpus = [w for w, _ in values], [c for _, c in values]
            results[k] = {
                "median": statistics.median(walls),
                "best": min(walls),
                "cpu_median": statistics.median(cpus),
            }
        results["load_average"] = os.getloadavg()[0]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        print(json.dumps(results, indent=2, sort_keys=True))
        return 0
    print(
        f"python {results['python']}: two {args.tools}-tool bundles of "
        f"{results['bundle_bytes'] / 2**20:.1f} MiB, {results['changes']} changes "
        f"({results['breaking']} breaking); fresh processes, median (best) of {args.runs}; "
        f"load average {results['load_average']:.1f}"
    )
    labels = {
        "diff_s": "lineup diff OLD NEW",
        "diff_json_s": "lineup diff OLD NEW --json",
        "diff_same_s": "lineup diff OLD OLD",
        "version_s": "lineup --version",
    }
    for k, label in labels.items():
        r = results[k]
        print(f"  {label:28s} {r['median']:.3f} s ({r['best']:.3f} s), CPU {r['cpu_median']:.3f} s")
    verdict = "within" if results["diff_s"]["median"] < TARGET_S else "OVER"
    print(f"  {verdict} the {TARGET_S:.0f} s target")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
