"""Shared fixtures: a fixed signing key, a clean environment, MiniApp projects on disk, and
the store engine the `store` tests run on (`LINEUP_TEST_STORE`, tests/store_kit.py); the
run's hooks under pytest-xdist (slow files first, the fault tally added up)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

import lineup_sdk
from lineup_build.signing import SigningKey, key_from_seed
from tests.faults import tally
from tests.pg_kit import PgServer, fresh_database, server_or_skip
from tests.store_kit import VARIABLE, chosen_engine

# Reproducible CI: every Hypothesis test tries the same examples each run (derandomized)
# unless a run asks for random ones with LINEUP_HYPOTHESIS=random.
settings.register_profile("lineup-ci", derandomize=True)
settings.register_profile("lineup-random", derandomize=False)
settings.load_profile(
    "lineup-random" if os.environ.get("LINEUP_HYPOTHESIS") == "random" else "lineup-ci"
)

#: The fixed Ed25519 seed of every golden file and reproducibility test.
SEED = bytes(range(32))

_ENV = (
    "LINEUP_SIGNING_KEY",
    "LINEUP_SIGNING_KEY_PASSPHRASE",
    "LINEUP_SDK_COLLECT",
    "SOURCE_DATE_EPOCH",
    "LINEUP_TRUST_STORE",
)

#: The header of most fixture entry modules: imports and the registry of scope `demo`.
HEADER = """\
from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, Field

from lineup_sdk import ToolContext, define_agent_tools

tools = define_agent_tools(app_scope="demo")  # <-registry
"""


def pytest_configure(config: pytest.Config) -> None:
    """`LINEUP_TEST_STORE` names an engine, or the run stops here with a usage error."""
    chosen_engine()


def pytest_report_header(config: pytest.Config) -> str:
    return f"store tests on: {chosen_engine()} ({VARIABLE})"


def store_marking_problems(items: list[pytest.Item]) -> list[str]:
    """Tests whose `store` marker and use of the `store_engine` fixture disagree."""
    problems = []
    for item in items:
        marked = item.get_closest_marker("store") is not None
        follows = "store_engine" in getattr(item, "fixturenames", ())
        if marked and not follows:
            problems.append(f"{item.nodeid}: marked store, but opens no store on store_engine")
        elif follows and not marked:
            problems.append(f"{item.nodeid}: runs on store_engine, but is not marked store")
    return problems


# -- the run under pytest-xdist (`-n 2 --dist loadfile` in pyproject.toml; `-n 0` is serial) --
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test is marked `store` exactly when it runs on the chosen store engine (else the
    PostgreSQL pass, `-m store`, would miss it or run it twice): a usage error names each
    one that is not.

    In an xdist worker, the files holding `slow` tests come first (each file keeping its
    place among them, and its tests their order): `--dist loadfile` with
    `--no-loadscope-reorder` hands files out in this order, so the long ones start at once
    instead of landing last on one worker while the other idles. Serially, nothing moves."""
    problems = store_marking_problems(items)
    if problems:
        raise pytest.UsageError(
            "\n".join(["the store marker and store_engine disagree:", *problems])
        )
    if not hasattr(config, "workerinput"):
        return
    slow = {item.path for item in items if item.get_closest_marker("slow") is not None}
    items.sort(key=lambda item: item.path not in slow)  # stable: files stay contiguous


