"""Runtime-delivered handlers: tools a catalog key says the runtime itself serves.

A handler plugs into the core through this small protocol, registered by catalog key; it
reads facts through the `Facts` port and decides through pure transitions, and never
imports the core (no import circle).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from lineup_runtime_lite.core.calls import CallEvent, NewIds
from lineup_runtime_lite.core.decisions import Change, Decision
from lineup_runtime_lite.core.port import Facts
from lineup_runtime_lite.core.rows import Call, RegistryEntry

__all__ = ["CatalogHandler", "HandlerContext"]


@dataclass(frozen=True, slots=True)
class HandlerContext:
    """What the core gives a handler for one decision."""

    now: int
    ids: NewIds
    activation_timeout_ms: int
    #: The tools of an installed `(scope, version)`, by method.
    tools_of: Callable[[str, str], Mapping[str, RegistryEntry]]
    #: Installed tools of a scope that a catalog key serves.
    methods_for: Callable[[str, str], list[str]]


class CatalogHandler(Protocol):
    """One runtime-delivered handler: the code behind a catalog key (for example
    `pomodoro.start`; `lineup_sdk.RuntimeHandler` is that key's entry and schemas)."""

    def accept(
        self, facts: Facts, tool: RegistryEntry, ev: CallEvent, ctx: HandlerContext
    ) -> Decision:
        """Decide an Agent call of this handler's tool (read inside its savepoint)."""
        ...

    def on_ready(
        self, tool: RegistryEntry, trigger: Call, now: int, ids: NewIds
    ) -> Sequence[Change]:
        """The changes when the activation this call triggered becomes ready (pure)."""
        ...

    def due(self, facts: Facts, now: int) -> list[Decision]:
        """Decisions whose runtime-clock deadline passed (read inside the savepoint)."""
        ...
