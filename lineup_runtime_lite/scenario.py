"""The scenario format v2's stable import path: `load_scenario(path)` and the types it
returns (their home is `lineup_runtime_lite.sim.format`)."""

from __future__ import annotations

from lineup_runtime_lite.sim.format import (
    ACTIONS,
    HOST_NAMES,
    Scenario,
    ScenarioDocument,
    Step,
    load_scenario,
    matches,
    parse_scenario,
    scenario_json_schema,
)

__all__ = [
    "ACTIONS",
    "HOST_NAMES",
    "Scenario",
    "ScenarioDocument",
    "Step",
    "load_scenario",
    "matches",
    "parse_scenario",
    "scenario_json_schema",
]
