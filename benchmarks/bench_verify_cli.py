"""Benchmark `lineup verify` as a whole process against a Python process hashing the same
bundle.

Builds a signed canonical bundle (default 200 files / 100 MiB, streamed to disk by
`bench_verify.make_bundle`) and a trust store for its key, then runs, alternately and in
one run so machine load hits both alike:

* the floor: `python -c` that opens the bundle with `zipfile` and SHA-256s every entry;
* `lineup verify BUNDLE --trust FILE` (the console script's code, `python -m` style, in a
  fresh interpreter: imports, option parsing, trust store, every check, the verdict).

A first discarded round warms the page cache. Reported: best and median wall time of
each, and the median of the per-round ratios (the verdict). Target: at most 1.5x.

    python benchmarks/bench_verify_cli.py [--files 200] [--mib 100] [--rounds 15] [--json]

It is not part of the test suite.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TARGET = 1.5

FLOOR = """
import hashlib, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as zf:
    for info in zf.infolist():
        digest = hashlib.sha256()
        with zf.open(info) as entry:
            while chunk := entry.read(1 << 20):
                digest.update(chunk)
"""

VERIFY = "from lineup_build.cli import main; main()"


def _bench_verify() -> Any:
    path = Path(__file__).with_name("bench_verify.py")
    spec = importlib.util.spec_from_file_location("bench_verify", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def prepare(folder: Path, n_files: int, mib: int) -> tuple[Path, Path]:
    """A signed bundle and a trust store that trusts its key, in `folder`."""
    from lineup_build.signing import b64encode
    from lineup_build.trust import trust_add

    bench = _bench_verify()
    bundle = folder / "bench-1.0.0.lineup"
    bench.make_bundle(bundle, n_files, mib * 1024 * 1024)
    key = bench._key()
    store = folder / "trust.toml"
    trust_add(store, b64encode(key.public_raw), ["*"], "bench", [])
    return bundle, store


def _run(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def measure(bundle: Path, store: Path, rounds: int) -> dict[str, Any]:
    """Interleaved whole-process timings and the median per-round ratio."""
    floor_cmd = [sys.executable, "-c", FLOOR, str(bundle)]
    verify_cmd = [sys.executable, "-c", VERIFY, "verify", str(bundle), "--trust", str(store)]
    _run(floor_cmd), _run(verify_cmd)  # warm the page cache and the bytecode caches
    floors, verifies, ratios = [], [], []
    for i in range(rounds):
        if i % 2:  # alternate which goes first, so neither always runs on a warmer machine
            v, f = _run(verify_cmd), _run(floor_cmd)
        else:
            f, v = _run(floor_cmd), _run(verify_cmd)
        floors.append(f)
        verifies.append(v)
        ratios.append(v / f)
    ratio = statistics.median(ratios)
    return {
        "bundle_mib": round(bundle.stat().st_size / 2**20, 1),
        "rounds": rounds,
        "floor_best_s": round(min(floors), 4),
        "floor_median_s": round(statistics.median(floors), 4),
        "verify_best_s": round(min(verifies), 4),
        "verify_median_s": round(statistics.median(verifies), 4),
        "median_ratio": round(ratio, 3),
        "target": TARGET,
        "ok": ratio <= TARGET,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--mib", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--smoke", action="store_true", help="a tiny size, one round (CI)")
    args = parser.parse_args()
    if args.smoke:
        args.files = 5
        args.mib = 1
        args.rounds = 1
    with tempfile.TemporaryDirectory() as tmp:
        bundle, store = prepare(Path(tmp), args.files, args.mib)
        result = measure(bundle, store, args.rounds)
    if args.json:
        print(json.dumps(result, sort_keys=True))
        return
    print(
        f"{result['bundle_mib']} MiB, {args.files} files, {result['rounds']} rounds\n"
        f"  floor (python -c zipfile + sha256): best {result['floor_best_s']:.3f}s, "
        f"median {result['floor_median_s']:.3f}s\n"
        f"  lineup verify --trust:              best {result['verify_best_s']:.3f}s, "
        f"median {result['verify_median_s']:.3f}s\n"
        f"  median ratio {result['median_ratio']:.2f}x (target <= {TARGET}x): "
        f"{'ok' if result['ok'] else 'OVER'}"
    )


if __name__ == "__main__":
    main()
