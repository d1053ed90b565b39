"""`import lineup_sdk` stays light: what a MiniApp's worker imports must not drag in the
build toolchain's heavy dependencies."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

HEAVY = ("jsonschema", "typer", "click", "rich", "jinja2", "cryptography")
ROOT = Path(__file__).resolve().parents[2]


def _modules_after(statement: str) -> set[str]:
    """`sys.modules` of a fresh interpreter after running `statement`."""
    script = f"{statement}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LINEUP_")}
    proc = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return set(json.loads(proc.stdout.splitlines()[-1]))


def test_import_lineup_sdk_loads_no_heavy_dependency() -> None:
    loaded = _modules_after("import lineup_sdk")
    assert "lineup_sdk" in loaded
    heavy = sorted(m for m in loaded if m.split(".")[0] in HEAVY)
    assert heavy == []
    assert not any(m.startswith(("lineup_build", "lineup_runtime_lite")) for m in loaded)


def test_lineup_sdk_public_names_load_no_heavy_dependency() -> None:
    loaded = _modules_after(
        "from lineup_sdk import *\nfrom lineup_sdk import ToolContext, define_agent_tools\n"
        "tools = define_agent_tools(app_scope='demo')\n"
        "@tools.tool('demo.add', activation='app_ready')\n"
        "def add(ctx: ToolContext, x: int) -> int:\n    return x\n"
    )
    assert sorted(m for m in loaded if m.split(".")[0] in HEAVY) == []
