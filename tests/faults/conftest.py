"""Fault-suite fixtures: the runtime fixtures, a Hypothesis CI profile, and a closing tally
of what the suite injected and checked."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

from tests.faults import tally
from tests.runtime.conftest import (
    clock,
    host,
    pomo,
    pomodoro_bundle,
    probe,
    probe_bundle,
    rt,
    rt_key,
    todo_bundle,
    trust,
)

__all__ = [
    "clock",
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


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print the figures the issue asks for (faults injected, restarts, calls checked)."""
    lines = tally.summary()
    if lines:
        terminalreporter.section("fault injection tally")
        for line in lines:
            terminalreporter.write_line(line)
