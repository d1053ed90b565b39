"""Fault-suite fixtures: the runtime fixtures, a Hypothesis CI profile, and a closing tally
of what the suite injected and checked."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from lineup_build.signing import SigningKey
from lineup_build.trust import TrustStore
from lineup_runtime_lite import HostSimulator, Runtime, VirtualClock, faults
from tests.faults import invariants, tally
from tests.faults.harness import env
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
    "todo_bundle",
    "trust",
]

settings.register_profile(
    "ci",
    max_examples=25,
    stateful_step_count=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "long",
    max_examples=300,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("LINEUP_HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(scope="session")
def flaky_bundle(tmp_path_factory: pytest.TempPathFactory, rt_key: SigningKey) -> Path:
    """The `flaky` app: a worker that hangs, exits, and breaks the bridge on request."""
    src = Path(__file__).parent / "apps" / "flaky"
    return build_app(src, tmp_path_factory.mktemp("flaky") / "flaky", rt_key)


@pytest.fixture()
def rt(trust: TrustStore, clock: VirtualClock, host: HostSimulator) -> Iterator[Runtime]:
    """An in-memory runtime whose final state must pass the invariant check."""
    runtime = Runtime.open(":memory:", trust=trust, clock=clock, host=host)
    try:
        yield runtime
        faults.disarm()
        runtime.settle()
        invariants.check(runtime)
    finally:
        runtime.close()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print the figures the issue asks for (faults injected, restarts, calls checked)."""
    lines = tally.summary()
    if lines:
        terminalreporter.section("fault injection tally")
        for line in lines:
            terminalreporter.write_line(line)
