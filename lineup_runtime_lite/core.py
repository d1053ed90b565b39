"""The runtime's core, on one asyncio loop: route calls, drive activations, deliver to
workers, and keep every fact in SQLite before any side effect (SPEC 5.2, 5.6)."""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import sqlite3
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lineup_runtime_lite import faults, pomodoro
from lineup_runtime_lite.clock import Clock
from lineup_runtime_lite.install import Tool, installed_manifest, load_tools
from lineup_runtime_lite.messages import (
    FINAL_STAGES,
    error_body,
    fingerprint,
    latest_message,
    make_message,
    record,
    reject,
)
from lineup_runtime_lite.sessiondata import SubscriptionHub, read, replace
from lineup_runtime_lite.store import Store
from lineup_runtime_lite.validation import validator_for
from lineup_runtime_lite.workers import Worker, WorkerError
from lineup_sdk.context import Snapshot
from lineup_sdk.errors import LineupError

__all__ = ["Core"]

WORKER_START_TRIES = 3
#: Tries of a background step (a delivery-pump step, a Host intent) before it is left to
#: the next reconcile (a new call, a retry, a clock tick, or recovery on open).
STEP_TRIES = 5

log = logging.getLogger("lineup.runtime")


def _new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(8)}"


@dataclass
class _Waiter:
    fut: asyncio.Future[dict[str, Any]]


