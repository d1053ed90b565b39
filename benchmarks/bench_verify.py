"""Benchmark `verify_bundle` against the SHA-256 hashing floor, with peak memory.

Builds a signed canonical bundle of 2,000 files / 200 MiB (streamed to disk, never held
in memory) and one with the same files at a tenth of the size, then, side by side in one
run:

* the floor: a plain Python loop that lists the archive with `zipfile`, reads each
  entry's bytes and SHA-256s them in 1 MiB chunks;
* `verify_bundle(...)`: the whole pipeline (archive structure, canonical form, signature,
  trust, manifest schema, tool schemas, every file's size and hash).

Both run alternately, warm (a first discarded round warms the page cache and imports),
and the best and median wall times are reported with the ratio. Target: verify within
1.3x of the floor; the verdict uses the median of the per-round ratios, which cancels
load from other processes. Peak RSS is measured in a fresh process per bundle: it must
not grow with the bundle's size in bytes (per-entry metadata is bounded by the
10,000-file limit).

    python benchmarks/bench_verify.py [--files 2000] [--mib 200] [--rounds 9] [--json]

It is not part of the test suite.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import resource
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import zipfile
import zlib
from functools import cache
from pathlib import Path
from typing import Any

# Only the standard library at the top: the memory child measures its baseline before
# importing the toolchain's heavier parts.
CHUNK = 1024 * 1024
EPOCH = 1_700_000_000
SEED = b"\x07" * 32


@cache
def _key() -> Any:
    from lineup_build.signing import key_from_seed

    return key_from_seed(SEED)


def _content(i: int, size: int) -> bytes:
    return random.Random(i).randbytes(size)


def make_bundle(path: Path, n_files: int, total_bytes: int) -> None:
    """Write a signed canonical bundle, streaming: two passes over generated contents."""
    from lineup_build.bundle import central_header, dos_timestamp, end_of_central_directory
    from lineup_build.bundle import local_header as local_header_bytes
    from lineup_build.manifest import serialize_manifest
    from lineup_build.signing import sign_manifest
    from lineup_sdk import __version__ as SDK_VERSION

    sizes = [
        total_bytes // n_files + (1 if i < total_bytes % n_files else 0) for i in range(n_files)
    ]
    names = [f"bench_app/part{i // 100:03d}/file{i:05d}.bin" for i in range(n_files)]
    files, crcs = [], []
    for i, (name, size) in enumerate(zip(names, sizes, strict=True)):
        data = _content(i, size)
        files.append({"path": name, "sha256": hashlib.sha256(data).hexdigest(), "size": size})
        crcs.append(zlib.crc32(data))
    tool = {
        "method": "bench.ping",
        "description": "Ping.",
        "delivery": "miniapp_sdk",
        "activation": "app_ready",
        "long_running": False,
        "timeout_s": 30,
        "input_schema": {"type": "object", "properties": {}, "additionalProperties": False},
        "result_schema": {"type": "object"},
    }
    manifest = {
        "manifest_version": 1,
        "app": {"scope": "bench", "name": "Bench", "version": "1.0.0", "entry": "bench_app"},
        "sdk": {"version": SDK_VERSION},
        "tools": [tool],
        "files": files,
    }
    mbytes = serialize_manifest(manifest)
    sig = sign_manifest(_key(), mbytes)
    stamp = dos_timestamp(EPOCH)
    central: list[bytes] = []
    offset = 0
    with open(path, "wb") as fh:

        def put(name: str, crc: int, size: int, chunks: list[bytes]) -> None:
            nonlocal offset
            raw = name.encode()
            head = local_header_bytes(raw, crc, size, stamp)
            central.append(central_header(raw, crc, size, stamp, offset))
            fh.write(head)
            for c in chunks:
                fh.write(c)
            offset += len(head) + size

        put("manifest.json", zlib.crc32(mbytes), len(mbytes), [mbytes])
        put("manifest.sig", zlib.crc32(sig), len(sig), [sig])
        for i, (name, size, crc) in enumerate(zip(names, sizes, crcs, strict=True)):
            put(f"app/{name}", crc, size, [_content(i, size)])
        cd = b"".join(central)
        fh.write(cd)
        fh.write(end_of_central_directory(len(central), len(cd), offset))


def floor(path: Path) -> list[str]:
    """The hashing floor: list entries with zipfile, SHA-256 each in 1 MiB chunks."""
    with zipfile.ZipFile(path) as zf:
        infos = zf.infolist()
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    out = []
    with open(path, "rb", buffering=0) as fh:
        for info in infos:
            fh.seek(info.header_offset + 26)
            n, m = struct.unpack("<HH", fh.read(4))
            fh.seek(info.header_offset + 30 + n + m)
            digest = hashlib.sha256()
            left = info.file_size
            while left:
                k = fh.readinto(view[: min(left, CHUNK)])
                if not k:
                    break
                digest.update(view[:k])
                left -= k
            out.append(digest.hexdigest())
    return out


def store() -> Any:
    from lineup_build.trust import TrustedKey, TrustStore

    key = _key()
    return TrustStore.from_keys([TrustedKey(key.key_id, key.public_raw, ("*",), "bench")])


def verify(path: Path) -> None:
    from lineup_build.verify import verify_bundle

    verify_bundle(path, store())


def _peak_rss_mib() -> float:
    """Peak RSS of this process image. On Linux VmHWM, because `ru_maxrss` carries the
    parent's peak over fork and exec and would hide the child's own figure."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # bytes on macOS
    return kib / (1024 * 1024) if sys.platform == "darwin" else kib / 1024


