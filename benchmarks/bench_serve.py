"""Benchmark `lineup serve` against the MCP Python SDK's own low-level server, side by side
in one run with the same client (`mcp.ClientSession` over stdio).

Figures (p50 over `--calls` requests after a warm-up):

* `ping`: a trivial `bench.ping` tool called through `lineup serve` over stdio; the same
  call through `Runtime.call` in process (the durable path: SQLite commits, the worker);
  the SDK's low-level stdio server answering MCP `ping`, and answering a `ping` tool with
  the same schemas. The four are sampled round-robin, so load drift hits them alike. The
  bridge adds nothing of its own when `serve p50 <= Runtime.call p50 + SDK ping p50`.
* `tools/list` of a 1,000-tool app (the generator of bench_build.py) through
  `lineup serve`, and the SDK's low-level server listing the same 1,001 entries (the
  app's tools and `lineup-result`).
* `pending`: with `--max-wait 0`, the time from a long-running `tools/call` without a
  progress token (`pomodoro-start`, each in a conversation of its own) to its `pending`
  answer, interleaved with the ping tool on the same server (SPEC 13.2).

Run it with the interpreter that has the toolchain and the `mcp` extra installed:

    python benchmarks/bench_serve.py [--calls 300] [--lists 30] [--json]

It is not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

PY = sys.executable
LINEUP = [PY, "-c", "from lineup_build.cli import main; main()"]

_PING_APP = '''"""A MiniApp with one trivial tool."""

from __future__ import annotations

from lineup_sdk import ToolContext, define_agent_tools

tools = define_agent_tools(app_scope="bench")


@tools.tool("bench.ping", activation="app_ready")
async def ping(ctx: ToolContext) -> dict[str, bool]:
    """Answer at once."""
    return {"ok": True}
'''

#: The SDK baseline: a low-level server over stdio, its tools loaded from a JSON file.
_SDK_SERVER = """
import json, sys
import anyio
import mcp.types as mt
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

TOOLS = [mt.Tool.model_validate(t) for t in json.load(open(sys.argv[1]))]

async def list_tools(ctx, params):
    return mt.ListToolsResult(tools=TOOLS)

async def call_tool(ctx, params):
    return mt.CallToolResult(
        content=[mt.TextContent(type="text", text='{"ok": true}')],
        structured_content={"ok": True},
    )

server = Server("sdk-baseline", on_list_tools=list_tools, on_call_tool=call_tool)

async def main():
    async with stdio_server() as (r, w):
        await server.run(r, w, server.create_initialization_options())

