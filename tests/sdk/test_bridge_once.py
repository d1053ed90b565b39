"""The worker bridge's constants are defined once, in `lineup_sdk.bridge`, and both sides
of the bridge (the runtime's worker driver and the in-bundle worker) import them."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("lineup_sdk", "lineup_build", "lineup_runtime_lite")


def _assigned(path: Path) -> set[str]:
    out = set()
    for node in ast.parse(path.read_text()).body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AnnAssign):
            targets = [node.target]
        out |= {t.id for t in targets if isinstance(t, ast.Name)}
    return out


def test_max_message_is_defined_only_in_the_bridge_module() -> None:
    places = [
        str(path.relative_to(ROOT))
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        if "MAX_MESSAGE" in _assigned(path)
    ]
    assert places == ["lineup_sdk/bridge.py"]


@pytest.mark.parametrize(
    "side", ["lineup_sdk/_worker.py", "lineup_runtime_lite/processes/worker.py"]
)
def test_both_sides_take_the_limit_from_the_bridge(side: str) -> None:
    tree = ast.parse((ROOT / side).read_text())
    imported = {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "lineup_sdk.bridge"
        for alias in node.names
    }
    assert "MAX_MESSAGE" in imported
