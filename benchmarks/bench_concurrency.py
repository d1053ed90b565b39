"""Concurrency and per-call speed of the runtime, every variant interleaved in one run
(issue 12, "Speed").

Workload 1 — 50 conversations at once: a trivial `app_ready` tool (`bench.ping`, answers
its integer parameter); every conversation's session made ready and warmed first (untimed);
then `--threads` threads, one conversation each, `--calls` sequential `Runtime.call`s each,
timed from one `threading.Barrier`. Variants, round-robin over `--rounds` rounds (median
reported), same bundle, same schema and rows:
  (a) this checkout on a database file (the embedded default: WAL, synchronous=FULL);
  (b) this checkout on `:memory:`;
  (c) commit `--baseline` (default e258c37) installed non-editable in a second venv, cached
      under `--baseline-dir`, run by that venv's Python;
  (d) raw SQLite in the runtime's own schema writing the same rows per call: two FULL
      commits per call (K=1), and the group-commit floors (K calls' rows per commit pair).
Workload 2 — one ready session, sequential calls: `Runtime.call`, `Runtime.acall` from an
asyncio caller and `AsyncRuntime.call` (when the checkout has it), against the raw floor
doing the same two FULL commits per call, all in one process per round.
Also: process start-up, import and `Runtime.open` cost (what a user pays), per version.

Every variant runs `concurrency_driver.py` in a fresh subprocess that uses only the public
API and prints JSON. The workload is deterministic (no randomness); its parameters and the
bench key seed are printed.

Run: python benchmarks/bench_concurrency.py [--rounds 5] [--threads 50] [--calls 30]
         [--seq-calls 1000] [--groups 1,16,50] [--baseline e258c37]
         [--baseline-dir DIR] [--no-baseline] [--json] [--smoke]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DRIVER = Path(__file__).with_name("concurrency_driver.py")
BASELINE = "e258c37"


def run_driver(python: Path | str, spec: dict[str, Any], *, current: bool) -> dict[str, Any]:
    """One driver process; this checkout's variants see the repository first on the path,
    the baseline's see only their own venv (started outside the repository)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    if current:
        env["PYTHONPATH"] = str(ROOT)
    with tempfile.TemporaryDirectory(prefix="lineup-bench-run-") as cwd:
        driver = Path(cwd) / DRIVER.name  # the script the benchmark writes for this run
        shutil.copyfile(DRIVER, driver)
        spec = {**spec, "spawned_at": time.time()}  # wall clock: compared in the child
        proc = subprocess.run(
            [str(python), str(driver), json.dumps(spec)],
            capture_output=True,
            text=True,
            env=env,
            cwd=cwd,
            timeout=600,
        )
    if proc.returncode != 0:
        raise RuntimeError(f"driver {spec['mode']} failed ({proc.returncode}):\n{proc.stderr}")
    out: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


def baseline_python(commit: str, base_dir: Path) -> Path:
    """A venv with `commit` of this repository installed non-editable (cached)."""
    full = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", commit], capture_output=True, text=True, check=True
    ).stdout.strip()
    home = base_dir / f"lineup-{full[:12]}"
    python = home / "venv" / "bin" / "python"
    if (home / "ready").exists() and python.exists():
        return python
    print(f"# creating the baseline venv for {full[:12]} under {home} (cached afterwards)")
    shutil.rmtree(home, ignore_errors=True)
    src = home / "src"
    src.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", full], capture_output=True, check=True
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(src, filter="data")
    subprocess.run([sys.executable, "-m", "venv", str(home / "venv")], check=True)
    pip = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(src)],
        capture_output=True,
        text=True,
    )
    if pip.returncode != 0:
        raise RuntimeError(f"installing {full[:12]} failed:\n{pip.stdout}\n{pip.stderr}")
    (home / "ready").write_text(full + "\n")
    return python


def startup(python: Path | str, bundle: str, *, current: bool) -> dict[str, Any]:
    """From spawning a process to `Runtime.open` returning on a new database file, with
    the driver's split of it; the first call's activation; a bare interpreter for scale."""
    inner = run_driver(python, {"mode": "startup", "bundle": bundle}, current=current)
    t0 = time.perf_counter()
    subprocess.run([str(python), "-c", "pass"], check=True)
    inner["bare_python_ms"] = (time.perf_counter() - t0) * 1000
    return inner


