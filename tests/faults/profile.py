"""The fault suite's Hypothesis profiles: `ci` (bounded, derandomized: every CI run tries
the same examples, the default) and `long` (random, many more)."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

__all__ = ["hypothesis_profile"]

settings.register_profile(
    "ci",
    derandomize=True,
    max_examples=40,
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


def hypothesis_profile() -> settings:
    """The fault suite's profile (`LINEUP_HYPOTHESIS_PROFILE`, default `ci`); applied to its
    own state machines only, so other suites keep their settings."""
    return settings.get_profile(os.environ.get("LINEUP_HYPOTHESIS_PROFILE", "ci"))
