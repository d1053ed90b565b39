"""Benchmark other apps' call latency while an exponential schema is being validated.

One runtime, two apps: `fast.ping` (plain schemas) and `slow.give`, whose result schema is
17 nested `anyOf` of one `$ref` twice (seconds of jsonschema per value; it runs in the
validator process under the validation budget, SPEC 13.3). Rounds alternate, in one run:

* normal: `fast.ping` calls back to back;
* attacked: the same calls while `slow.give` calls keep the validator busy.

Prints p50/p99 of `fast.ping` (accept to final) per mode and the difference of the p99s
(target: within 50 ms of normal). Run it with the toolchain's interpreter:

    python benchmarks/bench_validation.py [--calls 200] [--rounds 4] [--budget 1.0] [--json]

It is not part of the test suite.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lineup_build.signing import key_from_seed  # noqa: E402
from lineup_build.trust import TrustedKey, TrustStore  # noqa: E402
from lineup_runtime_lite import AsyncRuntime, HostSimulator  # noqa: E402
from tests.runtime.conftest import build_source_app  # noqa: E402
from tests.runtime.validation.validation_cost_kit import FAST, SLOW  # noqa: E402


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _pings(art: AsyncRuntime, tag: str, n: int) -> list[float]:
    out = []
    for i in range(n):
        t0 = time.perf_counter()
        msg = await art.call(f"{tag}-{i}", "c-fast", "fast.ping", {"n": i})
        if msg["kind"] not in ("result", "error"):
            await art.settle()
        out.append((time.perf_counter() - t0) * 1000)
    return out


async def _attack(art: AsyncRuntime, tag: str, stop: asyncio.Event) -> int:
    sent = 0
    while not stop.is_set():
        call_id = f"{tag}-slow-{sent}"
        msg = await art.call(call_id, "c-slow-w", "slow.give", {})
        sent += 1
        while msg["kind"] not in ("result", "error"):  # one value in validation at a time
            await asyncio.sleep(0.05)
            record = await art.call_record(call_id)
            assert record is not None
            msg = record["messages"][-1]
    return sent


async def run(calls: int, rounds: int, budget: float) -> dict[str, Any]:
    key = key_from_seed(bytes(range(1, 33)))
    trust = TrustStore.from_keys([TrustedKey(key.key_id, key.public_raw, ("*",), "bench")])
    with tempfile.TemporaryDirectory() as tmp:
        slow = build_source_app(Path(tmp) / "slow", "slow", SLOW, key)
        fast = build_source_app(Path(tmp) / "fast", "fast", FAST, key)
        art = await AsyncRuntime.open(
            ":memory:", trust=trust, host=HostSimulator(policy="auto"), validation_budget_s=budget
        )
        async with art:
            await art.install(slow)
            await art.install(fast)
            await art.call("warm-f", "c-fast", "fast.ping", {})
            await art.call("warm-s", "c-slow-w", "slow.ping", {})
            await art.settle()
            normal: list[float] = []
            attacked: list[float] = []
            slow_calls = 0
            for r in range(rounds):
                normal += await _pings(art, f"n{r}", calls)
                stop = asyncio.Event()
                attack = asyncio.ensure_future(_attack(art, f"a{r}", stop))
                await asyncio.sleep(0.2)  # the validator is busy before the first ping
                attacked += await _pings(art, f"a{r}", calls)
                stop.set()
                slow_calls += await attack
            await art.settle()
    return {
        "calls_per_mode": len(normal),
        "budget_s": budget,
        "slow_calls": slow_calls,
        "normal_p50_ms": round(statistics.median(normal), 2),
        "normal_p99_ms": round(_p(normal, 0.99), 2),
        "attacked_p50_ms": round(statistics.median(attacked), 2),
        "attacked_p99_ms": round(_p(attacked, 0.99), 2),
        "p99_delta_ms": round(_p(attacked, 0.99) - _p(normal, 0.99), 2),
        "target_delta_ms": 50,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--budget", type=float, default=1.0)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--smoke", action="store_true", help="a tiny size, one round (CI)")
    args = parser.parse_args()
    if args.smoke:
        args.calls = 3
        args.rounds = 1
    result = asyncio.run(run(args.calls, args.rounds, args.budget))
    if args.json:
        print(json.dumps(result, indent=2))
        return
    for name, value in result.items():
        print(f"{name:>18}: {value}")


if __name__ == "__main__":
    main()
