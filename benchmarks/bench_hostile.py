"""Hostile input figures (issue 10): a slow validation delays only its own caller.

While a 500,000-integer call validates in one thread (accepted, or rejected at its last
item), another thread sends calls to an already-ready session in another conversation. The
issue's bar: those calls answer within 50 ms of their usual latency. The calls answered
after the validation, while an accepted call is delivered, are reported apart.

Also: the time a 50 MB string takes to be refused with `params_too_large`.

Run: python benchmarks/bench_hostile.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _open(tmp: Path) -> Any:
    import shutil

    from lineup_build.build import build_project
    from lineup_build.signing import key_from_seed
    from lineup_build.trust import TrustedKey, TrustStore
    from lineup_runtime_lite import HostSimulator, Runtime, VirtualClock

    key = key_from_seed(bytes(range(1, 33)))
    src = tmp / "bulk"
    shutil.copytree(ROOT / "tests" / "runtime" / "apps" / "bulk", src)
    result = build_project(src, signing_key=key)
    assert result.ok and result.bundle is not None
    trust = TrustStore.from_keys([TrustedKey(key.key_id, key.public_raw, ("*",), "bench")])
    rt = Runtime.open(
        tmp / "rt.db", trust=trust, clock=VirtualClock(), host=HostSimulator("manual")
    )
    rt.install(result.bundle)
    return rt


def _ms(xs: list[float]) -> str:
    return f"median {statistics.median(xs) * 1000:.1f} ms, max {max(xs) * 1000:.1f} ms"


def measure(rt: Any, n: int, rounds: int) -> None:
    rt.call("w", "ready", "bulk.echo", {"text": "up"})
    rt.settle()
    usual = []
    for i in range(50):
        t0 = time.perf_counter()
        rt.call(f"u{n}-{i}", "ready", "bulk.echo", {"text": "x"})
        usual.append(time.perf_counter() - t0)
    print(f"ready-session call, usual: {_ms(usual)}")
    for kind in ("rejected", "accepted"):
        for r in range(rounds):
            numbers: list[Any] = [i % 10 for i in range(500_000)]
            if kind == "rejected":
                numbers[-1] = "x"
            took: list[float] = []
            checked_at: list[float] = []

            def slow(
                numbers: list[Any] = numbers,
                took: list[float] = took,
                checked_at: list[float] = checked_at,
                r: int = r,
                kind: str = kind,
            ) -> None:
                # `Runtime.call` in its two halves, to tell validation from delivery
                t0 = time.perf_counter()
                prepared = rt._art._prepare(
                    f"big-{kind}-{r}", f"other-{kind}-{r}", "bulk.total", {"numbers": numbers}
                )
                checked_at.append(time.perf_counter())
                if isinstance(prepared, tuple):
                    rt._run(rt._art._accept(prepared))
                took.append(time.perf_counter() - t0)

            thread = threading.Thread(target=slow)
            thread.start()
            during: list[tuple[float, float]] = []  # (answered at, latency)
            while thread.is_alive():
                t0 = time.perf_counter()
                rt.call(f"d-{kind}-{r}-{len(during)}", "ready", "bulk.echo", {"text": "y"})
                during.append((time.perf_counter(), time.perf_counter() - t0))
            thread.join()
            base = statistics.median(usual)
            validating = [lat for at, lat in during if at <= checked_at[0]]
            after = [lat for at, lat in during if at > checked_at[0]]
            line = f"500,000 integers {kind} (whole call {took[0]:.2f} s)"
            print(
                f"{line}; {len(validating)} ready calls while it validated: {_ms(validating)} "
                f"(worst {(max(validating) - base) * 1000:+.1f} ms vs usual median)"
                + (
                    f"; {len(after)} during its delivery: worst "
                    f"{(max(after) - base) * 1000:+.1f} ms"
                    if after
                    else ""
                )
            )
            rt.settle()
    t0 = time.perf_counter()
    msg = rt.call("huge", "c", "bulk.echo", {"text": "x" * 50_000_000})
    print(f"50 MB string: {msg['error']['code']} in {(time.perf_counter() - t0) * 1000:.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="a tiny size, one round (CI)")
    args = parser.parse_args()
    if args.smoke:
        args.rounds = 1
    with tempfile.TemporaryDirectory() as tmp:
        rt = _open(Path(tmp))
        try:
            measure(rt, 0, args.rounds)
        finally:
            rt.close()


if __name__ == "__main__":
    main()
