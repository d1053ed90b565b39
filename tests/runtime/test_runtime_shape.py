"""The runtime's shape (issues 12, 23, 24), checked on its source: facts, pure transitions,
drivers, and folders that show the layers.

- every SQL statement lives in `lineup_runtime_lite/store/` (the facts) or
  `lineup_runtime_lite/coordination/` (the nodes' own tables);
- the pure core (`core/`: rows, decisions, the port, transitions, handlers) reaches nothing
  that does IO, reads a clock or draws randomness, through its whole static import closure;
- each package sits on a floor (`FLOORS`) and imports only its own floor's package and the
  floors below it;
- there is no import circle anywhere in `lineup_runtime_lite`;
- no two runtime modules share a file name, and no two runtime classes share a name;
- the facts (`store/facts.py` and the modules it is split into) name no engine and no node:
  what differs is asked of the connection (`SqlConnection`) and the coordination;
- no module of `store/` or `coordination/` is over 700 lines;
- no `__all__` in the runtime names a `_` name (private means `_`: never exported);
- importing the pure core (`lineup_runtime_lite.core`) loads neither `sqlite3` nor the rest
  of the runtime: the package's `__init__` loads its public names on first use (PEP 562).

Imports are read with `ast` wherever they are: at module level, under TYPE_CHECKING, and
inside functions and classes (a lazy import runs as surely as an eager one, only later).
"""

from __future__ import annotations

import ast
import functools
import json
import re
import subprocess
import sys
from pathlib import Path

import lineup_runtime_lite

PACKAGE = Path(lineup_runtime_lite.__file__).parent
ROOT = PACKAGE.parent
FIRST_PARTY = ("lineup_runtime_lite", "lineup_sdk", "lineup_build")
SQL = re.compile(
    r"^\s*(SELECT|INSERT|UPDATE|DELETE|CREATE|ALTER|DROP|PRAGMA|BEGIN|COMMIT|ROLLBACK|"
    r"SAVEPOINT|RELEASE)\b"
)
#: The pure core: every module of this package, and whatever they import. Their whole static
#: import closure must reach no IO (no list of modules they may import: whatever they reach
#: is followed and judged by what it imports).
CORE = "lineup_runtime_lite.core"
#: The runtime's floors, bottom to top: a module imports only modules of its own package, or
#: of a package on a lower floor. `""` is the root facade (`lineup_runtime_lite`, which
#: re-exports the API and the Host simulator); the top floors are the stable public modules.
FLOORS: tuple[tuple[str, ...], ...] = (
    ("core",),  # rows, decisions, the Facts port, pure transitions, handlers, messages
    ("coordination",),  # one node or several: Solo, Nodes (leases, owners, wake-ups)
    ("store",),  # the only SQL: SqlFacts, the database, migrations; fault points
    ("validation", "processes"),  # schema checks (a validator process), worker subprocesses
    ("drivers",),  # the transactional shell: read facts, decide, commit, act
    ("host",),  # the Host simulator, the Surface client rules
    ("api",),  # the engine, AsyncRuntime, Runtime, clocks
    ("",),  # the root facade: `from lineup_runtime_lite import Runtime`
    ("sim",),  # scenarios, the replay driver, the suite runner
    ("serve",),  # MCP over stdio and HTTP
    ("web",),  # `lineup dev`: the web dev Host
    ("databases", "scenario", "suite", "testing"),  # the stable public modules
    ("pytest_plugin",),  # `lineup_app` over `testing`, `lineup_dev` over `web`
    ("internals",),  # the runtime's own tests' one door inside (no stability promise)
)

