"""The runtime's core, on one asyncio loop: route calls, drive activations, deliver to
workers, and keep every fact in SQLite before any side effect (SPEC 5.2, 5.6)."""

from __future__ import annotations

import asyncio
import sqlite3
from typing import Any

from lineup_runtime_lite import faults, pomodoro
from lineup_runtime_lite.delivery import DeliveryPart
from lineup_runtime_lite.install import Tool
from lineup_runtime_lite.messages import (
    error_body,
    latest_message,
    make_message,
    record,
    reject,
)
from lineup_runtime_lite.params import Envelope, schema_rejection
from lineup_runtime_lite.validation import clip, validator_for

__all__ = ["Core", "input_problems"]


class Core(DeliveryPart):
    """All runtime state transitions: Agent calls here, the rest in the parts it extends."""

    # -- Agent calls ---------------------------------------------------------------------
    async def call(
        self,
        env: Envelope,
        checked_tool: Tool | None = None,
        problems: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """Accept one Agent call (SPEC 5.2) and return the message for this step.

        `env` passed the envelope checks in the caller's thread; `problems` are the input
        schema's findings against `checked_tool`, also computed there (validation never
        runs on this loop unless the registry changed in between).
        """
        now = self.now()
        call_id, conversation_id, method, params = (
            env.call_id,
            env.conversation_id,
            env.method,
            env.params,
        )
        tool = self.registry.get(method)
        scope = tool.scope if tool else method.split(".")[0]
        fp = env.fingerprint
        existing = self.store.one(
            "SELECT fingerprint, state FROM calls WHERE call_id=?", (call_id,)
        )
        if existing is not None:
            if existing["fingerprint"] != fp:
                return reject(
                    call_id,
                    scope,
                    now,
                    error_body(
                        "call_id_conflict",
                        f"call_id {call_id!r} was already used with another conversation, method or params",
                    ),
                )
            self._reconcile_call(call_id)
            latest = latest_message(self.store.db, call_id)
            if latest is not None:
                return latest
            return await self._wait_final(call_id)
        if tool is None:
            return reject(
                call_id,
                scope,
                now,
                error_body("unknown_method", f"no installed app declares {method!r}"),
            )
        if problems is None or checked_tool is not tool:  # installed in between: check here
            problems = input_problems(tool, params)
        if problems:
            message, details = schema_rejection(method, problems)
            return reject(
                call_id, tool.scope, now, error_body("invalid_params", message, details=details)
            )
        self.canonical_params[call_id] = env.params_json
        try:
            if tool.delivery == "runtime":
                return await pomodoro.accept(self, tool, call_id, conversation_id, params, fp)
            if tool.activation == "activation_not_required":
                return await self._accept_running_only(tool, call_id, conversation_id, params, fp)
            return await self._accept_activating(tool, call_id, conversation_id, params, fp)
        finally:
            self.canonical_params.pop(call_id, None)

    async def _accept_running_only(
        self, tool: Tool, call_id: str, conversation_id: str, params: Any, fp: str
    ) -> dict[str, Any]:
        """`activation_not_required` SDK tool: only an already-ready session, never queued."""
        session = self.session_of(conversation_id, tool.scope)
        act = self.current_activation(session["app_session_id"]) if session else None
        if session is None or act is None or act["state"] != "ready":
            msg = make_message(
                call_id,
                tool.scope,
                "error",
                self.now(),
                error=error_body(
                    "app_not_running",
                    f"{tool.scope} is not running in this conversation",
                ),
            )
            with self.store.transaction() as db:
                return self.answer_now_in(db, tool, call_id, conversation_id, params, fp, msg)
        return await self._enqueue_ready(tool, call_id, conversation_id, params, fp, session, act)

    async def _enqueue_ready(
        self,
        tool: Tool,
        call_id: str,
        conversation_id: str,
        params: Any,
        fp: str,
        session: sqlite3.Row,
        act: sqlite3.Row,
    ) -> dict[str, Any]:
        sid = session["app_session_id"]
        pump = self._pumps.get(sid)
        worker = self.workers.get((session["scope"], session["version"]))
        pinned = self.tools_of(session["scope"], session["version"]).get(tool.method)
        # An idle session with a live worker: accept and mark `delivered` in one commit,
        # then send (at most once: the commit that says `delivered` precedes the send).
        fast = (
            (pump is None or pump.done())
            and worker is not None
            and not worker.dead
            and pinned is not None
            and pinned.delivery == "miniapp_sdk"
        )
        fut = self._wait_final(call_id)
        try:
            with self.store.transaction() as db:
                self.insert_call(
                    db,
                    tool,
                    call_id,
                    conversation_id,
                    params,
                    fp,
                    session_id=sid,
                    activation_id=act["activation_id"],
                    state="delivered" if fast else "queued",
                )
        except BaseException:
            self._finals.pop(call_id, None)
            raise
        if fast:
            assert worker is not None and pinned is not None
            call = {
                "call_id": call_id,
                "scope": tool.scope,
                "method": tool.method,
                "params": params,
                "params_json": self.canonical_params.get(call_id),
                "activation_id": act["activation_id"],
            }
            self.set_pump(sid, self.spawn(self._send_then_pump(session, pinned, call, worker)))
        else:
            self.kick(sid)
        return await fut

    async def _accept_activating(
        self, tool: Tool, call_id: str, conversation_id: str, params: Any, fp: str
    ) -> dict[str, Any]:
        """`app_ready` / `foreground_required`: deliver now, queue, or start an activation."""
        needs_fg = tool.activation == "foreground_required"
        session = self.session_of(conversation_id, tool.scope)
        act = self.current_activation(session["app_session_id"]) if session else None
        if (
            session is not None
            and act is not None
            and act["state"] == "ready"
            and (not needs_fg or act["foreground"])
        ):
            return await self._enqueue_ready(
                tool, call_id, conversation_id, params, fp, session, act
            )
        with self.store.transaction() as db:
            if act is not None and act["state"] == "starting":  # join its queue
                act_id = act["activation_id"]
                # a foreground call raises the starting activation's bar: the Host must show it
                started = bool(needs_fg and not act["requires_foreground"])
                if started:
                    db.execute(
                        "UPDATE activations SET requires_foreground=1 WHERE activation_id=?",
                        (act_id,),
                    )
                self.insert_call(
                    db,
                    tool,
                    call_id,
                    conversation_id,
                    params,
                    fp,
                    session_id=act["app_session_id"],
                    activation_id=act_id,
                )
                msg = make_message(call_id, tool.scope, "accepted", self.now(), activation="queued")
                record(db, msg)
            else:
                msg, act_id = self.accept_starting_in(
                    db, tool, call_id, conversation_id, params, fp, foreground=needs_fg
                )
                started = True
            intent = (
                self._host_intent_row(db, act_id, conversation_id, tool.scope)
                if started and needs_fg
                else None
            )
        if started:
            self.spawn(self.drive_activation(act_id))
        if intent is not None:
            self.kick_host()
        return msg

    # -- clock ---------------------------------------------------------------------------
    async def tick(self) -> None:
        """Fire whatever fell due on the runtime clock (activation timeouts, deadlines),
        then re-drive whatever the saved facts leave pending."""
        now = self.now()
        for row in self.store.all(
            "SELECT activation_id FROM activations WHERE state='starting' AND deadline_ms<=? "
            "ORDER BY deadline_ms, rowid",
            (now,),
        ):
            await self.end_activation(row[0], "failed", "timeout")
        await pomodoro.tick(self, now)
        self.reconcile()

    def next_deadline(self) -> int | None:
        row = self.store.one(
            "SELECT MIN(d) FROM (SELECT MIN(deadline_ms) AS d FROM activations WHERE state='starting' "
            "UNION ALL SELECT MIN(ends_ms) FROM operations WHERE state='focusing')"
        )
        return int(row[0]) if row is not None and row[0] is not None else None

    # -- reconcile and recovery ----------------------------------------------------------
    def reconcile(self) -> None:
        """Re-drive pending facts that lost their driver (a reconcile step failed after its
        commit): undelivered Host intents, starting activations that are not just waiting
        for the Host, queued calls of ready activations, calls left `delivered` with nobody
        sending them (they end `delivery_interrupted`: at most once), waiters whose final
        committed. Never re-executes a delivery."""
        if (
            self.store.one("SELECT 1 FROM host_intents WHERE delivered=0 AND superseded=0 LIMIT 1")
            is not None
        ):
            self.kick_host()
        for row in self.store.all(
            "SELECT activation_id FROM activations WHERE state='starting' "
            "AND (worker_ready=0 OR requires_foreground=0 OR foreground=1) "
            "ORDER BY created_ms, rowid"
        ):
            self.spawn(self.drive_activation(row[0]))
        for row in self.store.all(
            "SELECT DISTINCT c.app_session_id FROM calls c JOIN activations a "
            "ON a.activation_id = c.activation_id "
            "WHERE (c.state='queued' AND a.state='ready') OR c.state='delivered'"
        ):
            self.kick(row[0])  # no-op while the session's pump is sending
        self._wake_waiters()

    def _reconcile_call(self, call_id: str) -> None:
        """A retried call hints that a reconcile step may have been lost: re-drive this
        call's pending facts (nothing is re-executed)."""
        row = self.store.one(
            "SELECT c.state, c.app_session_id, a.activation_id, a.state AS act_state, "
            "a.worker_ready, a.requires_foreground, a.foreground FROM calls c "
            "JOIN activations a ON a.activation_id = c.activation_id WHERE c.call_id=?",
            (call_id,),
        )
        if row is None or row["state"] not in ("queued", "delivered"):
            return
        if row["state"] == "delivered" or row["act_state"] == "ready":
            self.kick(row["app_session_id"])  # a `delivered` call nobody sends is interrupted
        elif row["act_state"] == "starting":
            if self.store.one(
                "SELECT 1 FROM host_intents WHERE delivered=0 AND superseded=0 LIMIT 1"
            ):
                self.kick_host()
            if not row["worker_ready"] or not row["requires_foreground"] or row["foreground"]:
                self.spawn(self.drive_activation(row["activation_id"]))

    async def recover(self) -> None:
        """Re-drive what the facts say is pending; idempotent and safe to crash in."""
        for call in self.store.all(
            "SELECT * FROM calls WHERE state='delivered' ORDER BY created_ms, rowid"
        ):
            faults.hit("recover.step")
            await self._interrupt_delivery(call)
        faults.hit("recover.step")
        await self.tick()  # deadlines that passed while down fire at their own times

    async def close(self) -> None:
        self.subs.close()
        for worker in list(self.workers.values()):
            await worker.kill()
        self.workers.clear()
        pending = [t for t in self._tasks if t is not asyncio.current_task()]
        for task in pending:
            task.cancel()
        if pending:  # cancelled background steps leave their facts for the next open
            await asyncio.wait(pending, timeout=5)


def input_problems(tool: Tool, params: Any) -> list[dict[str, Any]]:
    """The input schema's problems with strict-JSON `params` (pure; any thread)."""
    if not isinstance(params, dict):
        return [
            {
                "path": "",
                "message": "params must be a JSON object",
                "expected": 'type "object"',
                "value": clip(params),
            }
        ]
    return validator_for(tool.input_schema).problems(params)
