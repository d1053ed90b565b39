"""LineUp reference runtime: install verified bundles and route Agent calls."""

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
