"""The wheel ships the templates and the manifest schema inside the package namespace.

The checkout is never read at run time here: the wheel is built, unpacked into a
temporary folder and imported from there, from a working directory outside the checkout
(`python -m pytest` would otherwise put the checkout first on `sys.path`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

CHECKOUT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(toolchain_wheels: Path) -> Path:
    """The wheel built from this checkout (tests/conftest.py: offline, hatchling from here)."""
    (path,) = toolchain_wheels.glob("*.whl")
    return path


def _template_files() -> set[str]:
    root = CHECKOUT / "templates"
    return {
        p.relative_to(root).as_posix()
        for p in root.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    }


def test_wheel_contents(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())

    shipped = {
        n.removeprefix("lineup_build/_templates/")
        for n in names
        if n.startswith("lineup_build/_templates/")
    }
    assert shipped == _template_files()
    assert "lineup_build/_templates/todo/__package__/tools.py.jinja" in names
    assert "lineup_build/_templates/todo/.github/workflows/lineup.yml.jinja" in names
    assert "lineup_build/manifest.schema.json" in names
    for asset in ("sdk.js", "host.html", "host.js", "host.css"):  # SPEC 14: in the wheel
        assert f"lineup_runtime_lite/web/{asset}" in names
    for package in ("lineup_sdk", "lineup_build", "lineup_runtime_lite"):
        assert f"{package}/__init__.py" in names
        assert f"{package}/py.typed" in names
    tops = {n.split("/", 1)[0] for n in names}
    assert "templates" not in tops and "tests" not in tops and "benchmarks" not in tops
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    dist_info = next(t for t in tops if t.endswith(".dist-info"))
    entry_points = zipfile.ZipFile(wheel).read(f"{dist_info}/entry_points.txt").decode()
    assert "lineup = lineup_build.cli:main" in entry_points


def test_unpacked_wheel_finds_its_own_templates_and_schema(wheel: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(site)
    work = tmp_path / "work"
    work.mkdir()
    script = """
import json, sys
import lineup_build, lineup_sdk
from lineup_build.init import init_project, templates_root
from lineup_build.manifest import manifest_schema
result = init_project(__import__("pathlib").Path("demo"), template="todo")
print(json.dumps({
    "build": lineup_build.__file__,
    "sdk": lineup_sdk.__file__,
    "templates": str(templates_root()),
    "schema_title": manifest_schema()["title"],
    "files": result.files,
}))
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "LINEUP_"))}
    env["PYTHONPATH"] = str(site)
    proc = subprocess.run(
        [sys.executable, "-P", "-c", script],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    for key in ("build", "sdk", "templates"):
        assert Path(doc[key]).is_relative_to(site), doc
    assert Path(doc["templates"]) == site / "lineup_build" / "_templates"
    assert doc["schema_title"] == "LineUp manifest v1"
    assert "demo_app/tools.py" in doc["files"] and "lineup.toml" in doc["files"]
    assert (work / "demo/.github/workflows/lineup.yml").exists()