def pytest_sessionfinish(session: pytest.Session) -> None:
    """An xdist worker hands its fault tally to the controller (`tests/faults/tally.py`)."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["lineup_fault_tally"] = tally.snapshot()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """The controller adds up each worker's fault tally as the worker finishes; a worker
    that died before sending one is named, so a short tally never passes for a full one."""
    figures = getattr(node, "workeroutput", {}).get("lineup_fault_tally")
    if figures is not None:
        tally.merge(figures)
    else:
        tally.NOTES.append(f"worker {node.gateway.id} went down ({error}): its figures are missing")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print the figures the issue asks for (faults injected, restarts, calls checked), for
    the whole run: this process's own, plus every xdist worker's."""
    lines = tally.summary()
    if lines:
        terminalreporter.section("fault injection tally")
        for line in lines:
            terminalreporter.write_line(line)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No signing key, passphrase, epoch or collecting flag leaks in from the shell."""
    for name in _ENV:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="session")
def signing_key() -> SigningKey:
    """The fixed test key: `key_from_seed(bytes(range(32)))`."""
    return key_from_seed(SEED)


class MiniApp:
    """A MiniApp project written into a temporary folder.

    Files are dedented; a marker comment such as `# <-dup` names a line so tests can
    assert locations without counting lines by hand.
    """

    def __init__(self, root: Path) -> None:
        self.root = root

    def write(self, files: dict[str, str]) -> MiniApp:
        for rel, text in files.items():
            path = self.root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(text))
        return self

    def line(self, marker: str, file: str = "demo_app/tools.py") -> int:
        """The 1-based line of the first line of `file` that contains `marker`."""
        for number, text in enumerate((self.root / file).read_text().splitlines(), start=1):
            if marker in text:
                return number
        raise AssertionError(f"marker {marker!r} not found in {file}")


def toml(
    *,
    scope: str = "demo",
    name: str = "Demo",
    version: str = "1.0.0",
    entry: str = "demo_app.tools",
    include: tuple[str, ...] = ("demo_app/**/*.py",),
    extra: str = "",
) -> str:
    """A `lineup.toml` text."""
    globs = ", ".join(f'"{g}"' for g in include)
    return (
        "[app]\n"
        f'scope = "{scope}"\n'
        f'name = "{name}"\n'
        f'version = "{version}"\n'
        f'entry = "{entry}"\n'
        f"include = [{globs}]\n"
        f"{extra}"
    )


MakeApp = Callable[..., MiniApp]


@pytest.fixture
def make_app(tmp_path: Path) -> MakeApp:
    """`make_app(body, files=..., lineup_toml=..., **toml_fields)` → a `MiniApp`.

    `body` is appended to `HEADER` as `demo_app/tools.py` (pass `body=None` to write the
    entry yourself through `files`); `toml_fields` are `toml()`'s keywords.
    """
    counter = iter(range(1_000))

    def factory(
        body: str | None = "",
        *,
        files: dict[str, str] | None = None,
        lineup_toml: str | None = None,
        **toml_fields: Any,
    ) -> MiniApp:
        app = MiniApp(tmp_path / f"app{next(counter)}")
        app.root.mkdir()
        content: dict[str, str] = {"demo_app/__init__.py": ""}
        if body is not None:
            scope = toml_fields.get("scope", "demo")
            header = HEADER.replace('app_scope="demo"', f'app_scope="{scope}"')
            content["demo_app/tools.py"] = header + textwrap.dedent(body)
        content["lineup.toml"] = lineup_toml if lineup_toml is not None else toml(**toml_fields)
        content.update(files or {})
        return app.write(content)

    return factory


@pytest.fixture(scope="session")
def toolchain_wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding the wheel built from this checkout (offline: hatchling from here)."""
    out = tmp_path_factory.mktemp("toolchain-wheel")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--disable-pip-version-check",
            "-q",
            "-w",
            str(out),
            str(Path(__file__).resolve().parents[1]),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    (wheel,) = out.glob("*.whl")
    assert wheel.name.startswith(f"lineup_sdk-{lineup_sdk.__version__}-")
    return out


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """A throwaway PostgreSQL 15 server for the session (`tests/pg_kit.py`); skips outside
    CI when the machine has no server binaries. Under pytest-xdist each worker's session
    has its own (folder `lineup-pg-gw0-...`, its own port), stopped at its end."""
    yield from server_or_skip(os.environ.get("PYTEST_XDIST_WORKER", "main"))


@pytest.fixture
def pg_url(pg_server: PgServer) -> str:
    """The URL of a new, empty database on the session's server."""
    return fresh_database(pg_server)


@pytest.fixture(scope="session")
def store_engine() -> str:
    """The engine the `store` tests run on: `sqlite` or `postgresql`, as `LINEUP_TEST_STORE`
    names it (tests/store_kit.py). Every fixture that opens a store for a `store` test
    derives its target from this one."""
    return chosen_engine()


@pytest.fixture
def db_target(store_engine: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """What `Runtime.open` is given on the chosen engine: an SQLite file, or a fresh
    PostgreSQL database on the session's server."""
    if store_engine == "sqlite":
        return str(tmp_path / "runtime.db")
    return str(request.getfixturevalue("pg_url"))