#: Standard-library modules that do IO, read a clock, draw randomness or run concurrently.
#: A module importing one is not pure; nor is one importing a package outside the standard
#: library and ours (its closure cannot be followed from here).
IO = frozenset(
    {
        "_thread",
        "asyncio",
        "concurrent",
        "fcntl",
        "glob",
        "http",
        "io",
        "mmap",
        "multiprocessing",
        "os",
        "pathlib",
        "random",
        "secrets",
        "select",
        "selectors",
        "shutil",
        "signal",
        "socket",
        "sqlite3",
        "ssl",
        "subprocess",
        "sys",
        "tempfile",
        "threading",
        "time",
        "urllib",
        "uuid",
    }
)
#: The facts' modules (issue 42): one set of statements for both engines and any number of
#: nodes. They name no engine (an import, a name or a string of SQLite's or PostgreSQL's:
#: `pg_notify` is one), no `node_id`, and reach nothing through `getattr` or a
#: `type: ignore`.
FACTS_MODULES = ("facts", "writes", "records", "connection", "marks")
ENGINE = re.compile(r"(?i)sqlite|postgres|psycopg|pg_|node_id")
#: The most lines a module of the folders that hold the SQL may have (issue 42).
MAX_LINES = 700
#: Builtins that do IO, and `datetime`'s clock reads: no import of theirs to follow.
BANNED_CALLS = frozenset({"__import__", "breakpoint", "input", "open", "print"})
BANNED_ATTRS = frozenset({"now", "today", "utcnow"})


def _modules(root: Path = ROOT, packages: tuple[str, ...] = FIRST_PARTY) -> dict[str, Path]:
    """Every module of `packages` under `root`, by dotted name."""
    out = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def _imports(path: Path, name: str = "") -> set[str]:
    """Every module `path` (the module `name`) imports anywhere in its source; `from a
    import b` names `a` and `a.b` (which may be a module), relative imports resolved."""
    return set(_imports_in(path.read_text(), name, path.name == "__init__.py"))


@functools.cache
def _parse(source: str) -> ast.Module:
    """`ast.parse(source)`, once per source text (the checks read each module many times)."""
    return ast.parse(source)


@functools.cache
def _imports_in(source: str, name: str, is_package: bool) -> frozenset[str]:
    """`_imports` of the module `name` whose text is `source`, once per text."""
    package = name if is_package else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(_parse(source)):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                anchor = parts[: len(parts) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names)
    return frozenset(found)


def _graph(modules: dict[str, Path], *, own_submodules: bool) -> dict[str, set[str]]:
    """Module → the modules of `modules` that importing it runs: each one it imports and
    the packages above that (`a.b.c` runs `a.b` first, unless the importer is inside it).

    A root package (`lineup_runtime_lite`) is no edge: every import runs its `__init__`,
    the public facade, whatever the importer uses. Without `own_submodules`, a package's
    `__init__` importing its own submodules is no edge (not a circle through them); the
    import closure keeps those edges (`from pkg.store import x` runs all of `pkg.store`).
    """
    key = tuple((name, path, path.read_text()) for name, path in modules.items())
    return {name: set(edges) for name, edges in _graph_of(key, own_submodules).items()}


@functools.cache
def _graph_of(
    modules: tuple[tuple[str, Path, str], ...], own_submodules: bool
) -> dict[str, frozenset[str]]:
    """`_graph` of (name, path, text) rows, once per set of module texts."""
    names = {name for name, _, _ in modules}
    graph: dict[str, frozenset[str]] = {}
    for name, path, source in modules:
        edges = set()
        for target in _imports_in(source, name, path.name == "__init__.py"):
            if target not in names:
                continue
            parts = target.split(".")
            edges.add(target)
            for n in range(2, len(parts)):
                parent = ".".join(parts[:n])
                if parent in names and not name.startswith(parent + "."):
                    edges.add(parent)
        graph[name] = frozenset(
            m
            for m in edges
            if m != name and "." in m and (own_submodules or not m.startswith(name + "."))
        )
    return graph


