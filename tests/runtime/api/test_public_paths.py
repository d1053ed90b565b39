"""The import paths users and generated projects use stay importable, whatever moves inside
the runtime package (issue 24): the README's and the templates' imports, the pytest plugin,
the authors' browser fixture and the stable error codes. A move that drops one fails here."""

from __future__ import annotations

import importlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from lineup_sdk.codes import CODES

ROOT = Path(__file__).parents[3]

#: `module: names` every user-facing document or generated project imports.
PUBLIC = {
    "lineup_runtime_lite": (
        *("AsyncMarks", "AsyncOutbox", "AsyncRuntime", "AsyncSurface", "Clock"),
        *("HostSimulator", "Marks", "Outbox", "RealClock", "Runtime", "Surface"),
        "VirtualClock",
        # `Runtime.open(isolation=...)`'s modes and their check (`lineup --isolation`)
        *("DEFAULT_ISOLATION", "ISOLATIONS", "check_isolation"),
    ),
    "lineup_runtime_lite.databases": ("is_postgres_url", "redact_url"),
    "lineup_runtime_lite.sim": ("Simulation", "StepReport"),
    "lineup_runtime_lite.testing": ("AppUnderTest", "open_app"),
    "lineup_runtime_lite.pytest_plugin": ("lineup_dev",),
    "lineup_runtime_lite.scenario": ("load_scenario",),
    "lineup_runtime_lite.suite": ("play_suite",),
}


@pytest.mark.parametrize("module", sorted(PUBLIC))
def test_each_public_path_imports_and_names_what_users_import(module: str) -> None:
    imported = importlib.import_module(module)
    missing = [name for name in PUBLIC[module] if not hasattr(imported, name)]
    assert missing == [], (module, missing)


def test_the_package_exports_exactly_its_public_names() -> None:
    import lineup_runtime_lite

    assert sorted(lineup_runtime_lite.__all__) == sorted(PUBLIC["lineup_runtime_lite"])


def test_a_fresh_import_lists_every_public_name_before_loading_it() -> None:
    """The package's `__init__` loads its names on first use (PEP 562): `dir()` and
    `__all__` list them at once, `from lineup_runtime_lite import *` gets each, and an
    unknown name is an AttributeError."""
    script = (
        "import json, lineup_runtime_lite as rt\n"
        "listed = {'all': rt.__all__, 'dir': dir(rt)}\n"
        "scope = {}\n"
        "exec('from lineup_runtime_lite import *', scope)\n"
        "try:\n    rt.nope\nexcept AttributeError as exc:\n    listed['error'] = str(exc)\n"
        "listed['star'] = sorted(n for n in scope if not n.startswith('__'))\n"
        "print(json.dumps(listed))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True
    )
    listed = json.loads(proc.stdout)
    names = sorted(PUBLIC["lineup_runtime_lite"])
    assert sorted(listed["all"]) == names
    assert set(names) <= set(listed["dir"])
    assert listed["star"] == names
    assert listed["error"] == "module 'lineup_runtime_lite' has no attribute 'nope'"


def test_every_runtime_import_in_the_readme_and_templates_is_listed_here() -> None:
    """What the README, the docs and the templates import from the runtime is in `PUBLIC`
    (so this test guards it)."""
    pattern = re.compile(r"from (lineup_runtime_lite[a-z_.]*) import ([A-Za-z_, ]+)")
    texts = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    texts += sorted((ROOT / "templates").rglob("*.jinja"))
    texts += sorted((ROOT / "templates").rglob("*.py"))
    found: dict[str, set[str]] = {}
    for path in texts:
        for module, names in pattern.findall(path.read_text("utf-8")):
            found.setdefault(module, set()).update(n.strip() for n in names.split(","))
    plugins = [
        m
        for path in (ROOT / "templates").rglob("conftest.py")
        for m in re.findall(r'"(lineup_runtime_lite[a-z_.]*)"', path.read_text("utf-8"))
    ]
    assert plugins and set(plugins) <= set(PUBLIC), plugins
    unlisted = {m: sorted(n - set(PUBLIC.get(m, ()))) for m, n in found.items()}
    assert {m: n for m, n in unlisted.items() if n} == {}, unlisted


def test_the_stable_error_codes_stay_importable_from_their_public_module() -> None:
    # `lineup_sdk.codes.CODES`, the error reference's source: a few of every round's codes
    for code in ("usage_invalid", "call_pending", "schema_too_complex"):
        assert code in CODES, code
    assert "session_data_write_not_allowed" in CODES
