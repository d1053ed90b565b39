"""Benchmark validation fairness between apps (SPEC 16.4): another app's non-plain value,
timed from its arrival, while one app keeps 8 budget-long values queued.

One runtime, two apps: `flood.check`, whose input schema is 17 nested `anyOf` of one `$ref`
twice (a failing value takes seconds of jsonschema: each runs to the validation budget),
and `other.check`, whose input schema is not plain but cheap (9 levels: milliseconds).
Each round queues 8 `flood.check` values at once and, while they are validated, sends
`other.check` values one after another (a short pause between them), timing each from the
call to its acceptance (its input validated). With `--kill`, one busy validator process
is killed (SIGKILL) in the middle of every round.

Prints p50/p99/max of the other app's wait and the target (p99 ≤ 1.2 s with the default
1 s budget on 2 cores). Run it with the toolchain's interpreter:

    python benchmarks/bench_validation_fairness.py [--rounds 6] [--budget 1.0] [--kill] [--smoke]
        [--root PATH] [--json]

`--root` imports the toolchain from another checkout (e.g. an older commit's worktree) to
compare; the apps are built here, so the benchmark needs nothing of that checkout's tests.
It is not part of the test suite.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FLOOD = 8
SEED = 34


def _defs(levels: int) -> dict[str, Any]:
    defs: dict[str, Any] = {f"a{levels}": {"type": "integer"}}
    for i in range(levels - 1, -1, -1):
        ref = {"$ref": f"#/$defs/a{i + 1}"}
        defs[f"a{i}"] = {"anyOf": [ref, dict(ref)]}
    return defs


def _source(scope: str, levels: int) -> str:
    return f'''
from __future__ import annotations

from typing import Any

from lineup_sdk import ToolContext, define_agent_tools

tools = define_agent_tools(app_scope="{scope}")

tools.declare(
    "{scope}.check",
    input_schema={{
        "type": "object",
        "properties": {{"x": {{"$ref": "#/$defs/a0"}}}},
        "required": ["x"],
        "additionalProperties": False,
        "$defs": {_defs(levels)!r},
    }},
    result_schema={{"type": "string"}},
    activation="app_ready",
    description="An input schema that is not plain.",
)


@tools.handler("{scope}.check")
def check(ctx: ToolContext, params: dict[str, Any]) -> str:
    return "checked"
'''


def _build(root: Path, scope: str, levels: int, key: Any) -> Path:
    from lineup_build import build_project

    package = root / f"{scope}_app"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "tools.py").write_text(_source(scope, levels))
    (root / "lineup.toml").write_text(
        f'[app]\nscope = "{scope}"\nname = "{scope.title()}"\nversion = "1.0.0"\n'
        f'entry = "{scope}_app.tools"\ninclude = ["{scope}_app/**/*.py"]\n'
    )
    result = build_project(root, signing_key=key)
    assert result.ok and result.bundle is not None
    return Path(result.bundle)


def _validators() -> list[int]:
    """The pids of this process's validator children (from /proc)."""
    me = str(os.getpid())
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if stat.rsplit(")", 1)[1].split()[1] == me and b"validation.child" in cmd:
            out.append(int(entry))
    return out


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def run(rounds: int, budget: float, kill: bool) -> dict[str, Any]:
    from lineup_build.signing import key_from_seed
    from lineup_build.trust import TrustedKey, TrustStore
    from lineup_runtime_lite import AsyncRuntime, HostSimulator

    rng = random.Random(SEED)
    key = key_from_seed(bytes(range(1, 33)))
    trust = TrustStore.from_keys([TrustedKey(key.key_id, key.public_raw, ("*",), "bench")])
    waits: list[float] = []
    killed = 0
    with tempfile.TemporaryDirectory() as tmp:
        flood_bundle = _build(Path(tmp) / "flood", "flood", 17, key)
        other_bundle = _build(Path(tmp) / "other", "other", 9, key)
        art = await AsyncRuntime.open(
            ":memory:", trust=trust, host=HostSimulator(policy="auto"), validation_budget_s=budget
        )
        async with art:
            await art.install(flood_bundle)
            await art.install(other_bundle)
            await art.call("warm-o", "c-other", "other.check", {"x": 1})
            await art.call("warm-f", "c-flood", "flood.check", {"x": 1})
            await art.settle()
            await asyncio.sleep(1.0)  # processes (and a spare, where there is one) started
            for r in range(rounds):
                flood = [
                    asyncio.ensure_future(
                        art.call(f"f{r}-{i}", "c-flood", "flood.check", {"x": "s"})
                    )
                    for i in range(FLOOD)
                ]
                kill_at = time.monotonic() + rng.uniform(0.2, 1.5 * budget) if kill else None
                n = 0
                while not all(f.done() for f in flood):
                    if kill_at is not None and time.monotonic() >= kill_at:
                        kill_at = None
                        pids = _validators()
                        if pids:
                            os.kill(rng.choice(pids), signal.SIGKILL)
                            killed += 1
                    await asyncio.sleep(rng.uniform(0.02, 0.15))
                    t0 = time.monotonic()
                    msg = await art.call(f"o{r}-{n}", "c-other", "other.check", {"x": n})
                    waits.append(time.monotonic() - t0)
                    assert msg["kind"] != "error", msg
                    n += 1
                await asyncio.gather(*flood)
            await art.settle()
    return {
        "seed": SEED,
        "rounds": rounds,
        "flood_values_per_round": FLOOD,
        "budget_s": budget,
        "validators_killed": killed,
        "other_values": len(waits),
        "other_p50_s": round(statistics.median(waits), 3),
        "other_p99_s": round(_p(waits, 0.99), 3),
        "other_max_s": round(max(waits), 3),
        "target_p99_s": round(1.2 * budget, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--budget", type=float, default=1.0)
    parser.add_argument("--kill", action="store_true", help="kill a validator every round")
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout to import")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--smoke", action="store_true", help="a tiny size, one round (CI)")
    args = parser.parse_args()
    if args.smoke:
        args.rounds, args.budget = 1, 0.2
    sys.path.insert(0, str(args.root.resolve()))
    result = asyncio.run(run(args.rounds, args.budget, args.kill))
    result["root"] = str(args.root)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    for name, value in result.items():
        print(f"{name:>24}: {value}")


if __name__ == "__main__":
    main()
