"""A Hypothesis state machine over the production runtime — `Runtime` on SQLite `:memory:`
and a virtual clock, the engine, its drivers and group commit as they run in production —
with the notes app served by an in-process worker at the worker port (no process), checked
against a small independent model of each conversation's activation and of every call's
answer. 300 examples need no process; changing a transition's answer fails it
(tests/runtime/core/test_production_decisions.py)."""

from __future__ import annotations

from hypothesis import HealthCheck, settings

from tests.runtime.api.engine_model_kit import Machine

TestEngineModel = Machine.TestCase
TestEngineModel.settings = settings(
    max_examples=300,
    stateful_step_count=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
