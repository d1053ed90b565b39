"""Benchmark UI Actions from a Surface (SPEC 17) in headless Chromium against `lineup dev`
on the SQLite file store.

Figures:

* `surface`: `sdk.actions.run` round trip — `performance.now()` from `run()` to its
  resolution, in the page — over `--actions` actions issued one after another (each a
  `todo.toggle`) while an Agent calls a writing tool (`todo.add`, a handler of about 1 ms)
  on the same App session at a fixed `--rate` calls/s: p50 and p99; the goals are <= 30 ms
  and <= 100 ms.
* `python`: `Surface.act`'s round trip for the same actions, in this process, under the same
  Agent load (beside the Surface's, in the same run).
* `serial`: whether the final data equals the serial application of every accepted
  operation — every Agent add present once, in order; the toggled item's `done` the parity
  of the toggles; one revision per write.

Run it with the interpreter that has the toolchain, the `web` extra and Playwright, on a
machine with Chromium (`apt-get install -y chromium`; `$LINEUP_CHROMIUM` to name it):

    python benchmarks/bench_surface_actions.py [--actions 200] [--rate 20] [--json] [--smoke]

It is not part of the test suite (its `--smoke` run is, in tests/test_benchmarks.py).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

#: In the Surface frame: `n` toggles of one item one after another; each round trip in ms.
RUN = """
async ({ n, id }) => {
  const { sdk } = await import("/_lineup/sdk.js");
  const out = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    await sdk.actions.run("todo.toggle", { id });
    out.push(performance.now() - t0);
  }
  return out;
}
"""


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


class Agent:
    """An Agent calling `todo.add` on the session at a fixed rate, in a thread of its own."""

    def __init__(self, rt: Any, conversation: str, rate: float, prefix: str) -> None:
        self.rt, self.conversation, self.period = rt, conversation, 1.0 / rate
        self.prefix = prefix
        self.added: list[str] = []
        self.stop = threading.Event()
        self.errors: list[BaseException] = []
        self.thread = threading.Thread(target=self.run, name="bench-agent", daemon=True)

    def run(self) -> None:
        start = time.monotonic()
        n = 0
        try:
            while not self.stop.is_set():
                title = f"{self.prefix} {n}"
                answer = self.rt.call(
                    f"{self.prefix}-{n}", self.conversation, "todo.add", {"title": title}
                )
                assert answer["stage"] in ("accepted", "result"), answer
                self.added.append(title)
                n += 1
                wait = start + n * self.period - time.monotonic()  # a fixed schedule
                if wait > 0:
                    self.stop.wait(wait)
        except BaseException as exc:  # reported by the caller
            self.errors.append(exc)

    def __enter__(self) -> Agent:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(30)
        self.rt.settle()
        if self.errors:
            raise self.errors[0]


def _summary(times: list[float]) -> dict[str, Any]:
    return {
        "actions": len(times),
        "p50_ms": round(_pct(times, 0.5), 2),
        "p99_ms": round(_pct(times, 0.99), 2),
        "max_ms": round(max(times), 2),
    }


def bench(root: Path, actions: int, rate: float) -> dict[str, Any]:
    from lineup_build.init import init_project
    from lineup_runtime_lite.web.browser import dev_page

    project = root / "todo"
    init_project(project, template="todo")
    out: dict[str, Any] = {"rate_per_s": rate}
    with dev_page(project, db=root / "dev.db") as dev:
        rt = dev.server.rt
        surface = rt.surface("dev", "todo")
        dev.call("todo.add", {"title": "toggled"})
        rt.settle()
        [item] = [i["id"] for i in surface.get().data["items"]]
        frame = dev.surface()
        frame.wait_for_selector('[data-testid="todo-item"]')
        frame.evaluate(RUN, {"n": 2, "id": item})  # warm-up: 2 toggles
        base = surface.get().revision
        with Agent(rt, "dev", rate, "surface-bench") as agent:
            times = frame.evaluate(RUN, {"n": actions, "id": item})
        out["surface"] = _summary(times)
        surface_agent = list(agent.added)
        # Surface.act in this process, under the same load
        py_times: list[float] = []
        with Agent(rt, "dev", rate, "python-bench") as agent2:
            for seq in range(1, actions + 1):
                t0 = time.perf_counter()
                surface.act("todo.toggle", {"id": item}, client_id="bench-python", seq=seq)
                py_times.append((time.perf_counter() - t0) * 1000)
        out["python"] = _summary(py_times)
        # the serial application: every add once and in order, the toggles' parity, one
        # revision per write (2 warm-up toggles, then `actions` from each client)
        final = surface.get()
        items = final.data["items"]
        adds = [*surface_agent, *agent2.added]
        equal = (
            [i["title"] for i in items] == ["toggled", *adds]
            and items[0]["done"] is ((2 + 2 * actions) % 2 == 1)
            and final.revision == base + 2 * actions + len(adds)
        )
        out["serial"] = {"equal": equal, "agent_calls": len(adds), "revision": final.revision}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--actions", type=int, default=200)
    parser.add_argument("--rate", type=float, default=20.0, help="Agent calls per second")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--smoke", action="store_true", help="a tiny size, one round (CI)")
    args = parser.parse_args()
    if args.smoke:
        args.actions = 3
    from lineup_runtime_lite.web.browser import missing_browser

    why = missing_browser()
    if why is not None:
        sys.exit(f"bench_surface_actions: {why}")
    with tempfile.TemporaryDirectory(prefix="bench-surface-actions-") as tmp:
        result = bench(Path(tmp), args.actions, args.rate)
    if args.json:
        print(json.dumps(result))
        return
    s, p, serial = result["surface"], result["python"], result["serial"]
    print(
        f"sdk.actions.run  {s['actions']} actions, Agent at {result['rate_per_s']:g} calls/s: "
        f"p50 {s['p50_ms']} ms, p99 {s['p99_ms']} ms (max {s['max_ms']} ms; goals 30 / 100 ms)"
    )
    print(
        f"Surface.act      {p['actions']} actions, same load: p50 {p['p50_ms']} ms, "
        f"p99 {p['p99_ms']} ms (max {p['max_ms']} ms)"
    )
    print(
        f"serial           final data equals the serial application: {serial['equal']} "
        f"({serial['agent_calls']} Agent calls, revision {serial['revision']})"
    )
    if not serial["equal"]:
        sys.exit("bench_surface_actions: the final data is not the serial application")


if __name__ == "__main__":
    main()
