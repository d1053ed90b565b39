"""Benchmark the Surface as an MCP App (SPEC 18.2).

Figures:

* Agent change → View listener: in the MCP Apps test host (the official ext-apps AppBridge
  in Chromium, its MCP client in Node, `lineup serve --http` on the todo template), the
  Agent adds `--changes` items one at a time (each `tools/call todo-add` through the host's
  plain client); a MutationObserver in the View stamps when each item is rendered. p50 and
  p95 of the delay from the Agent's answer (the commit is before it) and from its request.
  SPEC 18.2's bar: ≤ 300 ms p50 over 100 changes.
* `tools/list` and MCP `ping` through `lineup serve --http` (todo and pomodoro templates),
  p50 over `--calls` after a warm-up, for a client that declared the extension and for one
  that did not, sampled round-robin on one server.

    python benchmarks/bench_mcp_apps.py [--changes 100] [--calls 300] [--json] [--smoke]

Needs Chromium and the test host's Node packages (tests/users/mcp_apps, `npm ci` there or
`LINEUP_MCP_APPS_DIR`). It is not part of the test suite.
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

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "bench-token-0123456789"
UI = {"io.modelcontextprotocol/ui": {"mimeTypes": ["text/html;profile=mcp-app"]}}

#: Installed in the View: the time (ms, this browser's clock) each item count is reached.
OBSERVE = """() => {
    window.__seen = {};
    const list = document.getElementById('items');
    const stamp = () => {
        const n = list.children.length;
        if (window.__seen[n] === undefined) window.__seen[n] = Date.now();
    };
    new MutationObserver(stamp).observe(list, {childList: true});
    stamp();
}"""
#: Run in the host page: one Agent add through the plain client, its send and answer times.
ADD = """async (title) => {
    const sent = Date.now();
    const r = await fetch("/plain", {method: "POST", body: JSON.stringify(
        {method: "tools/call", params: {name: "todo-add", arguments: {title}}})});
    const body = await r.json();
    if (body.error || body.result.isError) throw new Error(JSON.stringify(body));
    return [sent, Date.now()];
}"""


def _pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def bench_view_latency(changes: int) -> dict[str, Any]:
    sys.path.insert(0, str(ROOT))
    from tests.users.mcp_apps_kit import host_page, packages_dir, running_host, views

    if packages_dir() is None:
        raise SystemExit("no MCP Apps host packages: npm ci in tests/users/mcp_apps")
    tmp = Path(tempfile.mkdtemp(prefix="bench-mcp-apps-"))
    from_answer: list[float] = []
    from_request: list[float] = []
    with running_host(tmp, ["todo"]) as host, host_page(host) as page:
        page.evaluate("lineupHost.open('todo-add', {title: 'first'})")
        view = views(page)[0]
        view.wait_for_function("() => document.getElementById('items').children.length === 1")
        view.evaluate(OBSERVE)
        for i in range(changes):
            count = i + 2
            sent, answered = page.evaluate(ADD, f"item {i}")
            view.wait_for_function(f"() => window.__seen[{count}] !== undefined")
            seen = view.evaluate(f"window.__seen[{count}]")
            from_answer.append(max(0.0, float(seen - answered)))
            from_request.append(float(seen - sent))
    return {
        "changes": changes,
        "from_answer_p50_ms": statistics.median(from_answer),
        "from_answer_p95_ms": _pct(from_answer, 0.95),
        "from_request_p50_ms": statistics.median(from_request),
        "from_request_p95_ms": _pct(from_request, 0.95),
    }


@contextlib.asynccontextmanager
async def _session(url: str, declared: bool) -> AsyncIterator[Any]:
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    client = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60)
    async with (
        client,
        streamable_http_client(url, http_client=client) as (r, w),
        ClientSession(r, w, extensions=UI if declared else None) as s,
    ):
        await s.initialize()
        yield s


async def _list_and_ping(url: str, calls: int) -> dict[str, Any]:
    async with contextlib.AsyncExitStack() as stack:
        sessions = {
            "plain": await stack.enter_async_context(_session(url, False)),
            "ui_declared": await stack.enter_async_context(_session(url, True)),
        }
        listed = {k: (await s.list_tools()).tools for k, s in sessions.items()}
        assert not any(t.name == "lineup-surface-sync" for t in listed["plain"])
        samples: dict[str, dict[str, list[float]]] = {k: {"list": [], "ping": []} for k in sessions}
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
        k: {
            "tools_list_p50_ms": statistics.median(v["list"]) * 1000,
            "ping_p50_ms": statistics.median(v["ping"]) * 1000,
        }
        for k, v in samples.items()
    } | {"ui_listed": any(t.name == "lineup-surface-sync" for t in listed["ui_declared"])}


def bench_serve(calls: int) -> dict[str, Any]:
    import anyio

    from lineup_build.init import init_project

    root = Path(tempfile.mkdtemp(prefix="bench-mcp-apps-serve-"))
    init_project(root / "todo", template="todo", scope="todo")
    init_project(root / "focus", template="pomodoro", scope="pomodoro")
    env = {**os.environ, "LINEUP_SERVE_TOKEN": TOKEN}
    argv = [sys.executable, "-c", "from lineup_build.cli import main; main()", "serve"]
    argv += ["todo", "focus", "--db", str(root / "s.db"), "--http", "127.0.0.1:0"]
    proc = subprocess.Popen(
        argv, cwd=root, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stderr is not None
        url = ""
        for line in proc.stderr:
            if " tools at " in line:
                url = line.rsplit(" ", 1)[-1].strip()
            if "token " in line:
                break
        assert url, "serve did not start"
        result: dict[str, Any] = anyio.run(_list_and_ping, url, calls)
        assert result["ui_listed"], "a declaring client got no app-only tools"
        return result
    finally:
        proc.terminate()
        proc.wait(30)
        if proc.stderr is not None:
            proc.stderr.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--changes", type=int, default=100, help="Agent adds the View follows")
    ap.add_argument("--calls", type=int, default=300, help="timed tools/list and pings")
    ap.add_argument("--json", action="store_true", help="print one JSON document")
    ap.add_argument("--smoke", action="store_true", help="a tiny size, one round (CI)")
    args = ap.parse_args(argv)
    if args.smoke:
        args.changes, args.calls = 3, 5
    out = {"view": bench_view_latency(args.changes), "serve_http": bench_serve(args.calls)}
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    v = out["view"]
    print(
        f"Agent change -> View listener over {v['changes']} changes: "
        f"p50 {v['from_answer_p50_ms']:.0f} ms after the Agent's answer "
        f"(p95 {v['from_answer_p95_ms']:.0f}), p50 {v['from_request_p50_ms']:.0f} ms after "
        f"its request (p95 {v['from_request_p95_ms']:.0f}); bar: 300 ms p50"
    )
    for key in ("plain", "ui_declared"):
        fig = out["serve_http"][key]
        print(
            f"serve --http, {key}: tools/list p50 {fig['tools_list_p50_ms']:.2f} ms, "
            f"ping p50 {fig['ping_p50_ms']:.2f} ms"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
