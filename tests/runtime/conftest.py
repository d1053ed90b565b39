"""Runtime test fixtures: bundles built once per session, runtimes on `:memory:`."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lineup_build.build import build_project
from lineup_build.init import init_project
from lineup_build.signing import SigningKey, key_from_seed
from lineup_build.trust import TrustedKey, TrustStore
from lineup_runtime_lite import HostSimulator, Runtime, VirtualClock
from lineup_runtime_lite.core.messages import AgentMessage

APPS = Path(__file__).parent / "apps"
#: Stores written by earlier commits' code (`fixtures/make_<commit>_db.py`): the migration
#: tests open them.
FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="session")
def rt_key() -> SigningKey:
    return key_from_seed(bytes(range(1, 33)))


@pytest.fixture(scope="session")
def trust(rt_key: SigningKey) -> TrustStore:
    return TrustStore.from_keys([TrustedKey(rt_key.key_id, rt_key.public_raw, ("*",), "tests")])


def build_app(src: Path, dest: Path, key: SigningKey, **switches: object) -> Path:
    """Copy an app folder and build it; returns the bundle path.

    `switches` become `<package>/switches.py` in the copy (so they travel in the bundle: the
    sandbox passes no test variables through the environment).
    """
    shutil.copytree(src, dest)
    if switches:
        package = next(p for p in dest.iterdir() if p.is_dir() and (p / "tools.py").exists())
        (package / "switches.py").write_text(
            "".join(f"{name} = {value!r}\n" for name, value in sorted(switches.items()))
        )
    result = build_project(dest, signing_key=key)
    assert result.ok, [d.to_dict() for d in result.diagnostics]
    assert result.bundle is not None
    return result.bundle


def build_source_app(root: Path, scope: str, tools_source: str, key: SigningKey) -> Path:
    """Write a one-module MiniApp (`<scope>_app/tools.py` = `tools_source`) and build it;
    returns the bundle path."""
    package = root / f"{scope}_app"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "tools.py").write_text(tools_source)
    (root / "lineup.toml").write_text(
        f'[app]\nscope = "{scope}"\nname = "{scope.title()}"\nversion = "1.0.0"\n'
        f'entry = "{scope}_app.tools"\ninclude = ["{scope}_app/**/*.py"]\n'
    )
    result = build_project(root, signing_key=key)
    assert result.ok and result.bundle is not None, [d.to_dict() for d in result.diagnostics]
    return result.bundle


@pytest.fixture(scope="session")
def probe_bundle(tmp_path_factory: pytest.TempPathFactory, rt_key: SigningKey) -> Path:
    return build_app(APPS / "probe", tmp_path_factory.mktemp("probe") / "probe", rt_key)


@pytest.fixture(scope="session")
def todo_bundle(tmp_path_factory: pytest.TempPathFactory, rt_key: SigningKey) -> Path:
    root = tmp_path_factory.mktemp("todo") / "todo"
    init_project(root, template="todo", scope="todo")
    result = build_project(root, signing_key=rt_key)
    assert result.ok and result.bundle is not None
    return result.bundle


@pytest.fixture()
def clock() -> VirtualClock:
    return VirtualClock()


@pytest.fixture()
def host() -> HostSimulator:
    return HostSimulator(policy="manual")


@pytest.fixture()
def rt(trust: TrustStore, clock: VirtualClock, host: HostSimulator) -> Iterator[Runtime]:
    runtime = Runtime.open(":memory:", trust=trust, clock=clock, host=host)
    try:
        yield runtime
    finally:
        runtime.close()


@pytest.fixture()
def store_rt(
    store_engine: str,
    request: pytest.FixtureRequest,
    trust: TrustStore,
    clock: VirtualClock,
    host: HostSimulator,
) -> Iterator[Runtime]:
    """`rt` on the chosen store engine (SQLite `:memory:`, or a fresh PostgreSQL database
    with its apps folder under `tmp_path`), for the `store` tests: a module of them overrides
    `rt` with it, so its `probe` and `pomo` run there too."""
    if store_engine == "sqlite":
        runtime = Runtime.open(":memory:", trust=trust, clock=clock, host=host)
    else:
        url, apps = request.getfixturevalue("pg_url"), request.getfixturevalue("tmp_path")
        runtime = Runtime.open(url, trust=trust, clock=clock, host=host, apps_dir=apps / "apps")
    try:
        yield runtime
    finally:
        runtime.close()


@pytest.fixture()
def probe(rt: Runtime, probe_bundle: Path) -> Runtime:
    rt.install(probe_bundle)
    return rt


def ready(rt: Runtime, conversation: str = "conv") -> None:
    """Bring the probe app up in `conversation` (an app_ready call, then settle)."""
    first = rt.call(f"warmup-{conversation}", conversation, "probe.echo", {"text": "hi"})
    assert first["stage"] == "accepted"
    rt.settle()


def message(rt: Runtime, msg_id: str) -> AgentMessage:
    """The one outbox message with `msg_id` (fails if there is not exactly one)."""
    found = [m for m in rt.outbox.all() if m["id"] == msg_id]
    assert len(found) == 1, (msg_id, found)
    return found[0]


@pytest.fixture(scope="session")
def pomodoro_bundle(tmp_path_factory: pytest.TempPathFactory, rt_key: SigningKey) -> Path:
    root = tmp_path_factory.mktemp("pomo") / "focus"
    init_project(root, template="pomodoro")
    result = build_project(root, signing_key=rt_key)
    assert result.ok and result.bundle is not None, [d.to_dict() for d in result.diagnostics]
    return result.bundle


@pytest.fixture()
def pomo(rt: Runtime, pomodoro_bundle: Path) -> Runtime:
    rt.install(pomodoro_bundle)
    return rt


@pytest.fixture(scope="session")
def kernel_bundle(tmp_path_factory: pytest.TempPathFactory, rt_key: SigningKey) -> Path:
    """`apps/kernel`: the kernel-limit attempts of SPEC 13.3 (metadata, memory, processes)."""
    return build_app(APPS / "kernel", tmp_path_factory.mktemp("kernel") / "kernel", rt_key)


@pytest.fixture()
def trust_file(tmp_path: Path, rt_key: SigningKey) -> Path:
    """The tests' trust store as a file (a runtime re-reads it when it changes)."""
    path = tmp_path / "trust.toml"
    TrustStore.from_keys([TrustedKey(rt_key.key_id, rt_key.public_raw, ("*",), "t")]).save(path)
    return path