def med(rows: list[dict[str, Any]], key: str) -> float:
    return statistics.median(r[key] for r in rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=50)
    parser.add_argument("--calls", type=int, default=30, help="sequential calls per thread")
    parser.add_argument("--warm-calls", type=int, default=3, help="untimed calls per session")
    parser.add_argument("--seq-calls", type=int, default=1000, help="workload 2 calls")
    parser.add_argument("--groups", default="1,16,50", help="group-commit floors: calls/commit")
    parser.add_argument("--baseline", default=BASELINE, help="the commit to compare with")
    parser.add_argument(
        "--baseline-dir",
        type=Path,
        default=Path(tempfile.gettempdir()) / "lineup-bench-baseline",
        help="where the baseline venv is cached",
    )
    parser.add_argument("--no-baseline", action="store_true")
    parser.add_argument("--json", action="store_true", help="also print every figure as JSON")
    parser.add_argument("--smoke", action="store_true", help="a tiny size, one round (CI)")
    args = parser.parse_args()
    if args.smoke:  # every variant and report line runs; the baseline only when asked
        args.rounds, args.threads, args.calls, args.warm_calls = 1, 2, 2, 1
        args.seq_calls, args.groups = 5, "1,2"
        args.no_baseline = args.no_baseline or args.baseline == BASELINE
    groups = [int(g) for g in args.groups.split(",")]
    here = sys.executable
    old = None if args.no_baseline else baseline_python(args.baseline, args.baseline_dir)
    head = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    print(
        f"python {sys.version.split()[0]}  sqlite {sqlite3.sqlite_version}  cpus {os.cpu_count()}"
        f"  checkout {head or '?'}  baseline {args.baseline if old else '-'}"
        f"  load {os.getloadavg()[0]:.2f}"
    )
    print(
        f"parameters: rounds={args.rounds} threads={args.threads} calls/thread={args.calls} "
        f"warm_calls={args.warm_calls} seq_calls={args.seq_calls} groups={groups} "
        "seed: none needed (deterministic workload); bench key seed = 32 zero bytes"
    )
    with tempfile.TemporaryDirectory(prefix="lineup-bench-") as tmp_dir:
        bundle = str(Path(tmp_dir) / "bench.lineup")
        run_driver(here, {"mode": "bundle", "out": bundle}, current=True)
        common = {"bundle": bundle, "threads": args.threads, "calls": args.calls}
        common["warm_calls"] = args.warm_calls
        variants: dict[str, tuple[Path | str, dict[str, Any], bool]] = {
            "file": (here, {**common, "mode": "threads", "db": "file"}, True),
            "memory": (here, {**common, "mode": "threads", "db": ":memory:"}, True),
            "floor": (
                here,
                {"mode": "floor", "threads": args.threads, "groups": groups}
                | {"total": args.threads * args.calls},
                True,
            ),
        }
        if old is not None:
            variants["baseline"] = (old, {**common, "mode": "threads", "db": "file"}, False)
        seq = {"mode": "sequential", "bundle": bundle, "calls": args.seq_calls}
        seq["warm_calls"] = args.warm_calls
        results: dict[str, list[dict[str, Any]]] = {name: [] for name in variants}
        results["sequential"], results["startup"], results["startup_baseline"] = [], [], []
        install_note: dict[str, str] = {}
        for r in range(args.rounds):
            names = list(variants)
            names = names[r % len(names) :] + names[: r % len(names)]  # rotate the order
            for name in names:
                python, spec, current = variants[name]
                out = run_driver(python, {**spec, "round": r}, current=current)
                results[name].append(out)
                if "install" in out:
                    install_note[name] = out["install"]
            results["sequential"].append(run_driver(here, {**seq, "round": r}, current=True))
            results["startup"].append(startup(here, bundle, current=True))
            if old is not None:
                results["startup_baseline"].append(startup(old, bundle, current=False))
            print(f"# round {r + 1}/{args.rounds} done (load {os.getloadavg()[0]:.2f})", flush=True)
    report(results, groups, install_note, args)
    if args.json:
        print(json.dumps(results, indent=1))


