"""Activations and the Host: worker start-up, readiness, failure, Host intents and events."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
from pathlib import Path
from typing import Any

from lineup_runtime_lite import faults, pomodoro
from lineup_runtime_lite.install import installed_manifest
from lineup_runtime_lite.messages import (
    error_body,
    make_message,
    record,
)
from lineup_runtime_lite.state import STEP_TRIES, WORKER_START_TRIES, CoreState, log
from lineup_runtime_lite.workers import Worker, WorkerError
from lineup_sdk.errors import LineupError

__all__ = ["ActivationPart"]


class ActivationPart(CoreState):
    """Drive `starting` activations to `ready`, `failed` or `cancelled` (SPEC 5.2, 5.7)."""

    # -- Host reconcile ------------------------------------------------------------------
    def _host_intent_row(
        self, db: sqlite3.Connection, act_id: str, conversation_id: str, scope: str
    ) -> dict[str, Any]:
        body = {
            "intent": "show_surface",
            "instance": act_id,
            "conversation": conversation_id,
            "scope": scope,
        }
        db.execute(
            "INSERT OR IGNORE INTO host_intents (dedup_key, body, instance) VALUES (?, ?, ?)",
            (f"show_surface:{act_id}", json.dumps(body, sort_keys=True), act_id),
        )
        return body

    def kick_host(self) -> None:
        """Make sure the Host relay is sending the undelivered intents."""
        if self.host_intent is None:
            return
        if self._host_relay is None or self._host_relay.done():
            self._host_wake.clear()
            self._host_relay = self.spawn(self._relay_host())
        else:
            self._host_wake.set()  # a new intent need not wait out another one's backoff

    def _host_heads(self) -> list[sqlite3.Row]:
        """The lowest pending intent of each instance, oldest first, with its activation's
        state (an intent waits only for its own instance's earlier ones, SPEC 5.7)."""
        return self.store.all(
            "SELECT h.id, h.instance, h.body, a.state AS act_state FROM host_intents h "
            "LEFT JOIN activations a ON a.activation_id = h.instance "
            "WHERE h.id IN (SELECT MIN(id) FROM host_intents WHERE delivered=0 AND superseded=0 "
            "GROUP BY instance) ORDER BY h.id"
        )

    async def _relay_host(self) -> None:
        """Send undelivered Host intents, oldest first but ordered per instance only:
        an intent the Host refuses is retried with backoff (then left for the next kick: a
        new intent, a clock tick, a retried call, or recovery) while other instances'
        intents go on. Each is marked delivered only after the Host acted, so a crash in
        between sends it again with the same dedup key. An intent whose activation has
        ended is superseded (marked so, never sent); `end_activation_in` marks it in the
        transaction that ends the activation, this check covers older databases."""
        assert self.host_intent is not None
        loop = asyncio.get_running_loop()
        failures: dict[str, int] = {}
        retry_at: dict[str, float] = {}
        while True:
            heads = [h for h in self._host_heads() if failures.get(h["instance"], 0) < STEP_TRIES]
            if not heads:
                return
            ended = [h["id"] for h in heads if h["act_state"] in ("failed", "cancelled")]
            if ended:
                with self.store.transaction() as db:
                    db.executemany(
                        "UPDATE host_intents SET superseded=1 WHERE id=? AND delivered=0",
                        [(i,) for i in ended],
                    )
                continue
            now = loop.time()
            due = [h for h in heads if retry_at.get(h["instance"], 0.0) <= now]
            if not due:
                self._host_wake.clear()
                wait = min(retry_at[h["instance"]] for h in heads) - now
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._host_wake.wait(), wait)
                continue
            row = due[0]
            try:
                faults.hit("host.reconcile")
                await self.host_intent(json.loads(row["body"]))
                faults.hit("host.after_intent")
            except Exception as exc:
                tries = failures[row["instance"]] = failures.get(row["instance"], 0) + 1
                if tries >= STEP_TRIES:
                    log.warning("the Host did not take intent %s: %s", row["id"], exc)
                retry_at[row["instance"]] = loop.time() + 0.01 * (2**tries)
                continue
            failures.pop(row["instance"], None)
            retry_at.pop(row["instance"], None)
            with self.store.transaction() as db:
                db.execute("UPDATE host_intents SET delivered=1 WHERE id=?", (row["id"],))

    # -- activations ---------------------------------------------------------------------
    async def ensure_worker(self, scope: str, version: str) -> Worker:
        """The running worker of an app version, started (with retries) if needed.

        Raises:
            WorkerError: the worker cannot start (`sandbox` when the mode refuses).
            LineupError: the installed app fails its checks (`install_tampered`, trust).
        """
        key = (scope, version)
        lock = self._worker_locks.setdefault(key, asyncio.Lock())
        async with lock:
            worker = self.workers.get(key)
            if worker is not None and not worker.dead:
                return worker
            if worker is not None:  # a recycled worker: its whole tree goes first
                await worker.kill()
                del self.workers[key]
            self.check_app(scope, version)
            manifest = installed_manifest(self.store, scope, version)
            row = self.store.one(
                "SELECT dir FROM app_versions WHERE scope=? AND version=?", (scope, version)
            )
            assert row is not None
            network = bool(manifest["app"].get("permissions", {}).get("network"))
            last: WorkerError | None = None
            for _ in range(WORKER_START_TRIES):
                worker = Worker(
                    scope,
                    version,
                    Path(row["dir"]),
                    manifest["app"]["entry"],
                    self.logs_dir / f"{scope}-{version}.log",
                    self._session_request,
                    options=self.worker_options,
                    network=network,
                )
                try:
                    methods = await worker.start()
                except WorkerError as exc:
                    if exc.kind == "sandbox":
                        raise  # the platform will not change on a retry
                    last = exc
                    continue
                except asyncio.CancelledError:  # nobody waits for it: no orphan process
                    await asyncio.shield(worker.kill())
                    raise
                if worker.sandbox is not None:
                    self.sandbox_report = worker.sandbox
                expected = sorted(
                    t.method
                    for t in self.tools_of(scope, version).values()
                    if t.delivery == "miniapp_sdk"
                )
                if methods != expected:
                    await worker.kill()
                    raise WorkerError(
                        "method_mismatch",
                        f"the worker serves {methods}, the manifest declares {expected}",
                    )
                self.workers[key] = worker
                return worker
            assert last is not None
            raise last

    async def drive_activation(self, act_id: str) -> None:
        """Reconcile a `starting` activation: bring up the worker, then check readiness.

        One driver per activation at a time (a retry or a tick may ask again)."""
        if act_id in self._driving:
            return
        task = asyncio.current_task()
        assert task is not None
        self._driving[act_id] = task
        try:
            await self._drive_activation(act_id)
        finally:
            if self._driving.get(act_id) is task:
                del self._driving[act_id]

    def _stop_driving(self, act_id: str) -> None:
        """An activation that ended needs no worker start any more: stop its driver (a
        worker still starting is killed), so `settle()` does not wait out its retries."""
        task = self._driving.pop(act_id, None)
        if task is not None and task is not asyncio.current_task() and not task.done():
            task.cancel()

    async def _drive_activation(self, act_id: str) -> None:
        act = self.store.one("SELECT * FROM activations WHERE activation_id=?", (act_id,))
        if act is None or act["state"] != "starting":
            return
        session = self.store.one(
            "SELECT * FROM app_sessions WHERE app_session_id=?", (act["app_session_id"],)
        )
        assert session is not None
        tools = self.tools_of(session["scope"], session["version"])
        if act["worker_ready"]:
            await self.maybe_ready(act_id)
            return
        try:  # at every activation: the key, its scopes and `allow` now; nothing planted
            self.check_trust(session["scope"], session["version"])
        except LineupError as exc:
            reason = "worker_failed" if exc.code == "install_tampered" else "app_untrusted"
            await self.end_activation(act_id, "failed", reason, cause=exc.code)
            return
        if any(t.delivery == "miniapp_sdk" for t in tools.values()):
            try:
                await self.ensure_worker(session["scope"], session["version"])
            except WorkerError as exc:
                reason = "method_mismatch" if exc.kind == "method_mismatch" else "worker_failed"
                cause = "sandbox_unavailable" if exc.kind == "sandbox" else None
                await self.end_activation(act_id, "failed", reason, cause=cause)
                return
            except LineupError as exc:
                await self.end_activation(act_id, "failed", "worker_failed", cause=exc.code)
                return
        with self.store.transaction() as db:
            db.execute(
                "UPDATE activations SET worker_ready=1 WHERE activation_id=? AND state='starting'",
                (act_id,),
            )
        await self.maybe_ready(act_id)

    async def maybe_ready(self, act_id: str) -> None:
        """Commit `ready` once the worker is up and, if required, the Host confirmed."""
        msgs: list[dict[str, Any]] = []
        with self.store.transaction() as db:
            act = db.execute(
                "SELECT * FROM activations WHERE activation_id=?", (act_id,)
            ).fetchone()
            if act is None or act["state"] != "starting" or not act["worker_ready"]:
                return
            if act["requires_foreground"] and not act["foreground"]:
                return
            db.execute(
                "UPDATE activations SET state='ready', ended_ms=? WHERE activation_id=? AND state='starting'",
                (self.now(), act_id),
            )
            trigger = db.execute(
                "SELECT * FROM calls WHERE call_id=?", (act["trigger_call_id"],)
            ).fetchone()
            if trigger is not None and trigger["state"] == "queued":
                tool = self.tools_of(
                    trigger["scope"], self._version_of(db, act["app_session_id"])
                ).get(trigger["method"])
                if tool is not None and tool.delivery == "runtime":
                    msgs.extend(pomodoro.on_ready(self, db, tool, trigger))
                else:
                    msg = make_message(
                        trigger["call_id"], trigger["scope"], "activation_ready", self.now()
                    )
                    record(db, msg)
                    msgs.append(msg)
        self._publish(msgs)
        self.kick(act["app_session_id"])

    async def end_activation(
        self, act_id: str, state: str, reason: str, *, cause: str | None = None
    ) -> bool:
        """Fail or cancel a `starting` activation; every waiting call gets its one answer.

        `cause` is the stable code behind a failure (say `install_tampered`), given to the
        waiting calls in their error details. Returns False (writing nothing) when the
        activation already left `starting`.
        """
        with self.store.transaction() as db:
            msgs = self.end_activation_in(db, act_id, state, reason, cause=cause)
        if msgs is None:
            return False
        self._stop_driving(act_id)
        self._publish(msgs)
        return True

    def end_activation_in(
        self,
        db: sqlite3.Connection,
        act_id: str,
        state: str,
        reason: str,
        *,
        cause: str | None = None,
    ) -> list[dict[str, Any]] | None:
        """`end_activation` inside the caller's transaction; None when it lost the race."""
        msgs: list[dict[str, Any]] = []
        stage = "activation_failed" if state == "failed" else "activation_cancelled"
        cur = db.execute(
            "UPDATE activations SET state=?, reason=?, ended_ms=? WHERE activation_id=? AND state='starting'",
            (state, reason, self.now(), act_id),
        )
        if cur.rowcount == 0:
            return None
        # its Host intents are superseded: the Host is never told to show an ended instance
        db.execute(
            "UPDATE host_intents SET superseded=1 WHERE instance=? AND delivered=0", (act_id,)
        )
        act = db.execute("SELECT * FROM activations WHERE activation_id=?", (act_id,)).fetchone()
        version = self._version_of(db, act["app_session_id"])
        waiting = db.execute(
            "SELECT * FROM calls WHERE activation_id=? AND state='queued' ORDER BY seq", (act_id,)
        ).fetchall()
        for call in waiting:
            tool = self.tools_of(call["scope"], version).get(call["method"])
            if call["call_id"] == act["trigger_call_id"]:
                progress = make_message(
                    call["call_id"], call["scope"], stage, self.now(), reason=reason
                )
                record(db, progress)
                msgs.append(progress)
            if tool is not None and tool.delivery == "runtime" and tool.long_running:
                final = make_message(
                    call["call_id"],
                    call["scope"],
                    "result",
                    self.now(),
                    result={"status": "not_started", "reason": reason},
                )
            else:
                final = make_message(
                    call["call_id"],
                    call["scope"],
                    "error",
                    self.now(),
                    error=error_body(
                        stage,
                        f"the app's activation was {state} ({reason}); the call did not run",
                        details={"reason": reason, **({"cause": cause} if cause else {})},
                    ),
                )
            record(db, final)
            msgs.append(final)
        return msgs

    # -- Host events ---------------------------------------------------------------------
    async def host_event(self, event: str, instance: str, conversation_id: str, scope: str) -> bool:
        """Apply one Host lifecycle event; returns whether it changed anything.

        A stale confirmation (the instance is no longer starting) or a foreign one (it names
        another conversation or scope) is ignored.
        """
        act = self.store.one(
            "SELECT a.*, s.conversation_id, s.scope FROM activations a JOIN app_sessions s "
            "ON s.app_session_id = a.app_session_id WHERE a.activation_id=?",
            (instance,),
        )
        if act is None or act["conversation_id"] != conversation_id or act["scope"] != scope:
            return False
        if event in ("preload", "surface_loaded"):
            return False  # loading is never confirmation
        if act["state"] != "starting":
            return False
        if event == "foreground_confirmed":
            with self.store.transaction() as db:
                db.execute(
                    "UPDATE activations SET foreground=1 WHERE activation_id=? AND state='starting'",
                    (instance,),
                )
            await self.maybe_ready(instance)
            return True
        if event == "activation_failed":
            return await self.end_activation(instance, "failed", "host_failed")
        if event == "user_left":
            return await self.end_activation(instance, "cancelled", "user_left")
        raise LineupError("scenario_invalid", f"unknown Host event {event!r}")
