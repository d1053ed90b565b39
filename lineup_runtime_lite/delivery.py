"""Delivery: the per-session serial pump, at-most-once sends to workers, session data."""

from __future__ import annotations

import asyncio
import json
import secrets
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lineup_runtime_lite import faults
from lineup_runtime_lite.activation import ActivationPart
from lineup_runtime_lite.install import Tool
from lineup_runtime_lite.messages import (
    error_body,
    make_message,
    record,
)
from lineup_runtime_lite.sessiondata import read, replace
from lineup_runtime_lite.state import STEP_TRIES, log
from lineup_runtime_lite.validation import validator_for
from lineup_runtime_lite.workers import Worker, WorkerError
from lineup_sdk.context import Snapshot
from lineup_sdk.errors import LineupError

__all__ = ["DeliveryPart"]


class DeliveryPart(ActivationPart):
    """Deliver queued calls to workers one at a time per session; answer once."""

    # -- delivery ------------------------------------------------------------------------
    def kick(self, session_id: str) -> None:
        """Make sure the session's serial delivery pump is running."""
        task = self._pumps.get(session_id)
        if task is None or task.done():
            self.set_pump(session_id, self.spawn(self._pump(session_id)))

    def set_pump(self, session_id: str, task: asyncio.Task[Any]) -> None:
        """Record the session's running pump; its entry goes when it ends (an idle session
        holds no memory here, however many conversations there were)."""
        self._pumps[session_id] = task

        def done(t: asyncio.Task[Any]) -> None:
            if self._pumps.get(session_id) is t:
                del self._pumps[session_id]

        task.add_done_callback(done)

    async def _pump(self, session_id: str) -> None:
        """Deliver the session's queue in arrival order, one call at a time.

        A step that fails (a commit, a reconcile step) is retried from the saved facts; after
        `STEP_TRIES` failures in a row the facts wait for the next kick or recovery.
        """
        failures = 0
        while True:
            try:
                if not await self._pump_step(session_id):
                    return
            except Exception:
                failures += 1
                self._wake_waiters()
                if failures >= STEP_TRIES:
                    raise
                await asyncio.sleep(0.01 * (2**failures))
                continue
            failures = 0

    async def _pump_step(self, session_id: str) -> bool:
        """One delivery; False when the queue is empty or its head waits on an activation."""
        # Deliveries to a session are serial, so a call still `delivered` here was cut off
        # by a failed step: at most once, so it ends with `delivery_interrupted`.
        for call in self.store.all(
            "SELECT * FROM calls WHERE app_session_id=? AND state='delivered' ORDER BY seq",
            (session_id,),
        ):
            await self._interrupt_delivery(call)
        row = self.store.one(
            "SELECT c.*, a.state AS act_state FROM calls c JOIN activations a "
            "ON a.activation_id = c.activation_id WHERE c.app_session_id=? AND c.state='queued' "
            "ORDER BY c.seq LIMIT 1",
            (session_id,),
        )
        if row is None or row["act_state"] != "ready":
            return False
        session = self.store.one("SELECT * FROM app_sessions WHERE app_session_id=?", (session_id,))
        assert session is not None
        tool = self.tools_of(session["scope"], session["version"]).get(row["method"])
        if tool is None or tool.delivery != "miniapp_sdk":
            await self._finish(
                row,
                "error",
                error=error_body(
                    "handler_failed", f"{row['method']} is not served by this app version"
                ),
            )
            return True
        await self._deliver(session, tool, row)
        return True

    async def _interrupt_delivery(self, call: sqlite3.Row) -> None:
        await self._finish(
            call,
            "error",
            error=error_body(
                "delivery_interrupted",
                f"{call['method']} was delivered but the runtime stopped before it answered",
            ),
        )

    async def _deliver(self, session: sqlite3.Row, tool: Tool, call: sqlite3.Row) -> None:
        try:
            worker = await self.ensure_worker(session["scope"], session["version"])
        except (WorkerError, LineupError):
            act_id = call["activation_id"]
            with self.store.transaction() as db:  # the app cannot run any more: re-open the gate
                db.execute(
                    "UPDATE activations SET state='starting' WHERE activation_id=? AND state='ready'",
                    (act_id,),
                )
            await self.end_activation(act_id, "failed", "worker_failed")
            return
        with self.store.transaction() as db:
            cur = db.execute(
                "UPDATE calls SET state='delivered' WHERE call_id=? AND state='queued'",
                (call["call_id"],),
            )
            if cur.rowcount == 0:
                return
        # the stored params text goes to the worker as is: never decoded and re-encoded on
        # the loop (a 1 MiB array would cost other sessions tens of milliseconds)
        await self._send(session, tool, {**dict(call), "params_json": call["params"]}, worker)

    async def _send(
        self, session: sqlite3.Row, tool: Tool, call: dict[str, Any], worker: Worker
    ) -> None:
        """Send a call already committed as `delivered`; commit its one final answer."""
        faults.hit("deliver.before_send")
        cap = secrets.token_urlsafe(24)
        ctx = {
            "call_id": call["call_id"],
            "app_scope": session["scope"],
            "app_session_id": session["app_session_id"],
            "conversation_id": session["conversation_id"],
            "cap": cap,
            "timeout_s": tool.timeout_s,
        }
        params_json = call.get("params_json")
        if params_json is None:
            params_json = json.dumps(call["params"], sort_keys=True, separators=(",", ":"))
        rid: int | None = None
        try:
            rid, fut = worker.send_delivery(tool.method, params_json, ctx)
            # the capability names this delivery's App session only, and only until it ends
            self._caps[cap] = _Grant(
                session["scope"], session["app_session_id"], session["conversation_id"], worker, rid
            )
            # a timer on the loop instead of wait_for(shield(...)): no extra tasks per call
            timer = asyncio.get_running_loop().call_later(tool.timeout_s, _expire, fut)
            try:
                reply = await fut
            finally:
                timer.cancel()
        except TimeoutError:
            self._caps.pop(cap, None)
            if rid is not None:
                worker.forget(rid)
            await self._finish(
                call,
                "error",
                error=error_body(
                    "handler_timeout", f"{tool.method} did not answer within {tool.timeout_s:g} s"
                ),
            )
            return
        except WorkerError as exc:
            self._caps.pop(cap, None)
            code = "worker_protocol_error" if exc.kind == "protocol" else "delivery_interrupted"
            await self._finish(call, "error", error=error_body(code, f"{tool.method}: {exc}"))
            return
        self._caps.pop(cap, None)
        faults.hit("deliver.after_reply")
        if reply.get("ok"):
            result = reply.get("result")
            problems = validator_for(tool.result_schema).problems(result)
            if problems:
                await self._finish(
                    call,
                    "error",
                    error=error_body(
                        "handler_result_invalid",
                        f"{tool.method} returned a result that does not match its result schema",
                        details=problems,
                    ),
                )
            else:
                await self._finish(call, "result", result=result)
            return
        err = reply.get("error") if isinstance(reply.get("error"), dict) else {}
        assert isinstance(err, dict)
        code = str(err.get("code", "handler_failed"))
        if not (
            code.startswith("app.")
            or code in ("handler_failed", "invalid_params", "handler_result_invalid")
            or code.startswith("session_data_")
        ):
            code = "handler_failed"
        body = error_body(code, str(err.get("message", ""))[:2000], details=err.get("details"))
        await self._finish(call, "error", error=body)

    async def _finish(
        self,
        call: sqlite3.Row | Mapping[str, Any],
        stage: str,
        *,
        result: Any = None,
        error: dict[str, Any] | None = None,
    ) -> None:
        msg = make_message(
            call["call_id"], call["scope"], stage, self.now(), result=result, error=error
        )
        with self.store.transaction() as db:
            wrote = record(db, msg)
        if wrote:
            self._publish([msg])

    # -- session data from workers -------------------------------------------------------
    async def _session_request(self, worker: Worker, msg: dict[str, Any]) -> dict[str, Any]:
        grant = self._caps.get(msg["cap"])
        if grant is None or grant.worker is not worker or grant.delivery != msg["d"]:
            # a capability of another delivery, or of one that has ended: the asking
            # delivery ends now, whatever its handler does next
            worker.end_delivery(msg["d"], "the handler used a session capability it does not hold")
            return {
                "ok": False,
                "error": {"code": "worker_protocol_error", "message": "unknown session capability"},
            }
        scope, sid, conv = grant.scope, grant.session_id, grant.conversation_id
        op = msg.get("op")
        try:
            if op == "get":
                snap = read(self.store.db, scope, sid)
            elif op == "replace":
                commits = self.store.commits
                try:
                    with self.store.transaction() as db:
                        snap = replace(
                            db, scope, sid, msg.get("data"), msg.get("expected_revision")
                        )
                except LineupError:
                    raise
                except Exception as exc:
                    if self.store.commits == commits:  # rolled back: nothing changed
                        log.warning("session data commit failed: %s", exc)
                        return {
                            "ok": False,
                            "error": {
                                "code": "handler_failed",
                                "message": "the runtime could not store the session data",
                            },
                        }
                    # committed, then a later step failed: the saved revision stands
                self.subs.changed((scope, conv), snap)
            else:
                return {
                    "ok": False,
                    "error": {"code": "worker_protocol_error", "message": f"unknown op {op!r}"},
                }
        except LineupError as exc:
            return {"ok": False, "error": {"code": exc.code, "message": exc.message}}
        return {"ok": True, "revision": snap.revision, "data": snap.data}

    def surface_get(self, conversation_id: str, scope: str) -> Snapshot:
        session = self.session_of(conversation_id, scope)
        if session is None:
            return Snapshot(None, 0)
        return read(self.store.db, scope, session["app_session_id"])

    async def _send_then_pump(
        self, session: sqlite3.Row, tool: Tool, call: dict[str, Any], worker: Worker
    ) -> None:
        try:
            await self._send(session, tool, call, worker)
        except Exception as exc:  # the pump ends a call left `delivered` (at most once)
            log.warning("delivery step failed: %s: %s", type(exc).__name__, exc)
        await self._pump(session["app_session_id"])


@dataclass(frozen=True, slots=True)
class _Grant:
    """What one session-data capability allows: one delivery's App session."""

    scope: str
    session_id: str
    conversation_id: str
    worker: Worker
    delivery: int


def _expire(fut: asyncio.Future[Any]) -> None:
    if not fut.done():
        fut.set_exception(TimeoutError())
