"""The runtime-delivered Pomodoro handlers `pomodoro.start` and `pomodoro.interrupt`
(SPEC 5.4): foreground confirmation starts the focus; deadlines live in the database."""

from __future__ import annotations

import json
import secrets
import sqlite3
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, Protocol

from lineup_runtime_lite.clock import format_ts
from lineup_runtime_lite.messages import error_body, make_message, record

if TYPE_CHECKING:
    import asyncio

    from lineup_runtime_lite.install import Tool
    from lineup_runtime_lite.state import CoreState
    from lineup_runtime_lite.store import Store


class Core(Protocol):
    """What the Pomodoro handler needs of the runtime core: a small port, so this module
    never imports the core (no import circle)."""

    store: Store
    registry: dict[str, Tool]

    def now(self) -> int: ...
    def spawn(self, coro: Awaitable[Any]) -> asyncio.Task[Any]: ...
    def kick_host(self) -> None: ...
    def _publish(self, msgs: list[dict[str, Any]]) -> None: ...
    def _stop_driving(self, act_id: str) -> None: ...
    async def drive_activation(self, act_id: str) -> None: ...
    def _host_intent_row(
        self, db: sqlite3.Connection, act_id: str, conversation_id: str, scope: str
    ) -> dict[str, Any]: ...
    def answer_now_in(
        self,
        db: sqlite3.Connection,
        tool: Tool,
        call_id: str,
        conversation_id: str,
        params: Any,
        fp: str,
        msg: dict[str, Any],
    ) -> dict[str, Any]: ...
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
    ) -> tuple[dict[str, Any], str]: ...
    def end_activation_in(
        self,
        db: sqlite3.Connection,
        act_id: str,
        state: str,
        reason: str,
        *,
        cause: str | None = None,
    ) -> list[dict[str, Any]] | None: ...


__all__ = ["IMPLEMENTED_KEYS", "accept", "on_ready", "tick"]

#: The catalog keys this runtime implements (a test compares them with the catalog).
IMPLEMENTED_KEYS = frozenset({"pomodoro.start", "pomodoro.interrupt"})


def _start_methods(core: Core, scope: str) -> list[str]:
    return [
        t.method
        for t in core.registry.values()
        if t.scope == scope and t.handler_key == "pomodoro.start"
    ]


async def accept(
    core: Core, tool: Tool, call_id: str, conversation_id: str, params: dict[str, Any], fp: str
) -> dict[str, Any]:
    """Accept a runtime-delivered call."""
    if tool.handler_key == "pomodoro.start":
        return await _accept_start(core, tool, call_id, conversation_id, params, fp)
    if tool.handler_key == "pomodoro.interrupt":
        return await _interrupt(core, tool, call_id, conversation_id, params, fp)
    raise AssertionError(f"unimplemented runtime handler {tool.handler_key}")


def _active(db: sqlite3.Connection, conversation_id: str, methods: list[str]) -> bool:
    marks = ",".join("?" * len(methods))
    row = db.execute(
        f"SELECT 1 FROM calls WHERE conversation_id=? AND method IN ({marks}) "
        "AND state IN ('queued','running') LIMIT 1",
        (conversation_id, *methods),
    ).fetchone()
    return row is not None


async def _accept_start(
    core: Core, tool: Tool, call_id: str, conversation_id: str, params: dict[str, Any], fp: str
) -> dict[str, Any]:
    with core.store.transaction() as db:
        if _active(db, conversation_id, _start_methods(core, tool.scope)):
            msg = make_message(
                call_id,
                tool.scope,
                "error",
                core.now(),
                error=error_body(
                    "pomodoro_already_active",
                    "a Pomodoro is already starting or focusing in this conversation",
                ),
            )
            return core.answer_now_in(db, tool, call_id, conversation_id, params, fp, msg)
        msg, act_id = core.accept_starting_in(
            db, tool, call_id, conversation_id, params, fp, foreground=True
        )
        core._host_intent_row(db, act_id, conversation_id, tool.scope)
    core.spawn(core.drive_activation(act_id))
    core.kick_host()
    return msg


