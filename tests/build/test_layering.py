"""Package hygiene: sorted public `__all__`, one-way imports, and a fast `lineup --version`.

Four layers, each importing only the layers below it (eagerly or lazily, `TYPE_CHECKING`
included): `lineup_sdk` < `lineup_build` < `lineup_runtime_lite` < `lineup_build.cli`. Data
flows author code → SDK → build → runtime, and the CLI sits on top as the composition root:
it is the only part of `lineup_build` that imports the runtime, and nothing imports it.
(The CLI imports the runtime inside its commands, so `lineup --version` and `lineup verify`
never load it: a speed rule, tested below with the fast paths.)
"""

from __future__ import annotations

import ast
import importlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RANK = {"lineup_sdk": 0, "lineup_build": 1, "lineup_runtime_lite": 2}
#: The layers, bottom to top; a module belongs to the longest one its name starts with.
LAYERS = {**RANK, "lineup_build.cli": 3}


def _layer(module: str) -> int | None:
    names = [n for n in LAYERS if module == n or module.startswith(n + ".")]
    return LAYERS[max(names, key=len)] if names else None


@pytest.mark.parametrize("package", list(RANK))
def test_public_api_is_sorted_and_resolves(package: str) -> None:
    module = importlib.import_module(package)
    names = module.__all__
    assert isinstance(names, list) and names
    assert names == sorted(names), f"{package}.__all__ is not sorted"
    assert len(set(names)) == len(names)
    for name in names:
        assert getattr(module, name) is not None, f"{package}.{name}"
    assert module.__doc__ and module.__doc__.strip()


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> Iterator[tuple[str, int, bool]]:
    """`(imported module, line, lazy)` for every import in a package file."""
    package = _module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    yield from _imports_in(path.read_text(), package)


def _imports_in(source: str, package: list[str]) -> Iterator[tuple[str, int, bool]]:
    """`(imported module, line, lazy)` for every import in `source`.

    Lazy means inside a function body or an `if TYPE_CHECKING:` block. String arguments of
    `importlib.import_module(...)` count as imports too; relative imports are resolved
    against `package`.
    """
    tree = ast.parse(source)

    def visit(node: ast.AST, lazy: bool) -> Iterator[tuple[str, int, bool]]:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            lazy = True
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                yield from visit(child, True)
            for child in node.orelse:
                yield from visit(child, lazy)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno, lazy
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            yield target, node.lineno, lazy
        elif (
            isinstance(node, ast.Call)
            and ast.unparse(node.func) in ("importlib.import_module", "import_module", "__import__")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            yield node.args[0].value, node.lineno, lazy
        for sub in ast.iter_child_nodes(node):
            yield from visit(sub, lazy)

    yield from visit(tree, False)


def _violations() -> list[str]:
    out = []
    for package in RANK:
        for path in sorted((ROOT / package).rglob("*.py")):
            rank = _layer(_module_name(path))
            assert rank is not None
            for target, line, lazy in _imports(path):
                above = _layer(target)
                if above is None or above <= rank:
                    continue
                kind = "lazy " if lazy else ""
                out.append(f"{path.relative_to(ROOT)}:{line}: {kind}import of {target}")
    return out


def test_the_layers_are_the_ones_described() -> None:
    assert _layer("lineup_build.cli") == _layer("lineup_build.cli.run") == 3
    assert _layer("lineup_build.verify") == 1
    assert _layer("lineup_build.client") == 1  # a prefix of the name is not the layer
    assert _layer("lineup_runtime_lite.serve._apps") == 2
    assert _layer("json") is None


def test_the_cli_imports_the_runtime_only_inside_commands() -> None:
    eager = [
        f"{path.relative_to(ROOT)}:{line}: {target}"
        for path in sorted((ROOT / "lineup_build" / "cli").rglob("*.py"))
        for target, line, lazy in _imports(path)
        if _layer(target) == RANK["lineup_runtime_lite"] and not lazy
    ]
    assert eager == []


def test_imports_flow_one_way() -> None:
    assert _violations() == []


def test_no_package_imports_another_packages_private_modules() -> None:
    """`_`-prefixed modules are private to their package (`lineup_sdk.codes`, not
    `lineup_sdk._codes`; `lineup_sdk.__version__`, not `lineup_sdk._version`)."""
    found = []
    for package in RANK:
        for path in sorted((ROOT / package).rglob("*.py")):
            for target, line, _ in _imports(path):
                parts = target.split(".")
                private = any(p.startswith("_") and p != "__init__" for p in parts[1:])
                if parts[0] in RANK and parts[0] != package and private:
                    found.append(f"{path.relative_to(ROOT)}:{line}: {target}")
    assert found == []


#: What `lineup_build` (the CLI) may import from the runtime: its public faces, each a module
#: or a package `__init__` with a sorted `__all__` (STYLE 6, 24, 25). Anything deeper
#: (`lineup_runtime_lite.store.postgres`, `.sim.simulation`, `.api.clock`) is the runtime's
#: own business: a move inside it must not break the CLI.
RUNTIME_FACES = (
    "lineup_runtime_lite",
    "lineup_runtime_lite.databases",
    "lineup_runtime_lite.scenario",
    "lineup_runtime_lite.serve",
    "lineup_runtime_lite.sim",
    "lineup_runtime_lite.suite",
    "lineup_runtime_lite.testing",
    "lineup_runtime_lite.web",
)


def _runtime_imports(source: str) -> Iterator[tuple[str, int]]:
    """`(runtime module, line)` for every runtime module `source` imports, anywhere; `from
    lineup_runtime_lite import web` imports the module `lineup_runtime_lite.web`."""
    runtime = ROOT / "lineup_runtime_lite"
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names = []
            for alias in node.names:
                inner = f"{node.module}.{alias.name}"
                path = ROOT.joinpath(*inner.split("."))
                is_module = path.is_dir() or path.with_suffix(".py").is_file()
                names.append(inner if is_module else node.module)
        else:
            continue
        for name in dict.fromkeys(names):
            if name == runtime.name or name.startswith(runtime.name + "."):
                yield name, node.lineno


def _past_the_faces(paths: list[Path]) -> list[str]:
    return [
        f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name}:{line}: {target}"
        for path in paths
        for target, line in _runtime_imports(path.read_text())
        if target not in RUNTIME_FACES
    ]