def _closure(root: str, modules: dict[str, Path]) -> dict[str, str | None]:
    """Every module of `modules` that importing `root` runs → the module importing it."""
    graph = _graph(modules, own_submodules=True)
    parent: dict[str, str | None] = {root: None}
    todo = [root]
    parts = root.split(".")
    for n in range(2, len(parts)):  # importing `a.b.c` runs the package `a.b` first
        parent[".".join(parts[:n])] = root
        todo.append(".".join(parts[:n]))
    while todo:
        name = todo.pop()
        for nxt in sorted(graph[name]):
            if nxt not in parent:
                parent[nxt] = name
                todo.append(nxt)
    return parent


def _io_reached(root: str, modules: dict[str, Path]) -> list[str]:
    """Every import of IO that importing `root` reaches, with the chain of importers from
    `root` (empty when its closure is pure)."""
    ours = {m.split(".")[0] for m in modules}
    parent = _closure(root, modules)
    found = []
    for name in parent:
        chain = [name]
        while (up := parent[chain[-1]]) is not None:
            chain.append(up)
        for target in sorted(_imports(modules[name], name)):
            top = target.split(".")[0]
            if top in IO or not (top in ours or top in sys.stdlib_module_names):
                found.append(" <- ".join([target, *chain]))
    return sorted(set(found))


def _io_calls(path: Path) -> list[str]:
    """Calls of IO builtins and clock reads in `path` (`open(...)`, `datetime.now()`)."""
    found = []
    for node in ast.walk(_parse(path.read_text())):
        if not isinstance(node, ast.Call):
            continue
        fn = node.func
        if isinstance(fn, ast.Name) and fn.id in BANNED_CALLS:
            found.append(f"{path.name}:{node.lineno}: {fn.id}(")
        elif isinstance(fn, ast.Attribute) and fn.attr in BANNED_ATTRS:
            found.append(f"{path.name}:{node.lineno}: .{fn.attr}(")
    return found


def _circle(graph: dict[str, set[str]]) -> list[str] | None:
    """The first import circle found in `graph`, as a path back to its start."""
    seen: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        seen[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if seen.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in seen and (found := visit(nxt)) is not None:
                return found
        stack.pop()
        seen[node] = 2
        return None

    for name in sorted(graph):
        if name not in seen and (found := visit(name)) is not None:
            return found
    return None


def _engine_names(source: str) -> list[str]:
    """What in `source` names an engine or a node (`ENGINE`: in an import, a name, an
    attribute, an argument or a string other than a docstring), reaches into the
    connection through `getattr`, or silences the type checker."""
    tree = _parse(source)
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    found = []
    for node in ast.walk(tree):
        texts: list[str] = []
        if isinstance(node, ast.Import):
            texts = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            texts = [node.module or "", *(a.name for a in node.names)]
        elif isinstance(node, ast.Name):
            texts = [node.id]
        elif isinstance(node, ast.Attribute):
            texts = [node.attr]
        elif isinstance(node, ast.arg):
            texts = [node.arg]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            texts = [] if id(node) in docstrings else [node.value]
        line = getattr(node, "lineno", 0)
        found += [f"{line}: {t[:50]!r}" for t in texts if ENGINE.search(t)]
        if (
            isinstance(node, ast.Call)
            and getattr(node.func, "id", None) == "getattr"
            and "db" in ast.unparse(node.args[0])
        ):  # a hook the connection may not have: the `SqlConnection` protocol says
            found.append(f"{node.lineno}: getattr({ast.unparse(node.args[0])}")
    lines = enumerate(source.splitlines(), 1)
    return found + [f"{n}: type: ignore" for n, line in lines if "type: ignore" in line]


def test_the_facts_name_no_engine_and_no_node() -> None:
    store = PACKAGE / "store"
    for name in FACTS_MODULES:
        assert _engine_names((store / f"{name}.py").read_text()) == [], name
    # the facts' modules are what `facts.py` imports of the store
    imported = _imports(store / "facts.py", "lineup_runtime_lite.store.facts")
    ours = {
        m.split(".")[2]
        for m in imported
        if m.startswith("lineup_runtime_lite.store.") and (store / f"{m.split('.')[2]}.py").exists()
    }
    assert ours == set(FACTS_MODULES) - {"facts"}, ours


def test_the_engine_check_sees_an_engine_a_node_and_a_reach() -> None:
    """Each of these lines alone is found (the check's own test)."""
    for line in (
        "import sqlite3",
        "from lineup_runtime_lite.store.postgres import x",
        "db.execute('SELECT pg_notify(?, ?)', args)",
        "if self.node_id is not None: pass",
        "def f(node_id): pass",
        "defer = getattr(self.db, 'defer_guard', None)",
        "x = db.locks  # type: ignore[attr-defined]",
        "def f(db: sqlite3.Connection): pass",
    ):
        assert _engine_names(f'"""A docstring may say SQLite."""\n{line}\n'), line
    assert _engine_names('"""SQLite and PostgreSQL, node_id: docstrings."""\nx = 1\n') == []


def test_no_store_or_coordination_module_is_over_700_lines() -> None:
    sizes = {
        str(path.relative_to(PACKAGE)): len(path.read_text().splitlines())
        for folder in ("store", "coordination")
        for path in sorted((PACKAGE / folder).rglob("*.py"))
    }
    assert len(sizes) >= 10  # the folders were found
    assert {path: n for path, n in sizes.items() if n > MAX_LINES} == {}


def test_no_sql_outside_the_store() -> None:
    offenders = []
    for name, path in _modules(ROOT, ("lineup_runtime_lite",)).items():
        if name.startswith(("lineup_runtime_lite.store", "lineup_runtime_lite.coordination")):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and SQL.match(node.value)
            ):
                offenders.append(f"{path.name}:{node.lineno}: {node.value[:40]!r}")
            if isinstance(node, ast.Attribute) and node.attr in ("execute", "executemany"):
                offenders.append(f"{path.name}:{node.lineno}: .{node.attr}(")
    assert offenders == []