anyio.run(main)
"""


def _ping_project(root: Path) -> Path:
    app = root / "ping"
    (app / "ping_app").mkdir(parents=True)
    (app / "ping_app" / "__init__.py").write_text('"""Ping."""\n')
    (app / "ping_app" / "tools.py").write_text(_PING_APP)
    (app / "lineup.toml").write_text(
        '[app]\nscope = "bench"\nname = "Ping"\nversion = "1.0.0"\n'
        'entry = "ping_app.tools"\ninclude = ["ping_app/**/*.py"]\n'
    )
    return app


def _p50(samples: list[float]) -> float:
    return statistics.median(samples) * 1000  # ms


async def _timed(n: int, fn: Callable[[], Awaitable[Any]]) -> list[float]:
    out = []
    for _ in range(n):
        start = time.perf_counter()
        await fn()
        out.append(time.perf_counter() - start)
    return out


async def _over_stdio(
    command: list[str], cwd: Path, body: Callable[[Any], Awaitable[dict[str, Any]]]
) -> dict[str, Any]:
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=command[0], args=command[1:], cwd=str(cwd))
    with open(cwd / "server-stderr.txt", "a") as err:
        async with stdio_client(params, errlog=err) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            return await body(s)


def _entries(app: Path, db: Path) -> list[dict[str, Any]]:
    """The `tools/list` entries `lineup serve` builds for an app."""
    from lineup_build.cli.compose import prepare_targets
    from lineup_runtime_lite import Runtime
    from lineup_runtime_lite.serve import Bridge, install_targets

    trust, prepared = prepare_targets([app], None)
    with Runtime.open(db, trust=trust) as rt:
        install_targets(rt, prepared)
        return list(Bridge(rt)._listing["tools"])  # the app's tools and `lineup-result`


def _open_direct(app: Path, db: Path) -> Any:
    """A runtime in this process with the ping app installed and its session ready."""
    from lineup_build.cli.compose import prepare_targets
    from lineup_runtime_lite import Runtime
    from lineup_runtime_lite.serve import install_targets

    trust, prepared = prepare_targets([app], None)
    rt = Runtime.open(db, trust=trust)
    install_targets(rt, prepared)
    if rt.call("warm-0", "bench", "bench.ping", {})["kind"] == "receipt":
        rt.settle()
    return rt


async def _both(
    serve_cmd: list[str],
    sdk_cmd: list[str],
    cwd: Path,
    body: Callable[[Any, Any], Awaitable[dict[str, Any]]],
) -> dict[str, Any]:
    """Two stdio sessions open at once (lineup serve, the SDK baseline), so that samples
    can be interleaved and load drift on the machine hits every figure alike."""
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    a = StdioServerParameters(command=serve_cmd[0], args=serve_cmd[1:], cwd=str(cwd))
    b = StdioServerParameters(command=sdk_cmd[0], args=sdk_cmd[1:], cwd=str(cwd))
    with open(cwd / "server-stderr.txt", "a") as err:
        async with (
            stdio_client(a, errlog=err) as (ra, wa),
            ClientSession(ra, wa) as serve,
            stdio_client(b, errlog=err) as (rb, wb),
            ClientSession(rb, wb) as sdk,
        ):
            await serve.initialize()
            await sdk.initialize()
            return await body(serve, sdk)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the figures."""
    import anyio

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=300, help="timed calls per ping figure")
    ap.add_argument("--lists", type=int, default=30, help="timed tools/list per figure")
    ap.add_argument("--json", action="store_true", help="print one JSON document")
    ap.add_argument("--smoke", action="store_true", help="a tiny size, one round (CI)")
    args = ap.parse_args(argv)
    if args.smoke:
        args.calls = 3
        args.lists = 2
    sys.path.insert(0, str(Path(__file__).parent))
    from bench_build import generate

    from lineup_build.init import init_project

    tmp = Path(tempfile.mkdtemp(prefix="lineup-bench-serve-"))
    results: dict[str, Any] = {"python": sys.version.split()[0], "calls": args.calls}
    try:
        ping_app = _ping_project(tmp)
        big_app = generate(tmp, 1000)
        sdk_script = tmp / "sdk_server.py"
        sdk_script.write_text(_SDK_SERVER)

        direct = _open_direct(ping_app, tmp / "direct.db")

        async def direct_call(i: int) -> None:
            # synchronous, as an embedding program calls it (the sessions idle meanwhile)
            msg = direct.call(f"direct-{i}", "bench", "bench.ping", {})
            assert msg["kind"] == "result", msg

        async def ping_round(serve: Any, sdk: Any) -> dict[str, Any]:
            await serve.call_tool("bench-ping", {})  # starts the app
            samples: dict[str, list[float]] = {k: [] for k in ("serve", "direct", "ping", "tool")}
            steps: dict[str, Callable[[int], Awaitable[Any]]] = {
                "serve": lambda i: serve.call_tool("bench-ping", {}),
                "direct": direct_call,
                "ping": lambda i: sdk.send_ping(),
                "tool": lambda i: sdk.call_tool("ping", {}),
            }
            for i in range(-20, args.calls):  # round-robin; the first 20 rounds warm up
                for key, step in steps.items():
                    start = time.perf_counter()
                    await step(i)
                    if i >= 0:
                        samples[key].append(time.perf_counter() - start)
            return {
                "serve_ping_tool_p50_ms": _p50(samples["serve"]),
                "runtime_call_p50_ms": _p50(samples["direct"]),
                "sdk_ping_p50_ms": _p50(samples["ping"]),
                "sdk_ping_tool_p50_ms": _p50(samples["tool"]),
            }

        def lister(key: str, n: int) -> Callable[[Any], Awaitable[dict[str, Any]]]:
            async def body(s: Any) -> dict[str, Any]:
                first = await s.list_tools()
                assert len(first.tools) == n, len(first.tools)
                for _ in range(3):
                    await s.list_tools()
                return {key: _p50(await _timed(args.lists, s.list_tools))}

            return body

        # the SDK baseline serves the very same tool entry (schemas included), named `ping`
        ping_entry, _own = _entries(ping_app, tmp / "ping-inv.db")
        (tmp / "ping_tools.json").write_text(json.dumps([{**ping_entry, "name": "ping"}]))
        serve_cmd = [*LINEUP, "serve", str(ping_app), "--db", str(tmp / "serve.db")]
        sdk_cmd = [PY, str(sdk_script), str(tmp / "ping_tools.json")]
        try:
            results.update(anyio.run(_both, serve_cmd, sdk_cmd, tmp, ping_round))
        finally:
            direct.close()

        focus = tmp / "focus"
        init_project(focus, template="pomodoro")

        async def pending_round(s: Any) -> dict[str, Any]:
            await s.call_tool("bench-ping", {})  # starts the ping app
            samples: dict[str, list[float]] = {"pending": [], "ping": []}
            for i in range(-5, args.calls // 3):
                start = time.perf_counter()
                res = await s.call_tool(
                    "pomodoro-start",
                    {"minutes": 25},
                    meta={"io.lineup/conversation_id": f"focus-{i}"},
                )
                took = time.perf_counter() - start
                assert res.structured_content["status"] == "pending", res
                ping_start = time.perf_counter()
                await s.call_tool("bench-ping", {})
                if i >= 0:
                    samples["pending"].append(took)
                    samples["ping"].append(time.perf_counter() - ping_start)
            return {
                "pending_answer_p50_ms": _p50(samples["pending"]),
                "pending_round_ping_p50_ms": _p50(samples["ping"]),
            }

        pending_cmd = [
            *LINEUP,
            "serve",
            str(ping_app),
            str(focus),
            "--max-wait",
            "0",
            "--db",
            str(tmp / "pending.db"),
        ]
        results.update(anyio.run(_over_stdio, pending_cmd, tmp, pending_round))

        big_cmd = [*LINEUP, "serve", str(big_app), "--db", str(tmp / "big.db")]
        results.update(anyio.run(_over_stdio, big_cmd, tmp, lister("serve_list_1000_p50_ms", 1001)))
        # the SDK baseline lists the very same 1,000 tool entries
        entries = _entries(big_app, tmp / "big-inv.db")
        (tmp / "big_tools.json").write_text(json.dumps(entries))
        sdk_big = [PY, str(sdk_script), str(tmp / "big_tools.json")]
        results.update(anyio.run(_over_stdio, sdk_big, tmp, lister("sdk_list_1000_p50_ms", 1001)))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    budget = results["runtime_call_p50_ms"] + results["sdk_ping_p50_ms"]
    results["ping_budget_ms"] = budget
    results["ping_within_budget"] = results["serve_ping_tool_p50_ms"] <= budget
    results["list_no_slower"] = results["serve_list_1000_p50_ms"] <= results["sdk_list_1000_p50_ms"]
    if args.json:
        print(json.dumps(results, indent=2, sort_keys=True))
        return 0
    rows = [
        ("ping tool through lineup serve (stdio)", results["serve_ping_tool_p50_ms"]),
        ("the same call through Runtime.call", results["runtime_call_p50_ms"]),
        ("SDK low-level stdio server: MCP ping", results["sdk_ping_p50_ms"]),
        ("SDK low-level stdio server: ping tool", results["sdk_ping_tool_p50_ms"]),
        ("budget: Runtime.call + SDK ping", budget),
        ("tools/list, 1,000 tools, lineup serve", results["serve_list_1000_p50_ms"]),
        ("tools/list, 1,000 tools, SDK low-level", results["sdk_list_1000_p50_ms"]),
        ("long-running call to `pending`, --max-wait 0", results["pending_answer_p50_ms"]),
        ("  the ping tool, same server, interleaved", results["pending_round_ping_p50_ms"]),
    ]
    for label, ms in rows:
        print(f"{label:<44} p50 {ms:8.3f} ms")
    print(f"ping within budget: {results['ping_within_budget']}")
    print(f"tools/list no slower: {results['list_no_slower']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
