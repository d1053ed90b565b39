"""What a session worker forked from a warm image would cost (decision record 0007): a
prototype of the fork path, without the runtime around it, to check the record's plan
against SPEC 13.3's bars (+20 ms on a new session's first call, 10 MiB PSS per idle
session) before the runtime is changed.

An image process enters a user, mount, IPC and network namespace, imports the SDK's
worker and its event loop, installs the seccomp filter and a Landlock layer, drops its
capabilities, and freezes its heap (`gc.freeze`). Then it forks one worker after another.
Each worker makes itself non-dumpable and unshares a nested user, mount, IPC, network and
PID namespace. It forks into that PID namespace (the middle process exits), makes its
own pipes, narrows Landlock with a second layer, reseeds `random`, and starts an asyncio
loop with its handler pool, as `_worker._serve` does. Measured from outside: the time
from each fork to the worker's "ready", and each idle worker's PSS, USS and RSS from
`/proc/<pid>/smaps_rollup`; per session, the workers' PSS and the image's summed and
divided by the workers.

Left out, so the figures are a lower bound for the real path: the launcher-helper's maps
and tmpfs mount (measured alone at about 2 ms), the cgroup move, `pidfd_getfd`, the
bridge handshake, and the app's own import (the bench app's is tiny).

Run: python benchmarks/bench_image_fork.py [--workers 10] [--json]
Prints "not measured: ..." and exits 0 where the platform lacks a mechanism.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import signal
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lineup_runtime_lite.processes.proctree import process_memory  # noqa: E402

READ = ["/usr", "/lib", "/lib64", "/etc", sys.prefix, sys.base_prefix, str(ROOT)]


def _read_only(k: Any, abi: int, extra: tuple[str, ...] = ()) -> None:
    rules = k.Landlock(abi, network=False)
    for path in [*READ, *extra]:
        rules.allow(os.path.realpath(path), k.FS_READ_FILE | k.FS_READ_DIR | k.FS_EXECUTE)
    rules.restrict()


def _worker(k: Any, abi: int, ready_w: int, pid_w: int) -> None:
    """The forked child: its own namespaces, then the worker below the middle process."""
    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0
    nested = k.CLONE_NEWUSER | k.CLONE_NEWNS | k.CLONE_NEWIPC | k.CLONE_NEWNET | k.CLONE_NEWPID
    k.unshare(nested)
    pid = os.fork()
    if pid:
        os.write(pid_w, str(pid).encode())
        os._exit(0)
    for _ in range(3):
        os.pipe()  # inbox, bridge, log
    _read_only(k, abi)
    import asyncio
    import concurrent.futures
    import gc
    import random

    gc.enable()
    random.seed()
    loop = asyncio.new_event_loop()
    loop.set_default_executor(concurrent.futures.ThreadPoolExecutor(8))
    os.write(ready_w, b"r")
    while True:
        time.sleep(60)


def _image(workers: int, out_w: int) -> None:
    """The image: sandboxed, the SDK imported, then a worker forked after another."""
    from lineup_sdk.sandbox import _linux as k

    uid, gid = os.getuid(), os.getgid()
    k.unshare(k.CLONE_NEWUSER | k.CLONE_NEWNS | k.CLONE_NEWIPC | k.CLONE_NEWNET)
    k.write_id_maps(uid, gid)
    k.no_new_privs()
    t0 = time.perf_counter()
    import asyncio  # noqa: F401
    import concurrent.futures  # noqa: F401
    import gc

    import lineup_sdk._worker  # noqa: F401

    import_ms = (time.perf_counter() - t0) * 1000
    k.install_filter()
    abi = k.landlock_abi()
    if not abi:
        raise OSError(0, "no Landlock")
    _read_only(k, abi, ("/proc/self", "/dev/null"))
    k.drop_capabilities()
    gc.freeze()
    gc.disable()
    ready_r, ready_w = os.pipe()
    took, pids = [], []
    for _ in range(workers):
        t = time.perf_counter()
        pid_r, pid_w = os.pipe()
        middle = os.fork()
        if middle == 0:
            try:
                _worker(k, abi, ready_w, pid_w)
            finally:
                os._exit(70)
        os.close(pid_w)
        os.waitpid(middle, 0)
        raw = os.read(pid_r, 32)
        os.close(pid_r)
        if not raw:
            raise OSError(0, "a forked worker could not enter its namespaces")
        os.read(ready_r, 1)
        took.append((time.perf_counter() - t) * 1000)
        pids.append(int(raw))
    got = {"import_ms": import_ms, "took_ms": took, "pids": pids}
    os.write(out_w, (json.dumps(got) + "\n").encode())
    while True:
        time.sleep(60)


def measure(workers: int) -> dict[str, Any]:
    """Start an image, fork `workers` workers from it, measure, stop them all (this
    process is their subreaper: orphaned by their middle process, they are its to reap)."""
    ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    out_r, out_w = os.pipe()
    image = os.fork()
    if image == 0:
        os.close(out_r)
        try:
            _image(workers, out_w)
        except OSError as exc:
            os.write(out_w, (json.dumps({"error": str(exc)}) + "\n").encode())
        finally:
            os._exit(0)
    os.close(out_w)
    data = b""
    while not data.endswith(b"\n"):
        chunk = os.read(out_r, 1 << 16)
        if not chunk:
            break
        data += chunk
    os.close(out_r)
    got: dict[str, Any] = json.loads(data or b'{"error": "the image exited"}')
    try:
        if "error" in got:
            return got
        time.sleep(0.3)  # the workers settle idle
        mem = [m for m in (process_memory(p) for p in got["pids"]) if m is not None]
        img = process_memory(image)
        if not mem or img is None:
            return {"error": "cannot read /proc/<pid>/smaps_rollup here"}
        return {
            "workers": workers,
            "image_import_ms": got["import_ms"],
            "fork_to_ready_ms": statistics.median(got["took_ms"]),
            "fork_to_ready_ms_max": max(got["took_ms"]),
            "pss_mib_per_worker": statistics.median(m.pss for m in mem) / 1024,
            "uss_mib_per_worker": statistics.median(m.uss for m in mem) / 1024,
            "rss_mib_per_worker": statistics.median(m.rss for m in mem) / 1024,
            "image_pss_mib": img.pss / 1024,
            # what SPEC 13.3's bar compares: every worker's PSS and the image's, per session
            "pss_mib_per_session": (img.pss + sum(m.pss for m in mem)) / 1024 / len(mem),
            "image_rss_mib": img.rss / 1024,
        }
    finally:
        os.kill(image, signal.SIGKILL)
        for pid in got.get("pids", []):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for pid in [image, *got.get("pids", [])]:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=10)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--smoke", action="store_true", help="two workers (CI)")
    args = parser.parse_args()
    if args.smoke:
        args.workers = 2
    if not sys.platform.startswith("linux"):
        print("not measured: the image path is Linux only")
        return
    out = measure(args.workers)
    if args.json:
        print(json.dumps(out, indent=2))
        return
    if "error" in out:
        print(f"not measured: {out['error']}")
        return
    print(
        f"image: import {out['image_import_ms']:.1f} ms, PSS {out['image_pss_mib']:.1f} MiB "
        f"(RSS {out['image_rss_mib']:.1f})\n"
        f"{out['workers']} forked workers: fork to ready {out['fork_to_ready_ms']:.1f} ms "
        f"(max {out['fork_to_ready_ms_max']:.1f}); per idle worker PSS "
        f"{out['pss_mib_per_worker']:.1f} MiB (USS {out['uss_mib_per_worker']:.1f}, "
        f"RSS {out['rss_mib_per_worker']:.1f}); with the image's share "
        f"{out['pss_mib_per_session']:.1f} MiB PSS per session (bar 10 MiB)"
    )


if __name__ == "__main__":
    main()