@pytest.fixture()
def file_runtime(tmp_path: Path, trust_file: Path) -> Iterator[Any]:
    """Open runtimes on files under `tmp_path` (each in its own folder, trusting the test
    key from `trust_file`, on a virtual clock), closed at the end of the test:
    `file_runtime(*bundles, host=HostSimulator(...), **Runtime.open options)`."""
    opened: list[Runtime] = []

    def go(*bundles: Path, host: HostSimulator | None = None, **options: Any) -> Runtime:
        folder = tmp_path / f"rt{len(opened)}"
        folder.mkdir()
        rt = Runtime.open(
            folder / "rt.db",
            trust=trust_file,
            clock=VirtualClock(),
            host=host or HostSimulator(policy="manual"),
            **options,
        )
        opened.append(rt)
        for bundle in bundles:
            rt.install(bundle)
        return rt

    yield go
    for rt in opened:
        rt.close()


@pytest.fixture(scope="session")
def bulk_bundle(tmp_path_factory: pytest.TempPathFactory, rt_key: SigningKey) -> Path:
    return build_app(APPS / "bulk", tmp_path_factory.mktemp("bulk") / "bulk", rt_key)


@pytest.fixture()
def bulk(rt: Runtime, bulk_bundle: Path) -> Runtime:
    rt.install(bulk_bundle)
    return rt