class Core:
    """All runtime state transitions. Methods run on the runtime's event loop only."""

    def __init__(
        self,
        store: Store,
        clock: Clock,
        apps_dir: Path,
        logs_dir: Path,
        *,
        activation_timeout_s: float,
        host_intent: Callable[[dict[str, Any]], Awaitable[None]] | None,
        check_app: Callable[[str, str], None],
    ) -> None:
        self.store = store
        self.clock = clock
        self.apps_dir, self.logs_dir = apps_dir, logs_dir
        self.activation_timeout_ms = int(activation_timeout_s * 1000)
        self.host_intent = host_intent
        self.check_app = check_app
        self.registry: dict[str, Tool] = {}
        self._versions: dict[tuple[str, str], dict[str, Tool]] = {}
        self.workers: dict[tuple[str, str], Worker] = {}
        self._worker_locks: dict[tuple[str, str], asyncio.Lock] = {}
        self._caps: dict[str, tuple[str, str, str]] = {}
        self._session_caps: dict[str, str] = {}
        self._finals: dict[str, list[asyncio.Future[dict[str, Any]]]] = {}
        self._pumps: dict[str, asyncio.Task[None]] = {}
        self._host_relay: asyncio.Task[None] | None = None
        self._driving: set[str] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self.subs = SubscriptionHub()
        self.load_registry()

    # -- plumbing ------------------------------------------------------------------------
    def now(self) -> int:
        return self.clock.now_ms()

    def spawn(self, coro: Awaitable[Any]) -> asyncio.Task[Any]:
        task: asyncio.Task[Any] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            # A reconcile step failed after its commit: the saved facts stay pending and the
            # next reconcile re-drives them; whoever waits on a final that did commit is
            # answered now.
            log.warning("background step failed: %s: %s", type(exc).__name__, exc)
            self._wake_waiters()

    async def idle(self) -> None:
        """Wait until no background work is pending."""
        while self._tasks:
            await asyncio.wait(list(self._tasks))

    def load_registry(self) -> None:
        """Project installed manifests into the Registry."""
        self.registry.clear()
        for row in self.store.all("SELECT scope, version FROM apps ORDER BY scope"):
            for tool in self.tools_of(row["scope"], row["version"]).values():
                self.registry[tool.method] = tool

    def tools_of(self, scope: str, version: str) -> dict[str, Tool]:
        key = (scope, version)
        if key not in self._versions:
            manifest = installed_manifest(self.store, scope, version)
            self._versions[key] = {t.method: t for t in load_tools(scope, version, manifest)}
        return self._versions[key]

    def _finished(self, msg: dict[str, Any]) -> None:
        for fut in self._finals.pop(msg["call_id"], []):
            if not fut.done():
                fut.set_result(msg)

    def _wait_final(self, call_id: str) -> asyncio.Future[dict[str, Any]]:
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._finals.setdefault(call_id, []).append(fut)
        return fut

    def _wake_waiters(self) -> None:
        """Answer every in-process waiter whose call already has a committed final (its
        publication was lost to a failure between COMMIT and the next step)."""
        for call_id in list(self._finals):
            msg = latest_message(self.store.db, call_id)
            if msg is not None and msg["stage"] in FINAL_STAGES:
                self._finished(msg)

    def _publish(self, msgs: list[dict[str, Any]]) -> None:
        """After COMMIT: wake whoever waits on a final message."""
        for msg in msgs:
            if msg["stage"] in ("result", "error"):
                self._finished(msg)

    # -- Agent calls ---------------------------------------------------------------------
    async def call(
        self, call_id: str, conversation_id: str, method: str, params: Any
    ) -> dict[str, Any]:
        """Accept one Agent call (SPEC 5.2) and return the message for this step."""
        now = self.now()
        tool = self.registry.get(method)
        scope = tool.scope if tool else (method.split(".")[0] if isinstance(method, str) else "")
        if not isinstance(call_id, str) or not call_id or len(call_id) > 200:
            return reject(
                str(call_id),
                scope,
                now,
                error_body(
                    "invalid_params", "call_id must be a non-empty string of at most 200 characters"
                ),
            )
        fp = fingerprint(conversation_id, method, params)
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
        if not isinstance(params, dict):
            problems = [
                {
                    "path": "",
                    "message": "params must be a JSON object",
                    "expected": 'type "object"',
                    "value": json.dumps(params)[:120] if _jsonable(params) else repr(params)[:120],
                }
            ]
        else:
            problems = validator_for(tool.input_schema).problems(params)
        if problems:
            return reject(
                call_id,
                tool.scope,
                now,
                error_body(
                    "invalid_params",
                    f"params of {method} do not match its input schema",
                    details=problems,
                ),
            )
        if not isinstance(conversation_id, str) or not conversation_id:
            return reject(
                call_id,
                tool.scope,
                now,
                error_body("invalid_params", "conversation_id must be a non-empty string"),
            )
        if tool.delivery == "runtime":
            return await pomodoro.accept(self, tool, call_id, conversation_id, params, fp)
        if tool.activation == "activation_not_required":
            return await self._accept_running_only(tool, call_id, conversation_id, params, fp)
        return await self._accept_activating(tool, call_id, conversation_id, params, fp)

    def insert_call(
        self,
        db: sqlite3.Connection,
        tool: Tool,
        call_id: str,
        conversation_id: str,
        params: Any,
        fp: str,
        *,
        session_id: str | None,
        activation_id: str | None,
        state: str = "queued",
    ) -> None:
        seq = None
        if session_id is not None:
            row = db.execute(
                "SELECT next_seq FROM app_sessions WHERE app_session_id=?", (session_id,)
            ).fetchone()
            seq = int(row[0])
            db.execute(
                "UPDATE app_sessions SET next_seq=next_seq+1 WHERE app_session_id=?", (session_id,)
            )
        db.execute(
            "INSERT INTO calls (call_id, fingerprint, conversation_id, scope, method, params, "
            "app_session_id, activation_id, seq, state, created_ms) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            (
                call_id,
                fp,
                conversation_id,
                tool.scope,
                tool.method,
                json.dumps(params, sort_keys=True, separators=(",", ":")),
                session_id,
                activation_id,
                seq,
                state,
                self.now(),
            ),
        )

    def session_of(self, conversation_id: str, scope: str) -> sqlite3.Row | None:
        return self.store.one(
            "SELECT * FROM app_sessions WHERE conversation_id=? AND scope=?",
            (conversation_id, scope),
        )

    def current_activation(self, session_id: str) -> sqlite3.Row | None:
        return self.store.one(
            "SELECT * FROM activations WHERE app_session_id=? ORDER BY created_ms DESC, rowid DESC LIMIT 1",
            (session_id,),
        )

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
                self.insert_call(
                    db,
                    tool,
                    call_id,
                    conversation_id,
                    params,
                    fp,
                    session_id=None,
                    activation_id=None,
                )
                record(db, msg)
            return msg
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
                "activation_id": act["activation_id"],
            }
            self._pumps[sid] = self.spawn(self._send_then_pump(session, pinned, call, worker))
        else:
            self.kick(sid)
        return await fut

    async def _send_then_pump(
        self, session: sqlite3.Row, tool: Tool, call: dict[str, Any], worker: Worker
    ) -> None:
        try:
            await self._send(session, tool, call, worker)
        except Exception as exc:  # the pump ends a call left `delivered` (at most once)
            log.warning("delivery step failed: %s: %s", type(exc).__name__, exc)
        await self._pump(session["app_session_id"])

    def ensure_session(self, db: sqlite3.Connection, conversation_id: str, scope: str) -> str:
        row = db.execute(
            "SELECT app_session_id FROM app_sessions WHERE conversation_id=? AND scope=?",
            (conversation_id, scope),
        ).fetchone()
        if row is not None:
            return str(row[0])
        version = db.execute("SELECT version FROM apps WHERE scope=?", (scope,)).fetchone()[0]
        session_id = _new_id("ses")
        db.execute(
            "INSERT INTO app_sessions (app_session_id, conversation_id, scope, version, created_ms) "
            "VALUES (?,?,?,?,?)",
            (session_id, conversation_id, scope, version, self.now()),
        )
        return session_id

    def new_activation(
        self, db: sqlite3.Connection, session_id: str, trigger: str, foreground: bool
    ) -> str:
        act_id = _new_id("inst")
        db.execute(
            "INSERT INTO activations (activation_id, app_session_id, trigger_call_id, state, "
            "requires_foreground, deadline_ms, created_ms) VALUES (?,?,?,?,?,?,?)",
            (
                act_id,
                session_id,
                trigger,
                "starting",
                int(foreground),
                self.now() + self.activation_timeout_ms,
                self.now(),
            ),
        )
        return act_id

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
        started = False
        with self.store.transaction() as db:
            session_id = self.ensure_session(db, conversation_id, tool.scope)
            if act is not None and act["state"] == "starting":
                act_id = act["activation_id"]
                if needs_fg and not act["requires_foreground"]:
                    db.execute(
                        "UPDATE activations SET requires_foreground=1 WHERE activation_id=?",
                        (act_id,),
                    )
                    started = True  # the Host must now be asked to show it
                stage_state = "queued"
            else:
                act_id = self.new_activation(db, session_id, call_id, needs_fg)
                stage_state, started = "starting", True
            self.insert_call(
                db,
                tool,
                call_id,
                conversation_id,
                params,
                fp,
                session_id=session_id,
                activation_id=act_id,
            )
            msg = make_message(call_id, tool.scope, "accepted", self.now(), activation=stage_state)
            record(db, msg)
            intent = (
                self._host_intent_row(db, act_id, conversation_id, tool.scope)
                if started and (needs_fg)
                else None
            )
        if started:
            self.spawn(self.drive_activation(act_id))
        if intent is not None:
            self.kick_host()
        return msg

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
            "INSERT OR IGNORE INTO host_intents (dedup_key, body) VALUES (?, ?)",
            (f"show_surface:{act_id}", json.dumps(body, sort_keys=True)),
        )
        return body

    def kick_host(self) -> None:
        """Make sure the Host relay is sending the undelivered intents."""
        if self.host_intent is None:
            return
        if self._host_relay is None or self._host_relay.done():
            self._host_relay = self.spawn(self._relay_host())

    async def _relay_host(self) -> None:
        """Send undelivered Host intents oldest first, after the commits that decided them;
        each is marked delivered only after the Host acted, so a crash in between sends it
        again with the same dedup key. A failing Host is retried with backoff, then left
        for the next kick (a new intent, a clock tick, a retried call, or recovery)."""
        assert self.host_intent is not None
        failures = 0
        while True:
            row = self.store.one(
                "SELECT id, body FROM host_intents WHERE delivered=0 ORDER BY id LIMIT 1"
            )
            if row is None:
                return
            try:
                faults.hit("host.reconcile")
                await self.host_intent(json.loads(row["body"]))
                faults.hit("host.after_intent")
            except Exception as exc:
                failures += 1
                if failures >= STEP_TRIES:
                    log.warning("the Host did not take intent %s: %s", row["id"], exc)
                    return
                await asyncio.sleep(0.01 * (2**failures))
                continue
            failures = 0
            with self.store.transaction() as db:
                db.execute("UPDATE host_intents SET delivered=1 WHERE id=?", (row["id"],))

    # -- activations ---------------------------------------------------------------------
    async def ensure_worker(self, scope: str, version: str) -> Worker:
        """The running worker of an app version, started (with retries) if needed."""
        key = (scope, version)
        lock = self._worker_locks.setdefault(key, asyncio.Lock())
        async with lock:
            worker = self.workers.get(key)
            if worker is not None and not worker.dead:
                return worker
            self.check_app(scope, version)
            manifest = installed_manifest(self.store, scope, version)
            row = self.store.one(
                "SELECT dir FROM app_versions WHERE scope=? AND version=?", (scope, version)
            )
            assert row is not None
            last: WorkerError | None = None
            for _ in range(WORKER_START_TRIES):
                worker = Worker(
                    scope,
                    version,
                    Path(row["dir"]),
                    manifest["app"]["entry"],
                    self.logs_dir / f"{scope}-{version}.log",
                    self._session_request,
                )
                try:
                    methods = await worker.start()
                except WorkerError as exc:
                    last = exc
                    continue
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
        self._driving.add(act_id)
        try:
            await self._drive_activation(act_id)
        finally:
            self._driving.discard(act_id)

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
        if any(t.delivery == "miniapp_sdk" for t in tools.values()):
            try:
                await self.ensure_worker(session["scope"], session["version"])
            except WorkerError as exc:
                reason = "method_mismatch" if exc.kind == "method_mismatch" else "worker_failed"
                await self.end_activation(act_id, "failed", reason)
                return
            except LineupError:
                await self.end_activation(act_id, "failed", "worker_failed")
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

    def _version_of(self, db: sqlite3.Connection, session_id: str) -> str:
        return str(
            db.execute(
                "SELECT version FROM app_sessions WHERE app_session_id=?", (session_id,)
            ).fetchone()[0]
        )

    async def end_activation(self, act_id: str, state: str, reason: str) -> bool:
        """Fail or cancel a `starting` activation; every waiting call gets its one answer.

        Returns False (writing nothing) when the activation already left `starting`.
        """
        with self.store.transaction() as db:
            msgs = self.end_activation_in(db, act_id, state, reason)
        if msgs is None:
            return False
        self._publish(msgs)
        return True

    def end_activation_in(
        self, db: sqlite3.Connection, act_id: str, state: str, reason: str
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
                        details={"reason": reason},
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

    # -- delivery ------------------------------------------------------------------------
    def kick(self, session_id: str) -> None:
        """Make sure the session's serial delivery pump is running."""
        task = self._pumps.get(session_id)
        if task is None or task.done():
            self._pumps[session_id] = self.spawn(self._pump(session_id))

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
        await self._send(
            session, tool, {**dict(call), "params": json.loads(call["params"])}, worker
        )

    async def _send(
        self, session: sqlite3.Row, tool: Tool, call: dict[str, Any], worker: Worker
    ) -> None:
        """Send a call already committed as `delivered`; commit its one final answer."""
        faults.hit("deliver.before_send")
        ctx = {
            "call_id": call["call_id"],
            "app_scope": session["scope"],
            "app_session_id": session["app_session_id"],
            "conversation_id": session["conversation_id"],
            "cap": self._cap_for(session),
        }
        params = call["params"]
        try:
            fut = worker.send_delivery(tool.method, params, ctx)
            # a timer on the loop instead of wait_for(shield(...)): no extra tasks per call
            timer = asyncio.get_running_loop().call_later(tool.timeout_s, _expire, fut)
            try:
                reply = await fut
            finally:
                timer.cancel()
        except TimeoutError:
            worker.forget(fut)
            await self._finish(
                call,
                "error",
                error=error_body(
                    "handler_timeout", f"{tool.method} did not answer within {tool.timeout_s:g} s"
                ),
            )
            return
        except WorkerError as exc:
            code = "worker_protocol_error" if exc.kind == "protocol" else "delivery_interrupted"
            await self._finish(call, "error", error=error_body(code, f"{tool.method}: {exc}"))
            return
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
    def _cap_for(self, session: sqlite3.Row) -> str:
        sid = session["app_session_id"]
        cap = self._session_caps.get(sid)
        if cap is None:
            cap = secrets.token_urlsafe(24)
            self._session_caps[sid] = cap
            self._caps[cap] = (session["scope"], sid, session["conversation_id"])
        return cap

    async def _session_request(self, worker: Worker, msg: dict[str, Any]) -> dict[str, Any]:
        bound = self._caps.get(str(msg.get("cap")))
        if bound is None or bound[0] != worker.scope:
            return {
                "ok": False,
                "error": {"code": "worker_protocol_error", "message": "unknown session capability"},
            }
        scope, sid, conv = bound
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
        if self.store.one("SELECT 1 FROM host_intents WHERE delivered=0 LIMIT 1") is not None:
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
            if self.store.one("SELECT 1 FROM host_intents WHERE delivered=0 LIMIT 1"):
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
        for worker in list(self.workers.values()):
            await worker.kill()
        self.workers.clear()
        pending = [t for t in self._tasks if t is not asyncio.current_task()]
        for task in pending:
            task.cancel()
        if pending:  # cancelled background steps leave their facts for the next open
            await asyncio.wait(pending, timeout=5)


def _expire(fut: asyncio.Future[Any]) -> None:
    if not fut.done():
        fut.set_exception(TimeoutError())


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True