def test_the_check_sees_sql() -> None:
    assert SQL.match("SELECT 1") and SQL.match("  UPDATE calls SET")
    assert not SQL.match("select the first") and not SQL.match("Selected")


def test_the_pure_core_reaches_no_io() -> None:
    modules = _modules()
    core = [m for m in modules if m == CORE or m.startswith(CORE + ".")]
    assert len(core) >= 8, core  # rows, decisions, port, transitions, handlers, ...
    for root in core:
        assert _io_reached(root, modules) == [], root
        for name in _closure(root, modules):
            assert _io_calls(modules[name]) == [], (root, name)


def _write(root: Path, files: dict[str, str]) -> dict[str, Path]:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return _modules(root, ("pkg",))


def test_the_purity_check_follows_the_import_closure(tmp_path: Path) -> None:
    modules = _write(
        tmp_path,
        {
            "pkg/__init__.py": "import sqlite3\n",  # the root facade: not followed
            "pkg/core.py": "from pkg import rec\n\ndef f():\n    from pkg import lazy\n",
            "pkg/rec.py": "from dataclasses import dataclass\nfrom . import typed\n",
            "pkg/typed.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
            "    from pkg.store.records import R\n",
            "pkg/lazy.py": "import json\n",
            "pkg/store/__init__.py": "from pkg.store.db import Db\n",
            "pkg/store/db.py": "import sqlite3\n",
            "pkg/store/records.py": "R = 1\n",
            "pkg/web.py": "import httpx\n",
            "pkg/plain.py": "import json\nfrom pkg import lazy\n",
        },
    )
    # a TYPE_CHECKING import, through a relative import, of a module whose package runs IO
    assert _io_reached("pkg.core", modules) == [
        "sqlite3 <- pkg.store.db <- pkg.store <- pkg.typed <- pkg.rec <- pkg.core"
    ]
    assert _io_reached("pkg.web", modules) == ["httpx <- pkg.web"]  # cannot be followed
    assert _io_reached("pkg.plain", modules) == []
    assert set(_closure("pkg.core", modules)) >= {"pkg.lazy", "pkg.store.records"}
    (tmp_path / "pkg/lazy.py").write_text("def f():\n    return open('x').read()\n")
    assert _io_calls(tmp_path / "pkg/lazy.py") == ["lazy.py:2: open("]


