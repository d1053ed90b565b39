"""The typed records the store returns (they live in `lineup_runtime_lite.records`, beside
the decisions, so the pure core imports them without loading the store)."""

from __future__ import annotations

from lineup_runtime_lite.records import Activation, Call, Intent, Operation, Session

__all__ = ["Activation", "Call", "Intent", "Operation", "Session"]
