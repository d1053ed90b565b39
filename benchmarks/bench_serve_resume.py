"""Benchmark `lineup serve --http` beside another checkout, and resumption's cost (SPEC 18.1).

Figures (p50 over `--calls` requests after a warm-up, the servers sampled round-robin so load
drift hits them alike):

* `tools/list` and MCP `ping` through `lineup serve --http` (the todo and pomodoro
  templates), one server per checkout named with `--checkout` (each run with
  `PYTHONPATH=<checkout>`, this interpreter), the official Python client over streamable HTTP
  with the bearer token. What this round adds on that path: the POST peek that names a
  `tools/call`'s stream, and the `resources` handlers.
* resume: in process, `--resumes` long-running pomodoro calls on a virtual clock, each
  stream dropped after `accepted`, the focus ended, then `GET` with `Last-Event-ID`: the
  events each replay sent (from the stored facts) and the time from the `GET` to the final.

    python benchmarks/bench_serve_resume.py --checkout /work/wt/base-89ded1c --checkout . \\
        [--calls 300] [--resumes 30] [--json] [--smoke]

It is not part of the test suite.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

PY = sys.executable
TOKEN = "bench-token-0123456789"


def _p50(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def _start(checkout: Path, root: Path, name: str) -> tuple[subprocess.Popen[str], str]:
    env = {**os.environ, "PYTHONPATH": str(checkout), "LINEUP_SERVE_TOKEN": TOKEN}
    argv = [PY, "-c", "from lineup_build.cli import main; main()", "serve", "todo", "focus"]
    argv += ["--db", str(root / f"{name}.db"), "--http", "127.0.0.1:0"]
    proc = subprocess.Popen(
        argv, cwd=root, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stderr is not None
    url = ""
    for line in proc.stderr:
        if " tools at " in line:
            url = line.rsplit(" ", 1)[-1].strip()
        if "token " in line:
            break
    assert url, f"{checkout}: serve did not start"
    return proc, url


@contextlib.asynccontextmanager
async def _session(url: str) -> AsyncIterator[Any]:
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    client = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60)
    async with (
        client,
        streamable_http_client(url, http_client=client) as (r, w),
        ClientSession(r, w) as s,
    ):
        await s.initialize()
        yield s


async def _side_by_side(urls: dict[str, str], calls: int) -> dict[str, Any]:
    async with contextlib.AsyncExitStack() as stack:
        sessions = {k: await stack.enter_async_context(_session(u)) for k, u in urls.items()}
        samples: dict[str, dict[str, list[float]]] = {k: {"list": [], "ping": []} for k in urls}
        for i in range(calls + 20):
            for key, s in sessions.items():
                t0 = time.perf_counter()
                await s.list_tools()
                t1 = time.perf_counter()
                await s.send_ping()
                t2 = time.perf_counter()
                if i >= 20:  # warm-up
                    samples[key]["list"].append(t1 - t0)
                    samples[key]["ping"].append(t2 - t1)
    return {
        k: {"tools_list_p50_ms": _p50(v["list"]), "ping_p50_ms": _p50(v["ping"])}
        for k, v in samples.items()
    }


def _resumes(n: int) -> dict[str, Any]:
    import anyio
    import httpx2

    from lineup_build.build import build_project
    from lineup_build.init import init_project
    from lineup_build.signing import key_from_seed
    from lineup_build.trust import TrustedKey, TrustStore
    from lineup_runtime_lite import HostSimulator, Runtime, VirtualClock
    from lineup_runtime_lite.serve import Bridge, ServeOptions, serve_http

    tmp = Path(tempfile.mkdtemp(prefix="bench-resume-"))
    key = key_from_seed(bytes(range(1, 33)))
    init_project(tmp / "pomodoro", template="pomodoro")
    built = build_project(tmp / "pomodoro", signing_key=key)
    assert built.bundle is not None
    trust = TrustStore.from_keys([TrustedKey(key.key_id, key.public_raw, ("*",), "bench")])
    clock = VirtualClock()
    rt = Runtime.open(tmp / "rt.db", trust=trust, clock=clock, host=HostSimulator(policy="auto"))
    rt.install(built.bundle)
    bridge = Bridge(rt, ServeOptions(poll_s=0.01))
    import threading

    ready, stop = threading.Event(), threading.Event()
    where: list[str] = []

    def up(url: str) -> None:
        where.append(url)
        ready.set()

    thread = threading.Thread(
        target=serve_http, args=(bridge, "127.0.0.1", 0, TOKEN),
        kwargs={"on_ready": up, "stop": stop}, daemon=True,
    )  # fmt: skip
    thread.start()
    assert ready.wait(30)
    url = where[0]
    costs: list[float] = []
    counts: list[int] = []
    head = {
        "Authorization": f"Bearer {TOKEN}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-11-25",
    }

    async def main() -> None:
        async with httpx2.AsyncClient(timeout=60) as c:
            init = {
                "jsonrpc": "2.0", "id": 0, "method": "initialize",
                "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                           "clientInfo": {"name": "bench", "version": "0"}},
            }  # fmt: skip
            got = await c.post(url, json=init, headers=head)
            h = {**head, "Mcp-Session-Id": got.headers["mcp-session-id"]}
            await c.post(
                url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=h
            )
            for i in range(n):
                call_id = f"bench-{i}"
                body = {
                    "jsonrpc": "2.0", "id": i + 1, "method": "tools/call",
                    "params": {"name": "pomodoro-start", "arguments": {"minutes": 1},
                               "_meta": {"progressToken": i, "io.lineup/call_id": call_id,
                                         "io.lineup/conversation_id": call_id}},
                }  # fmt: skip
                last = ""
                async with c.stream("POST", url, json=body, headers=h) as r:
                    async for line in r.aiter_lines():
                        if line.startswith("id:"):
                            last = line[3:].strip()
                        if line.startswith("data:") and "accepted" in line:
                            break
                while True:
                    rec = rt.call_record(call_id)
                    if rec and any(m["stage"] == "started" for m in rec["messages"]):
                        break
                    await anyio.sleep(0.005)
                await anyio.to_thread.run_sync(clock.advance, 60_000)
                while (rec := rt.call_record(call_id)) is None or rec["messages"][-1][
                    "kind"
                ] not in ("result", "error"):
                    await anyio.sleep(0.005)
                t0 = time.perf_counter()
                events = 0
                async with c.stream("GET", url, headers={**h, "Last-Event-ID": last}) as r:
                    async for line in r.aiter_lines():
                        if line.startswith("data:") and line[5:].strip():
                            events += 1
                costs.append(time.perf_counter() - t0)
                counts.append(events)

    try:
        anyio.run(main)
    finally:
        stop.set()
        thread.join(30)
        rt.close()
    return {
        "resumes": n,
        "events_per_resume": statistics.median(counts),
        "events_max": max(counts),
        "resume_to_final_p50_ms": _p50(costs),
        "facts_written_per_event": 0,
    }


def main(argv: list[str] | None = None) -> int:
    import anyio

    from lineup_build.init import init_project

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkout", action="append", default=[], help="a checkout to serve from")
    ap.add_argument("--calls", type=int, default=300, help="timed tools/list and pings")
    ap.add_argument("--resumes", type=int, default=30, help="dropped streams resumed")
    ap.add_argument("--json", action="store_true", help="print one JSON document")
    ap.add_argument("--smoke", action="store_true", help="a tiny size, one round (CI)")
    args = ap.parse_args(argv)
    if args.smoke:  # this checkout served alone, a few requests and one resume
        args.checkout = args.checkout or [str(Path(__file__).resolve().parents[1])]
        args.calls, args.resumes = 5, 1
    out: dict[str, Any] = {}
    if args.checkout:
        root = Path(tempfile.mkdtemp(prefix="bench-serve-http-"))
        init_project(root / "todo", template="todo", scope="todo")
        init_project(root / "focus", template="pomodoro", scope="pomodoro")
        procs: list[subprocess.Popen[str]] = []
        urls: dict[str, str] = {}
        try:
            for i, checkout in enumerate(args.checkout):
                proc, url = _start(Path(checkout).resolve(), root, f"s{i}")
                procs.append(proc)
                urls[f"{checkout}"] = url
            out["serve_http"] = anyio.run(_side_by_side, urls, args.calls)
        finally:
            for proc in procs:
                proc.terminate()
                proc.wait(30)
    if args.resumes:
        out["resume"] = _resumes(args.resumes)
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        for key, fig in out.get("serve_http", {}).items():
            print(
                f"{key}: tools/list p50 {fig['tools_list_p50_ms']:.2f} ms, "
                f"ping p50 {fig['ping_p50_ms']:.2f} ms"
            )
        if "resume" in out:
            r = out["resume"]
            print(
                f"resume: {r['resumes']} resumes, {r['events_per_resume']} events each "
                f"(max {r['events_max']}), GET to final p50 {r['resume_to_final_p50_ms']:.2f} ms, "
                "nothing written per event"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