def child(mode: str, path: Path) -> None:
    """In a fresh process: peak RSS before the run (stdlib only) and after one run.

    The peak after the run includes the lazily imported toolchain (cryptography,
    jsonschema, pydantic-core): a constant, the same for every bundle size.
    """
    base = _peak_rss_mib()
    if mode == "verify":
        verify(path)
    else:
        floor(path)
    print(json.dumps({"baseline_mib": base, "peak_mib": _peak_rss_mib()}))


def measure_rss(mode: str, path: Path) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", mode, str(path)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    result: dict[str, float] = json.loads(out)
    return result


def timed(fn: Any, path: Path) -> float:
    start = time.perf_counter()
    fn(path)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--mib", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--child", nargs=2, metavar=("MODE", "PATH"), help=argparse.SUPPRESS)
    parser.add_argument("--smoke", action="store_true", help="a tiny size, one round (CI)")
    args = parser.parse_args()
    if args.smoke:
        args.files = 5
        args.mib = 1
        args.rounds = 1
    if args.child:
        child(args.child[0], Path(args.child[1]))
        return
    with tempfile.TemporaryDirectory(prefix="bench-verify-") as tmp:
        big, small = Path(tmp) / "big.lineup", Path(tmp) / "small.lineup"
        t0 = time.perf_counter()
        make_bundle(big, args.files, args.mib * 1024 * 1024)
        make_bundle(small, args.files, args.mib * 1024 * 1024 // 10)
        built_s = time.perf_counter() - t0
        floor(big), verify(big)  # warm the page cache and imports; discarded
        floors, verifies = [], []
        for _ in range(args.rounds):
            floors.append(timed(floor, big))
            verifies.append(timed(verify, big))
        rss = {
            f"{mode}_{name}": measure_rss(mode, path)
            for name, path in (("small", small), ("big", big))
            for mode in ("floor", "verify")
        }
        result = {
            "bundle": {
                "files": args.files,
                "bytes": big.stat().st_size,
                "small_files": args.files,
                "small_bytes": small.stat().st_size,
                "build_s": round(built_s, 2),
            },
            "floor_s": {"best": min(floors), "median": statistics.median(floors)},
            "verify_s": {"best": min(verifies), "median": statistics.median(verifies)},
            "ratio_best": min(verifies) / min(floors),
            # Each round times the floor and verify back to back, so the per-round ratio
            # cancels load from other processes; its median is the headline figure.
            "ratio_median": statistics.median(v / f for f, v in zip(floors, verifies, strict=True)),
            "peak_rss_mib": rss,
            "verify_peak_growth_mib": rss["verify_big"]["peak_mib"]
            - rss["verify_small"]["peak_mib"],
        }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    mib = result["bundle"]["bytes"] / 2**20
    print(f"bundle: {args.files} files, {mib:.1f} MiB (built in {built_s:.1f} s)")
    for label, key in (("hashing floor", "floor_s"), ("verify_bundle", "verify_s")):
        best, median = result[key]["best"], result[key]["median"]
        print(f"  {label:14s} best {best:.3f} s  median {median:.3f} s  ({mib / best:.0f} MiB/s)")
    verdict = "within" if result["ratio_median"] <= 1.3 else "OVER"
    print(
        f"  ratio verify/floor: best-of-runs {result['ratio_best']:.3f}x, "
        f"median of paired rounds {result['ratio_median']:.3f}x ({verdict} the 1.3x target)"
    )
    print("peak RSS, one fresh process per run (baseline = interpreter before the run):")
    for key, val in rss.items():
        print(f"  {key:13s} baseline {val['baseline_mib']:.1f} MiB  peak {val['peak_mib']:.1f} MiB")
    growth = rss["verify_big"]["peak_mib"] - rss["verify_small"]["peak_mib"]
    print(f"  verify peak growth from the small to the big bundle: {growth:+.1f} MiB")


if __name__ == "__main__":
    main()
