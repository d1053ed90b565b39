"""Deadlines on the runtime clock, recovery on open, and reconcile: re-driving whatever
the saved facts leave pending (never re-executing a delivery)."""

from __future__ import annotations

import asyncio

from lineup_runtime_lite.core.handlers import CatalogHandler
from lineup_runtime_lite.drivers import steps
from lineup_runtime_lite.drivers.activation import ActivationDriver
from lineup_runtime_lite.drivers.delivery import DeliveryDriver
from lineup_runtime_lite.drivers.intents import HostRelay
from lineup_runtime_lite.drivers.shell import Shell
from lineup_runtime_lite.store import faults

__all__ = ["Timers"]


class Timers:
    def __init__(
        self,
        shell: Shell,
        activations: ActivationDriver,
        delivery: DeliveryDriver,
        host: HostRelay,
        handlers: dict[str, CatalogHandler],
    ) -> None:
        self.shell = shell
        self.activations = activations
        self.delivery = delivery
        self.host = host
        self.handlers = list({id(h): h for h in handlers.values()}.values())

    async def tick(self) -> None:
        """Fire whatever fell due on the runtime clock (activation timeouts, handler
        deadlines), then re-drive whatever the saved facts leave pending."""
        shell = self.shell
        now = shell.now()
        for act_id in shell.facts.due_activations(now):
            await self.activations.end(act_id, "failed", "timeout")
        for handler in self.handlers:
            due = handler.due(shell.facts, now)
            if due:  # one group commit; each in its own savepoint (a lost race drops one)
                await asyncio.gather(*(shell.decide(steps.decided(d)) for d in due))
        self.reconcile()

    def next_deadline(self) -> int | None:
        return self.shell.facts.next_deadline()

    def reconcile(self) -> None:
        """Re-drive pending facts that lost their driver (a step failed after its commit):
        undelivered Host intents, starting activations that are not just waiting for the
        Host, queued calls of ready activations, calls left `delivered` with nobody sending
        them (they end `delivery_interrupted`: at most once), waiters whose final
        committed."""
        facts, shell = self.shell.facts, self.shell
        if facts.intents_pending():
            self.host.kick()
        for act_id in facts.activations_to_drive():
            shell.spawn(self.activations.drive(act_id))
        for session_id in facts.sessions_to_pump():
            self.delivery.kick(session_id)  # no-op while the session's pump is sending
        shell.wake_waiters()

    def reconcile_call(self, call_id: str) -> None:
        """A retried call hints that a reconcile step may have been lost: re-drive this
        call's pending facts (nothing is re-executed)."""
        found = self.shell.facts.call_activation(call_id)
        if found is None:
            return
        call, act = found
        if call.state not in ("queued", "delivered"):
            return
        if call.state == "delivered" or act.state == "ready":
            assert call.app_session_id is not None
            self.delivery.kick(call.app_session_id)  # a `delivered` call nobody sends ends
        elif act.state == "starting":
            if self.shell.facts.intents_pending():
                self.host.kick()
            if not act.waits_for_host:
                self.shell.spawn(self.activations.drive(act.activation_id))

    async def recover(self) -> None:
        """Re-drive what the facts say is pending; idempotent and safe to crash in."""
        for call in self.shell.facts.delivered_calls():
            faults.hit("recover.step")
            await self.delivery.interrupt(call)
        for action in self.shell.facts.delivered_actions():  # UI Actions alike (SPEC 17)
            faults.hit("recover.step")
            await self.delivery.interrupt(action)
        faults.hit("recover.step")
        await self.tick()  # deadlines that passed while down fire at their own times
