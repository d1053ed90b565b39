"""Drive `starting` activations to `ready`, `failed` or `cancelled` (SPEC 5.2, 5.7), and
apply Host lifecycle events."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Awaitable, Callable

from lineup_runtime_lite.core.activations import host_event_action
from lineup_runtime_lite.core.handlers import CatalogHandler
from lineup_runtime_lite.drivers import steps
from lineup_runtime_lite.drivers.install import UntrustedRecord
from lineup_runtime_lite.drivers.shell import Shell
from lineup_runtime_lite.drivers.workers import WorkerPool, failure_cause
from lineup_runtime_lite.processes.worker import WorkerError
from lineup_sdk.errors import LineupError

__all__ = ["ActivationDriver"]


class ActivationDriver:
    def __init__(
        self,
        shell: Shell,
        pool: WorkerPool,
        handlers: dict[str, CatalogHandler],
        check_trust: Callable[[str, str], Awaitable[None]],
    ) -> None:
        self.shell = shell
        self.pool = pool
        self.handlers = handlers
        self.check_trust = check_trust
        self._driving: dict[str, asyncio.Task[None]] = {}

    async def drive(self, act_id: str) -> None:
        """Reconcile a `starting` activation: bring up the worker, then check readiness.

        One driver per activation at a time (a retry or a tick may ask again)."""
        if act_id in self._driving:
            return
        task = asyncio.current_task()
        assert task is not None
        self._driving[act_id] = task
        try:
            await self._drive(act_id)
        finally:
            if self._driving.get(act_id) is task:
                del self._driving[act_id]

    def stop_driving(self, act_id: str) -> None:
        """An activation that ended needs no worker start any more: stop its driver (a
        worker still starting is killed), so `settle()` does not wait out its retries."""
        task = self._driving.pop(act_id, None)
        if task is not None and task is not asyncio.current_task() and not task.done():
            task.cancel()

    async def _drive(self, act_id: str) -> None:
        facts = self.shell.facts
        act = facts.activation(act_id)
        if act is None or act.state != "starting" or not self.shell.owns(act.app_session_id):
            return  # another node's is driven there
        session = facts.session_by_id(act.app_session_id)
        assert session is not None
        if act.worker_ready:
            await self.advance(act_id)
            return
        try:  # at every activation: the key, its scopes and `allow` now; nothing planted
            await self.check_trust(session.scope, session.version)
        except LineupError as exc:  # a folder's problem, or the app's trust chain's
            folder = exc.code == "install_tampered" and not isinstance(exc, UntrustedRecord)
            reason = "worker_failed" if folder else "app_untrusted"
            await self.end(act_id, "failed", reason, cause=exc.code)
            return
        tools = self.shell.tools_of(session.scope, session.version)
        if any(tool.delivery == "miniapp_sdk" for tool in tools.values()):
            try:
                await self.pool.ensure(session.scope, session.version, session.app_session_id)
            except WorkerError as exc:
                if exc.kind == "method_mismatch":
                    reason, cause = "method_mismatch", None
                elif exc.kind == "sandbox":
                    reason, cause = "worker_failed", "sandbox_unavailable"
                else:  # what the worker raised, as Python prints it (SPEC 13.1)
                    reason, cause = "worker_failed", failure_cause(str(exc))
                self.pool.report_failure(session.scope, session.version, cause or reason)
                await self.end(act_id, "failed", reason, cause=cause)
                return
            except LineupError as exc:
                reason = "app_untrusted" if isinstance(exc, UntrustedRecord) else "worker_failed"
                await self.end(act_id, "failed", reason, cause=exc.code)
                return
        await self.advance(act_id, worker_up=True)

    async def advance(
        self, act_id: str, *, worker_up: bool = False, confirmed: bool = False
    ) -> bool:
        """Commit the worker being up / the Host's confirmation, and `ready` once both
        hold (`activations.advance_activation`). False when nothing changed."""
        shell = self.shell
        step = steps.advance(
            act_id,
            shell.tools_of,
            self.handlers,
            now=shell.now(),
            operation_id=f"op_{secrets.token_hex(8)}",
            worker_up=worker_up,
            confirmed=confirmed,
        )
        return await shell.decide(step) is not None

    async def end(self, act_id: str, state: str, reason: str, *, cause: str | None = None) -> bool:
        """Fail or cancel a `starting` activation (`activations.end_activation`); False
        (writing nothing) when it already left `starting`."""
        shell = self.shell
        step = steps.end(act_id, shell.tools_of, state, reason, now=shell.now(), cause=cause)
        return await shell.decide(step) is not None

    async def host_event(self, event: str, instance: str, conversation_id: str, scope: str) -> bool:
        """Apply one Host lifecycle event; returns whether it changed anything.

        A stale confirmation (the instance is no longer starting) or a foreign one (it names
        another conversation or scope) is ignored.
        """
        facts = self.shell.facts
        act = facts.activation(instance)
        session = facts.session_by_id(act.app_session_id) if act is not None else None
        action = host_event_action(act, session, event, conversation_id, scope)
        if action is None:
            return False
        if action == "confirm":
            return await self.advance(instance, confirmed=True)
        if action == "fail":
            return await self.end(instance, "failed", "host_failed")
        return await self.end(instance, "cancelled", "user_left")

    def cancel_all(self) -> None:
        for task in list(self._driving.values()):
            task.cancel()
