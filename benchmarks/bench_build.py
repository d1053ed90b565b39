"""Benchmark `lineup check` / `lineup build` against the MCP Python SDK, as fresh processes.

Generates MiniApps of 100 / 1,000 / 5,000 tools (half keyword parameters with `Field`
constraints, half one pydantic model parameter), then times, each as the median of
several fresh processes:

* `lineup check APP` and `lineup build APP --key KEY` (the whole CLI process, including
  its import subprocess);
* the MCP Python SDK registering the same functions with `@server.tool()` and listing
  them (`await server.list_tools()`), side by side in the same run;
* `import lineup_sdk` vs `import pydantic`;
* `lineup --version` and `lineup --help`.

Run it with the interpreter that has the toolchain (and the `bench` extra) installed:

    python benchmarks/bench_build.py [--sizes 100,1000,5000] [--runs 5] [--json] [--smoke]

It is not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

PY = sys.executable
LINEUP = str(Path(PY).with_name("lineup"))
CHUNK = 250  # tools per generated module

_MODELS_HEADER = '''"""Generated pydantic models shared by the LineUp and MCP variants."""

from __future__ import annotations

from enum import Enum

from pydantic import BaseModel, Field


class Priority(str, Enum):
    low = "low"
    normal = "normal"
    high = "high"


class Owner(BaseModel):
    """Who owns the record."""

    name: str = Field(min_length=1, max_length=80, description="Display name.")
    email: str | None = Field(default=None, description="Contact address.")


class Saved(BaseModel):
    """What a write tool returns."""

    id: str = Field(description="Stable id of the record.")
    revision: int = Field(ge=0, description="Revision after the write.")
'''

_MODEL_TEMPLATE = '''

class Params{i}(BaseModel):
    """Input of tool {i}."""

    title: str = Field(min_length=1, max_length=200, description="Title of record {i}.")
    count: int = Field(default=1, ge=1, le=100, description="How many copies.")
    priority: Priority = Field(default=Priority.normal, description="How urgent it is.")
    owner: Owner | None = Field(default=None, description="Who owns it.")
    tags: list[str] = Field(default_factory=list, max_length=10, description="Labels.")
'''

_KW_TOOL = '''

@{decorator}
async def kw_tool_{i}(
    {ctx},
    title: Annotated[str, Field(min_length=1, max_length=200)],
    count: int = Field(default=1, ge=1, le=100, description="How many copies."),
    priority: Priority = Priority.normal,
    note: str | None = None,
) -> Saved:
    """Save record {i} from keyword arguments.

    Args:
        title: Title of the record.
        priority: How urgent it is.
        note: Free text kept with the record.
    """
    return Saved(id="{i}", revision=count)
'''

_MODEL_TOOL = '''

@{decorator}
def model_tool_{i}({ctx}, params: Params{i}) -> int:
    """Count the copies of record {i}."""
    return params.count
'''


def _tools_module(start: int, stop: int, *, mcp: bool) -> str:
    if mcp:
        head = (
            '"""Generated MCP tools."""\n\nfrom __future__ import annotations\n\n'
            "from typing import Annotated\n\nfrom pydantic import Field\n\n"
            "from bench_models import *  # noqa: F403\n"
            "from mcp_server import Context, server\n"
        )
        ctx, deco = "ctx: Context", "server.tool()"
    else:
        head = (
            '"""Generated LineUp tools."""\n\nfrom __future__ import annotations\n\n'
            "from typing import Annotated\n\nfrom pydantic import Field\n\n"
            "from bench_app.registry import tools\n"
            "from bench_models import *  # noqa: F403\n"
            "from lineup_sdk import ToolContext\n"
        )
        ctx = "ctx: ToolContext"
    parts = [head]
    for i in range(start, stop):
        decorator = deco if mcp else f'tools.tool("bench.t{i}", activation="app_ready")'
        template = _KW_TOOL if i % 2 == 0 else _MODEL_TOOL
        parts.append(template.format(i=i, ctx=ctx, decorator=decorator))
    return "".join(parts)


def generate(root: Path, n: int) -> Path:
    """Write a LineUp MiniApp with `n` tools plus the MCP twin; returns the app folder."""
    app = root / f"app{n}"
    pkg = app / "bench_app"
    pkg.mkdir(parents=True)
    models = [_MODELS_HEADER] + [_MODEL_TEMPLATE.format(i=i) for i in range(1, n, 2)]
    (app / "bench_models.py").write_text("".join(models))
    (app / "lineup.toml").write_text(
        "[app]\n"
        'scope = "bench"\n'
        f'name = "Bench {n}"\n'
        'version = "1.0.0"\n'
        'entry = "bench_app.tools"\n'
        'include = ["bench_app/**/*.py", "bench_models.py"]\n'
        # a manifest takes about 1.25 KiB a tool: 5,000 tools are over the 4 MiB default
        f"\n[limits]\nmax_manifest_bytes = {max(4 << 20, n * 2048)}\n"
    )
    (pkg / "__init__.py").write_text('"""Generated benchmark MiniApp."""\n')
    (pkg / "registry.py").write_text(
        "from lineup_sdk import define_agent_tools\n\ntools = define_agent_tools(app_scope='bench')\n"
    )
    chunks = [(s, min(s + CHUNK, n)) for s in range(0, n, CHUNK)]
    names = []
    for k, (start, stop) in enumerate(chunks):
        (pkg / f"tools_{k}.py").write_text(_tools_module(start, stop, mcp=False))
        names.append(f"tools_{k}")
    (pkg / "tools.py").write_text(
        '"""Entry: every generated tool module."""\n\n'
        + "".join(f"from bench_app import {m}  # noqa: F401\n" for m in names)
        + "from bench_app.registry import tools\n\n__all__ = ['tools']\n"
    )
    # The MCP twin: the same models and function bodies, registered on an MCP server.
    mcp_dir = app / "mcp_twin"
    mcp_dir.mkdir()
    shutil.copy(app / "bench_models.py", mcp_dir / "bench_models.py")
    (mcp_dir / "mcp_server.py").write_text(
        "try:\n"
        "    from mcp.server.mcpserver import Context, MCPServer as _Server\n"
        "except ImportError:  # mcp 1.x\n"
        "    from mcp.server.fastmcp import Context, FastMCP as _Server\n\n"
        "server = _Server('bench')\n"
    )
    for k, (start, stop) in enumerate(chunks):
        (mcp_dir / f"mcp_tools_{k}.py").write_text(_tools_module(start, stop, mcp=True))
    (mcp_dir / "run_mcp.py").write_text(
        "import asyncio\n\n"
        + "".join(f"import mcp_tools_{k}  # noqa: F401\n" for k in range(len(chunks)))
        + "from mcp_server import server\n\n"
        "tools = asyncio.run(server.list_tools())\n"
        f"assert len(tools) == {n}, len(tools)\n"
        "assert all(t.input_schema for t in tools)\n"
    )
    return app


def _time(cmd: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None) -> float:
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(
            f"command failed ({proc.returncode}): {' '.join(cmd)}\n"
            f"{proc.stdout.decode()[-2000:]}\n{proc.stderr.decode()[-2000:]}"
        )
    return elapsed


def median_of(runs: int, fn: Callable[[], float]) -> float:
    """Median wall time of `runs` calls of `fn` (each a fresh process)."""
    return statistics.median(fn() for _ in range(runs))


def _interleaved(runs: int, fns: dict[str, Callable[[], float]]) -> dict[str, float]:
    """Medians of several commands, run alternately so cache drift hits them equally."""
    samples: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(runs):
        for k, fn in fns.items():
            samples[k].append(fn())
    return {k: statistics.median(v) for k, v in samples.items()}


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the figures."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100,1000,5000")
    ap.add_argument("--runs", type=int, default=5, help="fresh processes per figure")
    ap.add_argument("--json", action="store_true", help="print one JSON document")
    ap.add_argument("--keep", action="store_true", help="keep the generated apps")
    ap.add_argument("--smoke", action="store_true", help="a tiny size, one run (CI)")
    args = ap.parse_args(argv)
    if args.smoke:
        args.sizes, args.runs = "10", 1
    sizes = [int(s) for s in args.sizes.split(",") if s]
    results: dict[str, Any] = {"python": sys.version.split()[0], "runs": args.runs}
    env = {k: v for k, v in os.environ.items() if not k.startswith("LINEUP_")}
    env["SOURCE_DATE_EPOCH"] = "1700000000"
    try:
        import mcp  # noqa: F401

        have_mcp = True
    except ImportError:
        have_mcp = False
    tmp = Path(tempfile.mkdtemp(prefix="lineup-bench-"))
    try:
        key_dir = tmp / "key"
        subprocess.run(
            [LINEUP, "keygen", "--out", str(key_dir), "--json"],
            env=env,
            check=True,
            capture_output=True,
        )
        key = key_dir / "lineup-signing.pem"
        runs = args.runs
        imports = _interleaved(
            runs if args.smoke else max(runs, 11),
            {
                "import_pydantic_s": lambda: _time([PY, "-c", "import pydantic"], env=env),
                "import_lineup_sdk_s": lambda: _time([PY, "-c", "import lineup_sdk"], env=env),
            },
        )
        results.update(imports)
        few = runs if args.smoke else max(runs, 11)
        results["version_s"] = median_of(few, lambda: _time([LINEUP, "--version"], env=env))
        results["help_s"] = median_of(few, lambda: _time([LINEUP, "--help"], env=env))
        for n in sizes:
            app = generate(tmp, n)
            out = tmp / f"dist{n}"
            size_runs = runs if n <= 1000 or args.smoke else max(3, runs // 2)
            fns: dict[str, Callable[[], float]] = {
                "check_s": lambda app=app: _time([LINEUP, "check", str(app)], env=env),
                "build_s": lambda app=app, out=out: _time(
                    [LINEUP, "build", str(app), "--key", str(key), "--out", str(out)], env=env
                ),
            }
            if have_mcp:
                fns["mcp_s"] = lambda app=app: _time(
                    [PY, "run_mcp.py"], cwd=app / "mcp_twin", env=env
                )
            results[f"tools_{n}"] = _interleaved(size_runs, fns)
    finally:
        if args.keep:
            print(f"kept {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        print(json.dumps(results, indent=2, sort_keys=True))
        return 0
    print(f"python {results['python']}, median of fresh processes")
    print(f"import pydantic      {results['import_pydantic_s'] * 1000:7.1f} ms")
    print(
        f"import lineup_sdk    {results['import_lineup_sdk_s'] * 1000:7.1f} ms "
        f"(+{(results['import_lineup_sdk_s'] - results['import_pydantic_s']) * 1000:.1f} ms)"
    )
    print(f"lineup --version     {results['version_s'] * 1000:7.1f} ms")
    print(f"lineup --help        {results['help_s'] * 1000:7.1f} ms")
    print(f"{'tools':>6} {'check':>9} {'build':>9} {'mcp list':>9}")
    for n in sizes:
        r = results[f"tools_{n}"]
        mcp_txt = f"{r['mcp_s']:8.2f}s" if "mcp_s" in r else "      n/a"
        print(f"{n:>6} {r['check_s']:8.2f}s {r['build_s']:8.2f}s {mcp_txt}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
