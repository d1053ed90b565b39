"""LineUp reference runtime: install verified bundles and route Agent calls."""

from lineup_runtime_lite.async_runtime import AsyncOutbox, AsyncRuntime, AsyncSurface
from lineup_runtime_lite.clock import Clock, RealClock, VirtualClock
from lineup_runtime_lite.host_simulator import HostSimulator
from lineup_runtime_lite.runtime import Outbox, Runtime, Surface

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