def test_the_purity_check_sees_the_io_modules() -> None:
    modules = _modules()
    for name in ("drivers.install", "store.facts", "api.clock", "api.async_runtime"):
        assert _io_reached(f"lineup_runtime_lite.{name}", modules) != [], name


def test_no_import_circle_in_the_runtime() -> None:
    modules = _modules(ROOT, ("lineup_runtime_lite",))
    assert _circle(_graph(modules, own_submodules=False)) is None


def test_the_circle_check_sees_a_circle(tmp_path: Path) -> None:
    modules = _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pkg.b\n",
            "pkg/b.py": "class B:\n    def __init__(self):\n        from pkg import c\n",
            "pkg/c.py": "from pkg.a import A\n",
        },
    )
    assert _circle(_graph(modules, own_submodules=False)) == ["pkg.a", "pkg.b", "pkg.c", "pkg.a"]
    (tmp_path / "pkg/c.py").write_text("A = 1\n")
    assert _circle(_graph(_modules(tmp_path, ("pkg",)), own_submodules=False)) is None


def _floor_of(module: str, package: str, floors: tuple[tuple[str, ...], ...]) -> int | None:
    """The floor of `module` (a module of `package`): its first name below the package."""
    first = module.removeprefix(package).removeprefix(".").split(".")[0]
    return next((i for i, names in enumerate(floors) if first in names), None)


def _downward_violations(
    modules: dict[str, Path], package: str, floors: tuple[tuple[str, ...], ...]
) -> list[str]:
    """Every import of a module of `package` that does not go to its own package or down
    (`importer -> imported`), and every module on no floor (`importer -> ?`)."""
    found = []
    graph = _graph(modules, own_submodules=True)
    for name in sorted(modules):
        here = _floor_of(name, package, floors)
        if here is None:
            found.append(f"{name} -> ?")
            continue
        own = name.removeprefix(package).removeprefix(".").split(".")[0]
        targets = set(graph[name])
        if package in _imports(modules[name], name) and name != package:
            targets.add(package)  # `from pkg import X`: the root facade
        for target in sorted(targets):
            first = target.removeprefix(package).removeprefix(".").split(".")[0]
            there = _floor_of(target, package, floors)
            if first != own and (there is None or there >= here):
                found.append(f"{name} -> {target}")
    return found


def test_each_floor_imports_only_downward() -> None:
    modules = _modules(ROOT, ("lineup_runtime_lite",))
    assert _downward_violations(modules, "lineup_runtime_lite", FLOORS) == []
    top_level = sorted(p.name for p in PACKAGE.glob("*.py"))
    # a handful of modules at the top: the facade, the stable public paths and the tests' door
    assert top_level == [
        "__init__.py",
        "databases.py",
        "internals.py",
        "pytest_plugin.py",
        "scenario.py",
        "suite.py",
        "testing.py",
    ]


def test_the_floor_check_sees_an_upward_import(tmp_path: Path) -> None:
    floors = (("low",), ("mid",), ("",), ("top",))
    modules = _write(
        tmp_path,
        {
            "pkg/__init__.py": "from pkg.mid.m import M\n",
            "pkg/low/__init__.py": "",
            "pkg/low/a.py": "def f():\n    from pkg.top import t\n",  # lazy, upward
            "pkg/low/b.py": "from pkg import M\n",  # the facade sits above `low`
            "pkg/low/c.py": "from . import a\n",  # its own package: fine
            "pkg/mid/__init__.py": "",
            "pkg/mid/m.py": "from pkg.low import c\nM = 1\n",
            "pkg/top.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
            "    from pkg.mid import m\n",
            "pkg/stray.py": "",
        },
    )
    assert _downward_violations(modules, "pkg", floors) == [
        "pkg.low.a -> pkg.top",
        "pkg.low.b -> pkg",
        "pkg.stray -> ?",
    ]


