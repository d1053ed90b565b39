"""LineUp reference runtime: install verified bundles and route Agent calls."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lineup_runtime_lite.api.async_runtime import AsyncOutbox, AsyncRuntime, AsyncSurface
    from lineup_runtime_lite.api.clock import Clock, RealClock, VirtualClock
    from lineup_runtime_lite.api.runtime import Outbox, Runtime, Surface
    from lineup_runtime_lite.host.simulator import HostSimulator

__all__ = [
    "AsyncOutbox",
    "AsyncRuntime",
    "AsyncSurface",
    "Clock",
    "HostSimulator",
    "Outbox",
    "RealClock",
    "Runtime",
    "Surface",
    "VirtualClock",
]

# Loaded on first use, so importing one inner module (`lineup_runtime_lite.core`, the pure
# transitions) does not pay for the whole runtime: the store, sqlite3, the drivers.
_LAZY = {
    "AsyncOutbox": "lineup_runtime_lite.api.async_runtime",
    "AsyncRuntime": "lineup_runtime_lite.api.async_runtime",
    "AsyncSurface": "lineup_runtime_lite.api.async_runtime",
    "Clock": "lineup_runtime_lite.api.clock",
    "HostSimulator": "lineup_runtime_lite.host.simulator",
    "Outbox": "lineup_runtime_lite.api.runtime",
    "RealClock": "lineup_runtime_lite.api.clock",
    "Runtime": "lineup_runtime_lite.api.runtime",
    "Surface": "lineup_runtime_lite.api.runtime",
    "VirtualClock": "lineup_runtime_lite.api.clock",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'lineup_runtime_lite' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