def report(
    results: dict[str, list[dict[str, Any]]],
    groups: list[int],
    install_note: dict[str, str],
    args: argparse.Namespace,
) -> None:
    total = args.threads * args.calls
    print(f"\n== workload 1: {args.threads} threads x {args.calls} calls = {total} calls/round")
    print(f"{'variant':44s} {'calls/s':>9s} {'p50 ms':>8s} {'p99 ms':>8s} {'p99/p50':>8s}")
    rows: dict[str, float] = {}
    labels = {
        "file": "(a) this checkout, file (WAL,FULL)",
        "memory": "(b) this checkout, :memory:",
        "baseline": f"(c) {args.baseline}, file (WAL,FULL)",
    }
    for name in ("file", "memory", "baseline"):
        if not results.get(name):
            continue
        rr = results[name]
        tput, p50, p99 = med(rr, "calls_per_s"), med(rr, "p50_ms"), med(rr, "p99_ms")
        rows[name] = tput
        rows[name + "_p50"], rows[name + "_p99"] = p50, p99
        print(f"{labels[name]:44s} {tput:9.0f} {p50:8.2f} {p99:8.2f} {p99 / p50:8.2f}")
        per_round = ", ".join(f"{x['calls_per_s']:.0f}" for x in rr)
        print(f"{'':44s} rounds: {per_round}")
    for k in groups:
        tput = statistics.median(x[str(k)]["calls_per_s"] for x in results["floor"])
        rows[f"floor{k}"] = tput
        what = "2 FULL commits per call" if k == 1 else f"K={k} calls per commit pair"
        print(f"{'(d) raw SQLite, ' + what:44s} {tput:9.0f}")
    for name, note in sorted(install_note.items()):
        if note != "shared bundle":
            print(f"note: {name} installed the {note}")
    print("\nratios (medians):")
    print(f"  file / :memory:          {rows['file'] / rows['memory']:6.2f}   (target >= 0.75)")
    if "baseline" in rows:
        print(
            f"  file / {args.baseline}:         {rows['file'] / rows['baseline']:6.2f}x  "
            "(target >= 2x, stretch 3x)"
        )
    print(f"  p99 / p50 (file)         {rows['file_p99'] / rows['file_p50']:6.2f}   (target <= 3)")
    print(f"  file / raw floor K=1     {rows['file'] / rows['floor1']:6.2f}")
    if len(groups) > 1:
        k = groups[1]
        print(f"  file / raw floor K={k:<4d} {rows['file'] / rows[f'floor{k}']:6.2f}")

    seq = results["sequential"]
    print(f"\n== workload 2: one ready session, {args.seq_calls} sequential calls")
    floor = statistics.median(x["floor"]["calls_per_s"] for x in seq)
    print(f"{'path':34s} {'calls/s':>9s} {'p50 ms':>8s} {'p99 ms':>8s} {'/floor':>8s} target")
    print(f"{'raw SQLite, 2 FULL commits/call':34s} {floor:9.0f}")
    floors = ", ".join(f"{x['floor']['calls_per_s']:.0f}" for x in seq)
    print(f"{'':34s} rounds: {floors}")
    for key, label, target in (
        ("call", "Runtime.call", ">= 0.45"),
        ("acall", "Runtime.acall (asyncio caller)", "-"),
        ("async_runtime", "AsyncRuntime.call", ">= 0.5"),
    ):
        got = [x[key] for x in seq if x.get(key)]
        if not got:
            if key == "async_runtime":
                print("AsyncRuntime: not available in this checkout")
            continue
        tput, p50, p99 = med(got, "calls_per_s"), med(got, "p50_ms"), med(got, "p99_ms")
        print(f"{label:34s} {tput:9.0f} {p50:8.3f} {p99:8.3f} {tput / floor:8.2f} {target}")
        # each round's own ratio: its floor ran in the same process, minutes apart at most
        ratios = [x[key]["calls_per_s"] / x["floor"]["calls_per_s"] for x in seq if x.get(key)]
        each = ", ".join(f"{x[key]['calls_per_s']:.0f}" for x in seq if x.get(key))
        print(
            f"{'':34s} rounds: {each}"
            f"; /floor per round min {min(ratios):.2f} median {statistics.median(ratios):.2f}"
            f" max {max(ratios):.2f}"
        )

    print("\n== start-up (what a user pays before the first call), medians in ms")
    keys = (
        "bare_python_ms",
        "interpreter_ms",
        "import_ms",
        "open_ms",
        "spawn_to_open_ms",
        "first_call_ready_ms",
    )
    print(f"{'version':16s} " + " ".join(f"{k[:-3]:>17s}" for k in keys))
    for name, label in (("startup", "this checkout"), ("startup_baseline", args.baseline)):
        if results[name]:
            vals = " ".join(f"{med(results[name], k):17.1f}" for k in keys)
            print(f"{label:16s} {vals}")
    print(
        "  spawn_to_open = process spawn -> Runtime.open(new file) returned (what a user pays"
        " before the first call); first_call_ready = the first call's activation (worker start)"
    )


if __name__ == "__main__":
    main()
