"""Runtime state shared by the core's parts: stores, registry, waiters, and the row helpers."""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from lineup_runtime_lite.clock import Clock
from lineup_runtime_lite.install import Tool, installed_manifest, load_tools
from lineup_runtime_lite.messages import (
    FINAL_STAGES,
    latest_message,
    make_message,
    record,
)
from lineup_runtime_lite.sessiondata import SubscriptionHub
from lineup_runtime_lite.store import Store
from lineup_runtime_lite.workers import Worker, WorkerOptions

__all__ = ["STEP_TRIES", "WORKER_START_TRIES", "CoreState", "log", "new_id"]

WORKER_START_TRIES = 3
#: Tries of a background step (a delivery-pump step, a Host intent) before it is left to
#: the next reconcile (a new call, a retry, a clock tick, or recovery on open).
STEP_TRIES = 5

log = logging.getLogger("lineup.runtime")


def new_id(prefix: str) -> str:
    """A fresh, unguessable id such as `ses_…` or `inst_…`."""
    return f"{prefix}_{secrets.token_hex(8)}"


class CoreState:
    """What every part of the core shares. Methods run on the runtime's event loop only."""

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
        check_trust: Callable[[str, str], None],
        worker_options: WorkerOptions,
    ) -> None:
        self.store = store
        self.clock = clock
        self.apps_dir, self.logs_dir = apps_dir, logs_dir
        self.activation_timeout_ms = int(activation_timeout_s * 1000)
        self.host_intent = host_intent
        self.check_app = check_app
        self.check_trust = check_trust
        self.worker_options = worker_options
        self.sandbox_report: dict[str, Any] | None = None  # what the last worker enforced
        self.registry: dict[str, Tool] = {}
        self._versions: dict[tuple[str, str], dict[str, Tool]] = {}
        self.workers: dict[tuple[str, str], Worker] = {}
        self._worker_locks: dict[tuple[str, str], asyncio.Lock] = {}
        self._caps: dict[str, Any] = {}  # capability -> its grant (delivery part)
        self._finals: dict[str, list[asyncio.Future[dict[str, Any]]]] = {}
        self._pumps: dict[str, asyncio.Task[None]] = {}
        #: call_id -> the canonical params JSON computed in the caller's thread, for the
        #: one call being accepted (so the loop never re-serializes a huge params value)
        self.canonical_params: dict[str, str] = {}
        self._host_relay: asyncio.Task[None] | None = None
        self._host_wake = asyncio.Event()  # set when a new intent arrives while relaying
        self._driving: dict[str, asyncio.Task[Any]] = {}
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
        registry: dict[str, Tool] = {}
        for row in self.store.all("SELECT scope, version FROM apps ORDER BY scope"):
            for tool in self.tools_of(row["scope"], row["version"]).values():
                registry[tool.method] = tool
        self.registry = registry  # one swap: callers' threads read it without a lock

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
                self.canonical_params.get(call_id)
                or json.dumps(params, sort_keys=True, separators=(",", ":")),
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

    def ensure_session(self, db: sqlite3.Connection, conversation_id: str, scope: str) -> str:
        row = db.execute(
            "SELECT app_session_id FROM app_sessions WHERE conversation_id=? AND scope=?",
            (conversation_id, scope),
        ).fetchone()
        if row is not None:
            return str(row[0])
        version = db.execute("SELECT version FROM apps WHERE scope=?", (scope,)).fetchone()[0]
        session_id = new_id("ses")
        db.execute(
            "INSERT INTO app_sessions (app_session_id, conversation_id, scope, version, created_ms) "
            "VALUES (?,?,?,?,?)",
            (session_id, conversation_id, scope, version, self.now()),
        )
        return session_id

    def new_activation(
        self, db: sqlite3.Connection, session_id: str, trigger: str, foreground: bool
    ) -> str:
        act_id = new_id("inst")
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

    def answer_now_in(
        self,
        db: sqlite3.Connection,
        tool: Tool,
        call_id: str,
        conversation_id: str,
        params: Any,
        fp: str,
        msg: dict[str, Any],
    ) -> dict[str, Any]:
        """Persist a call answered at once (it needs no session) with its final message."""
        self.insert_call(
            db, tool, call_id, conversation_id, params, fp, session_id=None, activation_id=None
        )
        record(db, msg)
        return msg

    def accept_starting_in(
        self,
        db: sqlite3.Connection,
        tool: Tool,
        call_id: str,
        conversation_id: str,
        params: Any,
        fp: str,
        *,
        foreground: bool,
    ) -> tuple[dict[str, Any], str]:
        """Queue a call as the trigger of a new `starting` activation; `accepted/starting`."""
        session_id = self.ensure_session(db, conversation_id, tool.scope)
        act_id = self.new_activation(db, session_id, call_id, foreground)
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
        msg = make_message(call_id, tool.scope, "accepted", self.now(), activation="starting")
        record(db, msg)
        return msg, act_id

    def _version_of(self, db: sqlite3.Connection, session_id: str) -> str:
        return str(
            db.execute(
                "SELECT version FROM app_sessions WHERE app_session_id=?", (session_id,)
            ).fetchone()[0]
        )

    def kick(self, session_id: str) -> None:
        """Make sure the session's delivery pump runs (implemented by the delivery part)."""
        raise NotImplementedError

    async def _session_request(self, worker: Worker, msg: dict[str, Any]) -> dict[str, Any]:
        """Answer a worker's session-data request (implemented by the delivery part)."""
        raise NotImplementedError