#: The most lines a module of the pure core may have (the issue's bound for every runtime
#: module: past it, split by job, as `transitions.py` became calls/actions/activations/
#: deliveries).
CORE_MOST_LINES = 700


def test_no_core_module_is_over_700_lines() -> None:
    modules = _modules(ROOT, ("lineup_runtime_lite",))
    sizes = {
        name: len(path.read_text().splitlines())
        for name, path in modules.items()
        if name.startswith(CORE + ".")
    }
    assert {"lineup_runtime_lite.core.calls", "lineup_runtime_lite.core.deliveries"} <= set(sizes)
    assert {name: n for name, n in sizes.items() if n > CORE_MOST_LINES} == {}


def test_no_two_runtime_modules_or_classes_share_a_name() -> None:
    modules = _modules(ROOT, ("lineup_runtime_lite",))
    files: dict[str, list[str]] = {}
    classes: dict[str, list[str]] = {}
    for name, path in modules.items():
        if path.name != "__init__.py":
            files.setdefault(path.stem.lstrip("_"), []).append(name)
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef):
                classes.setdefault(node.name.lstrip("_"), []).append(name)
    assert {k: v for k, v in files.items() if len(v) > 1} == {}
    assert {k: v for k, v in classes.items() if len(v) > 1} == {}


def test_the_architecture_tree_names_each_package_on_its_floor() -> None:
    """The architecture page's "The runtime's floors" shows the folders as `FLOORS` has them."""
    text = (ROOT / "docs" / "architecture.md").read_text("utf-8")
    tree = text[text.index("## The runtime's floors") :]
    tree = tree[: tree.index("```\n\n")]
    for floor, names in enumerate(FLOORS):
        for name in names:
            if (PACKAGE / name).is_dir() and name:
                line = next(x for x in tree.splitlines() if x.startswith(f"  {name}/ "))
                assert f"floor {floor}" in line, (name, floor, line)


def _exported(path: Path) -> list[str]:
    """The names a module's `__all__` lists (literal strings), in order."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
                assert isinstance(node.value, ast.List | ast.Tuple), path
                return [
                    e.value
                    for e in node.value.elts
                    if isinstance(e, ast.Constant) and isinstance(e.value, str)
                ]
    return []


def test_no_runtime_module_exports_a_private_name() -> None:
    modules = _modules(ROOT, ("lineup_runtime_lite",))
    exported = {name: _exported(path) for name, path in modules.items()}
    assert exported["lineup_runtime_lite.store"]  # the check reads real faces
    private = {name: [n for n in names if n.startswith("_")] for name, names in exported.items()}
    assert {name: names for name, names in private.items() if names} == {}


def _loaded_by(statement: str) -> list[str]:
    """The modules a fresh interpreter holds after running `statement`."""
    script = f"import json, sys\n{statement}\nprint(json.dumps(sorted(sys.modules)))\n"
    proc = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True
    )
    loaded: list[str] = json.loads(proc.stdout)
    return loaded


def test_importing_the_core_loads_no_sqlite3_nor_the_rest_of_the_runtime() -> None:
    for statement in (
        "from lineup_runtime_lite.core import actions, activations, calls, deliveries",
        "import lineup_runtime_lite.core",
    ):
        loaded = _loaded_by(statement)
        assert "sqlite3" not in loaded, statement
        outside = [
            m
            for m in loaded
            if m.startswith("lineup_runtime_lite.") and not m.startswith(CORE + ".") and m != CORE
        ]
        assert outside == [], statement
    # the public names still load on first use
    assert "sqlite3" in _loaded_by("from lineup_runtime_lite import Runtime")
