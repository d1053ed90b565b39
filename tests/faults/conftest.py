"""Fault-suite fixtures: the runtime fixtures (its `rt` checks the invariants at teardown).
The closing tally of what the suite injected and checked (`tests/faults/tally.py`) is
printed by tests/conftest.py, which adds up the figures of every pytest-xdist worker."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from lineup_build.signing import SigningKey
from lineup_build.trust import TrustStore
from lineup_runtime_lite import HostSimulator, Runtime, VirtualClock
from lineup_runtime_lite.store import faults
from tests.faults import invariants
from tests.faults.harness import env, sqlite_env
from tests.runtime.conftest import (
    build_app,
    clock,
    host,
    pomo,
    pomodoro_bundle,
    probe,
    probe_bundle,
    rt_key,
    todo_bundle,
    trust,
)

__all__ = [
    "clock",
    "env",
    "flaky_bundle",
    "host",
    "pomo",
    "pomodoro_bundle",
    "probe",
    "probe_bundle",
    "rt",
    "rt_key",
    "sqlite_env",
    "todo_bundle",
    "trust",
]


@pytest.fixture(scope="session")
def flaky_bundle(tmp_path_factory: pytest.TempPathFactory, rt_key: SigningKey) -> Path:
    """The `flaky` app: a worker that hangs, exits, and breaks the bridge on request."""
    src = Path(__file__).parent / "apps" / "flaky"
    return build_app(src, tmp_path_factory.mktemp("flaky") / "flaky", rt_key)


@pytest.fixture
def rt(
    store_engine: str,
    request: pytest.FixtureRequest,
    trust: TrustStore,
    clock: VirtualClock,
    host: HostSimulator,
) -> Iterator[Runtime]:
    """A runtime whose final state must pass the invariant check, on the chosen store
    engine: SQLite `:memory:`, or a fresh PostgreSQL database (SPEC 15: the fault suite on
    both, one CI pass each)."""
    target = ":memory:" if store_engine == "sqlite" else request.getfixturevalue("pg_url")
    runtime = Runtime.open(target, trust=trust, clock=clock, host=host)
    try:
        yield runtime
        faults.disarm()
        runtime.settle()
        invariants.check(runtime)
    finally:
        runtime.close()
