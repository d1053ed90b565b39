"""Benchmark `lineup docs` on the 1,000-tool MiniApp of `bench_build.py`, as whole processes.

Generates the app (half keyword tools with `Field` constraints, half one pydantic model
each), builds it once, then times fresh processes, Python start-up and imports included,
each figure the median of `--runs`:

* `lineup docs BUNDLE --out FILE` (Markdown) — target under 1 s;
* `lineup docs BUNDLE --format html --out FILE`;
* `lineup docs FOLDER --out FILE` (reported: it imports the app's code in the sandboxed
  extractor first, as `lineup check` does);
* `lineup --version` as the floor of any `lineup` process.

CPU time (user + system) is printed too: on a shared machine it is the steadier figure.

    python benchmarks/bench_docs.py [--tools 1000] [--runs 5] [--json] [--smoke]

It is not part of the test suite (its `--smoke` run is).
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

from bench_build import generate
from bench_diff import _build, _run

PY = sys.executable
LINEUP = str(Path(PY).with_name("lineup"))
TARGET_S = 1.0


def main(argv: list[str] | None = None) -> int:
    """Build the app, time `lineup docs`, print the figures."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tools", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=5, help="fresh processes per figure")
    ap.add_argument("--json", action="store_true", help="print one JSON document")
    ap.add_argument("--smoke", action="store_true", help="a tiny size, one round (CI)")
    args = ap.parse_args(argv)
    if args.smoke:
        args.tools, args.runs = 5, 1
    env = {k: v for k, v in os.environ.items() if not k.startswith("LINEUP_")}
    env["SOURCE_DATE_EPOCH"] = "1700000000"
    tmp = Path(tempfile.mkdtemp(prefix="lineup-bench-docs-"))
    try:
        subprocess.run(
            [LINEUP, "keygen", "--out", str(tmp / "key"), "--json"],
            env=env,
            check=True,
            capture_output=True,
        )
        app = generate(tmp / "src", args.tools)
        bundle = _build(app, tmp / "key" / "lineup-signing.pem", tmp / "dist", env)
        out = tmp / "out"
        figures = {
            "bundle_s": [LINEUP, "docs", str(bundle), "--out", str(out / "b.md")],
            "bundle_html_s": [
                *(LINEUP, "docs", str(bundle), "--format", "html", "--out", str(out / "b.html"))
            ],
            "folder_s": [LINEUP, "docs", str(app), "--out", str(out / "f.md")],
            "version_s": [LINEUP, "--version"],
        }
        out.mkdir()
        samples: dict[str, list[tuple[float, float]]] = {k: [] for k in figures}
        for cmd in figures.values():  # warm the page cache; discarded
            _run(cmd, env, 0)
        for _ in range(args.runs):
            for k, cmd in figures.items():
                samples[k].append(_run(cmd, env, 0))
        same = (out / "b.md").read_bytes() == (out / "f.md").read_bytes()
        results: dict[str, Any] = {
            "python": sys.version.split()[0],
            "tools": args.tools,
            "runs": args.runs,
            "markdown_bytes": (out / "b.md").stat().st_size,
            "html_bytes": (out / "b.html").stat().st_size,
            "folder_equals_bundle": same,
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
    if not same:
        raise SystemExit("the folder's page differs from its bundle's")
    if args.json:
        print(json.dumps(results, indent=2, sort_keys=True))
        return 0
    print(
        f"python {results['python']}: {args.tools} tools, a page of "
        f"{results['markdown_bytes'] / 2**20:.1f} MiB (HTML {results['html_bytes'] / 2**20:.1f} "
        f"MiB); fresh processes, median (best) of {args.runs}; load average "
        f"{results['load_average']:.1f}"
    )
    labels = {
        "bundle_s": "lineup docs BUNDLE",
        "bundle_html_s": "lineup docs BUNDLE --format html",
        "folder_s": "lineup docs FOLDER",
        "version_s": "lineup --version",
    }
    for k, label in labels.items():
        r = results[k]
        print(f"  {label:34s} {r['median']:.3f} s ({r['best']:.3f} s), CPU {r['cpu_median']:.3f} s")
    verdict = "within" if results["bundle_s"]["median"] < TARGET_S else "OVER"
    print(f"  {verdict} the {TARGET_S:.0f} s target on a bundle")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
