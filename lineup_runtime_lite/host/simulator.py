"""The Host simulator: receives the runtime's `show_surface` intents and sends lifecycle
events (`preload`, `surface_loaded`, `foreground_confirmed`, `activation_failed`,
`user_left`), each naming its instance."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["EVENTS", "HostEvent", "HostSimulator"]

EVENTS = ("preload", "surface_loaded", "foreground_confirmed", "activation_failed", "user_left")


@dataclass(frozen=True)
class HostEvent:
    """One lifecycle event as the simulator sent it, and whether the runtime applied it."""

    event: str
    instance: str
    conversation: str
    scope: str
    applied: bool


@dataclass
class HostSimulator:
    """A scriptable Host.

    Args:
        policy: `auto` — after a surface loads, the simulator itself sends a separate
            `foreground_confirmed` for that instance; `manual` — scenario steps decide.
        fail_next: How many of the next intents to refuse (to test reconcile retries).
        refuse: Conversations whose intents the Host refuses, every time (the Host cannot
            show them; other conversations' intents still go through).
    """

    policy: str = "auto"
    fail_next: int = 0
    intents: list[dict[str, Any]] = field(default_factory=list)
    events: list[HostEvent] = field(default_factory=list)
    refuse: set[str] = field(default_factory=set)
    #: Every intent the runtime tried to hand over, refused ones included, in order.
    attempts: list[dict[str, Any]] = field(default_factory=list)
    _applied_intents: set[str] = field(default_factory=set)
    _send: Callable[[str, str, str, str], Awaitable[bool]] | None = None

    def bind(self, send: Callable[[str, str, str, str], Awaitable[bool]]) -> None:
        """Connect the simulator to a runtime's Host-event entry point."""
        self._send = send

    async def on_intent(self, body: dict[str, Any]) -> None:
        """The runtime asks the Host to act (after the commit that decided it)."""
        self.attempts.append(body)
        if body["conversation"] in self.refuse:
            raise ConnectionError(f"the Host refuses to show {body['instance']}")
        if self.fail_next > 0:
            self.fail_next -= 1
            raise ConnectionError("host unavailable")
        key = f"{body['intent']}:{body['instance']}"
        if key in self._applied_intents:
            return  # redelivered after a crash: apply each dedup key once
        if body not in self.intents:
            self.intents.append(body)
        if self.policy == "auto":
            await self.send("surface_loaded", body["instance"], body["conversation"], body["scope"])
            await asyncio.sleep(0)
            await self.send(
                "foreground_confirmed", body["instance"], body["conversation"], body["scope"]
            )
        # only now applied: an intent whose events failed is taken again when redelivered
        self._applied_intents.add(key)

    def instance_for(self, conversation: str, scope: str) -> str | None:
        """The latest instance the runtime asked to show for a conversation and scope."""
        for body in reversed(self.intents):
            if body["conversation"] == conversation and body["scope"] == scope:
                return str(body["instance"])
        return None

    async def send(self, event: str, instance: str, conversation: str, scope: str) -> bool:
        """Send one event to the runtime; returns whether it changed anything."""
        if event not in EVENTS:
            raise ValueError(f"unknown Host event {event!r}; known: {', '.join(EVENTS)}")
        assert self._send is not None, "the simulator is not bound to a runtime"
        applied = await self._send(event, instance, conversation, scope)
        self.events.append(HostEvent(event, instance, conversation, scope, applied))
        return applied
