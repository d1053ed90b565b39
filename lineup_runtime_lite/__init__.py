"""LineUp reference runtime: install verified bundles and route Agent calls."""

from lineup_runtime_lite.clock import Clock, RealClock, VirtualClock
from lineup_runtime_lite.host import HostSimulator
from lineup_runtime_lite.runtime import Outbox, Runtime, Surface

__all__ = ["Clock", "HostSimulator", "Outbox", "RealClock", "Runtime", "Surface", "VirtualClock"]