def test_the_cli_imports_only_the_runtimes_public_faces() -> None:
    paths = sorted((ROOT / "lineup_build").rglob("*.py"))
    assert _past_the_faces(paths) == []
    used = {t for path in paths for t, _ in _runtime_imports(path.read_text())}
    # no stale entry (`testing` is public for users' tests; the CLI has no use for it)
    assert used == set(RUNTIME_FACES) - {"lineup_runtime_lite.testing"}


def _runtimes_built(source: str) -> list[int]:
    """Lines where `source` builds a runtime other than through `open` (`Runtime(...)`)."""
    return [
        node.lineno
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("Runtime", "AsyncRuntime", "Engine")
    ]


def test_the_cli_builds_runtimes_only_through_open() -> None:
    """`Runtime.open` / `AsyncRuntime.open` check and assemble the options (STYLE 25)."""
    built = {
        str(path.relative_to(ROOT)): lines
        for path in sorted((ROOT / "lineup_build").rglob("*.py"))
        if (lines := _runtimes_built(path.read_text()))
    }
    assert built == {}
    assert _runtimes_built("rt = Runtime.open(db)\nother = AsyncRuntime(db)\n") == [2]


@pytest.mark.parametrize("face", RUNTIME_FACES)
def test_each_runtime_face_is_deliberate(face: str) -> None:
    module = importlib.import_module(face)
    names = module.__all__
    # plainly sorted, or as ruff's RUF022 sorts: CONSTANTS, then Classes, then functions
    kinds = sorted(names, key=lambda n: (0 if n.isupper() else 1 if n[0].isupper() else 2, n))
    assert names in (sorted(names), kinds), f"{face}.__all__ is not sorted"
    assert [n for n in names if n.startswith("_")] == []
    for name in names:
        assert getattr(module, name) is not None, f"{face}.{name}"
    assert module.__doc__ and module.__doc__.strip()


def test_the_face_check_sees_an_inner_import(tmp_path: Path) -> None:
    (tmp_path / "cli.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "from lineup_runtime_lite import Runtime, web, store\n"
        "if TYPE_CHECKING:\n    from lineup_runtime_lite.sim.simulation import Simulation\n"
        "def f():\n    import lineup_runtime_lite.api.clock\n"
        "    from lineup_runtime_lite.sim import Simulation\n"
    )
    found = sorted(line.rpartition(": ")[2] for line in _past_the_faces([tmp_path / "cli.py"]))
    assert found == [
        "lineup_runtime_lite.api.clock",
        "lineup_runtime_lite.sim.simulation",
        "lineup_runtime_lite.store",
    ]


def test_the_layering_check_sees_violations() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "import lineup_build.build\n"
        "from .. import _app\n"
        "if TYPE_CHECKING:\n    from lineup_runtime_lite import Runtime\n"
        "def f():\n    import importlib\n    importlib.import_module('lineup_runtime_lite.store')\n"
    )
    found = {(t, lazy) for t, _, lazy in _imports_in(source, ["lineup_build", "cli", "sub"])}
    assert found == {
        ("typing", False),
        ("lineup_build.build", False),
        ("lineup_build.cli", False),
        ("lineup_runtime_lite", True),
        ("importlib", True),
        ("lineup_runtime_lite.store", True),
    }


# --- the CLI's fast paths -------------------------------------------------------------------


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("LINEUP_")}


def test_version_fast_path_imports_no_heavy_module() -> None:
    script = (
        "import json, sys\n"
        "from lineup_build.cli import main\n"
        "try:\n    main(['--version'])\nexcept SystemExit as exc:\n    code = exc.code\n"
        "print(json.dumps({'code': code, 'modules': sorted(sys.modules)}))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        check=True,
    )
    version_line, doc_line = proc.stdout.splitlines()
    from lineup_sdk import __version__

    assert version_line == f"lineup {__version__}"
    doc = json.loads(doc_line)
    assert doc["code"] == 0
    slow = {"typer", "click", "rich", "jinja2", "cryptography", "jsonschema", "pydantic"}
    assert sorted(m for m in doc["modules"] if m.split(".")[0] in slow) == []
    assert "lineup_build.build" not in doc["modules"]


def _script() -> str:
    script = Path(sys.executable).with_name("lineup")
    assert script.exists()
    return str(script)


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_console_script_version(flag: str, tmp_path: Path) -> None:
    from lineup_sdk import __version__

    proc = subprocess.run(
        [_script(), flag], cwd=tmp_path, env=_env(), capture_output=True, text=True, check=False
    )
    assert (proc.returncode, proc.stdout) == (0, f"lineup {__version__}\n")


def test_console_script_help_lists_the_commands(tmp_path: Path) -> None:
    proc = subprocess.run(
        [_script(), "--help"], cwd=tmp_path, env=_env(), capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0
    for command in ("init", "check", "build", "keygen"):
        assert command in proc.stdout


def test_usage_error_exits_2(tmp_path: Path) -> None:
    proc = subprocess.run(
        [_script(), "build", "--no-such-option"],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