def on_ready(
    core: CoreState, db: sqlite3.Connection, tool: Tool, call: sqlite3.Row
) -> list[dict[str, Any]]:
    """Foreground confirmed: create the focusing operation and emit `started`."""
    params = json.loads(call["params"])
    minutes = int(params.get("minutes", 25))
    now = core.now()
    ends = now + minutes * 60_000
    op_id = f"op_{secrets.token_hex(8)}"
    db.execute(
        "INSERT INTO operations (operation_id, call_id, conversation_id, app_session_id, kind, "
        "state, started_ms, ends_ms, params) VALUES (?,?,?,?,?,?,?,?,?)",
        (
            op_id,
            call["call_id"],
            call["conversation_id"],
            call["app_session_id"],
            "pomodoro.focus",
            "focusing",
            now,
            ends,
            call["params"],
        ),
    )
    db.execute("UPDATE calls SET state='running' WHERE call_id=?", (call["call_id"],))
    msg = make_message(
        call["call_id"],
        call["scope"],
        "started",
        now,
        started_at=format_ts(now),
        ends_at=format_ts(ends),
    )
    record(db, msg)
    return [msg]


def _end_focus(
    db: sqlite3.Connection, op: sqlite3.Row, state: str, ended_ms: int, scope: str
) -> list[dict[str, Any]] | None:
    cur = db.execute(
        "UPDATE operations SET state=?, ended_ms=? WHERE operation_id=? AND state='focusing'",
        (state, ended_ms, op["operation_id"]),
    )
    if cur.rowcount == 0:
        return None  # the other terminal transition committed first
    params = json.loads(op["params"])
    result = {
        "status": state,
        "operation_id": op["operation_id"],
        "started_at": format_ts(op["started_ms"]),
        "ends_at": format_ts(op["ends_ms"]),
        "ended_at": format_ts(ended_ms),
    }
    im = {
        "kind": "pomodoro.focus",
        "status": state,
        "minutes": int(params.get("minutes", 25)),
        "label": params.get("label"),
        **{k: v for k, v in result.items() if k != "status"},
    }
    db.execute(
        "INSERT INTO im_records (operation_id, conversation_id, body, created_ms) VALUES (?,?,?,?)",
        (op["operation_id"], op["conversation_id"], json.dumps(im, sort_keys=True), ended_ms),
    )
    msg = make_message(op["call_id"], scope, "result", ended_ms, result=result)
    record(db, msg)
    return [msg]


async def _interrupt(
    core: Core, tool: Tool, call_id: str, conversation_id: str, params: dict[str, Any], fp: str
) -> dict[str, Any]:
    """Cancel a starting Pomodoro or interrupt a focus in this conversation; never opens one."""
    methods = _start_methods(core, tool.scope)
    marks = ",".join("?" * len(methods))
    msgs: list[dict[str, Any]] = []
    with core.store.transaction() as db:
        starting = db.execute(
            f"SELECT a.activation_id FROM calls c JOIN activations a ON a.trigger_call_id=c.call_id "
            f"WHERE c.conversation_id=? AND c.method IN ({marks}) AND c.state='queued' "
            "AND a.state='starting' LIMIT 1",
            (conversation_id, *methods),
        ).fetchone()
        focusing = db.execute(
            "SELECT * FROM operations WHERE conversation_id=? AND state='focusing' LIMIT 1",
            (conversation_id,),
        ).fetchone()
        status = "nothing_running"
        if starting is not None:
            ended = core.end_activation_in(db, starting[0], "cancelled", "interrupted")
            if ended is not None:
                msgs.extend(ended)
                status = "cancelled_starting"
        elif focusing is not None:
            ended = _end_focus(db, focusing, "interrupted", core.now(), tool.scope)
            if ended is not None:
                msgs.extend(ended)
                status = "interrupted"
        msg = make_message(call_id, tool.scope, "result", core.now(), result={"status": status})
        core.answer_now_in(db, tool, call_id, conversation_id, params, fp, msg)
    if status == "cancelled_starting" and starting is not None:
        core._stop_driving(starting[0])
    core._publish([*msgs, msg])
    return msg


async def tick(core: Core, now: int) -> None:
    """Complete every focus whose deadline passed, at its `ends_at`, once."""
    for op in core.store.all(
        "SELECT * FROM operations WHERE state='focusing' AND ends_ms<=? ORDER BY ends_ms", (now,)
    ):
        scope = core.store.one(
            "SELECT scope FROM app_sessions WHERE app_session_id=?", (op["app_session_id"],)
        )
        with core.store.transaction() as db:
            msgs = _end_focus(db, op, "completed", op["ends_ms"], scope[0] if scope else "pomodoro")
        if msgs:
            core._publish(msgs)
