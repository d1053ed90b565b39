"""Simulation and testing (floor 6): the scenario format v2 (`format`, its JSON Schema in
`scenario.schema.json`), its expectations (`expect`), the one replay driver (`simulation`)
that `lineup run`, `lineup test` and the conformance fixtures use, the suite runner
(`runner`) and the interactive prompt (`prompt`).

This face names the replay driver and the prompt's language (`lineup run`'s); users import
the format from `lineup_runtime_lite.scenario` and the suite runner from
`lineup_runtime_lite.suite`, their stable paths. Each name loads on first use (PEP 562), so
reading the format (or this package's schema file) does not load a runtime."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lineup_runtime_lite.sim.prompt import help_text, read_line
    from lineup_runtime_lite.sim.simulation import Simulation, StepReport

__all__ = ["Simulation", "StepReport", "help_text", "read_line"]

_LAZY = {
    "Simulation": "lineup_runtime_lite.sim.simulation",
    "StepReport": "lineup_runtime_lite.sim.simulation",
    "help_text": "lineup_runtime_lite.sim.prompt",
    "read_line": "lineup_runtime_lite.sim.prompt",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'lineup_runtime_lite.sim' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
