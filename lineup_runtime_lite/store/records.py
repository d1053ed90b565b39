"""The typed records (`core.rows`) the facts read, from the rows either engine returns
(by column name: `sqlite3.Row`, or `store.pg_connection.PgRow`)."""

from __future__ import annotations

from typing import Any, Protocol

from lineup_runtime_lite.core.decisions import NewCall
from lineup_runtime_lite.core.rows import Action, Activation, Call, Operation, Session

__all__ = [
    "Row",
    "action_record",
    "activation_record",
    "call_record",
    "item_record",
    "operation_record",
    "session_record",
    "written_call",
]


class Row(Protocol):
    """A row read by column name (and by index)."""

    def __getitem__(self, key: str, /) -> Any: ...


def written_call(change: NewCall) -> Call:
    """The call as any store reads it back once `change` is applied."""
    return Call(
        change.call_id,
        change.fingerprint,
        change.conversation_id,
        change.scope,
        change.method,
        change.params,
        change.app_session_id,
        change.activation_id,
        change.seq,
        change.state,
    )


def call_record(row: Row) -> Call:
    return Call(
        row["call_id"],
        row["fingerprint"],
        row["conversation_id"],
        row["scope"],
        row["method"],
        row["params"],
        row["app_session_id"],
        row["activation_id"],
        row["seq"],
        row["state"],
    )


def action_record(row: Row) -> Action:
    return Action(
        row["app_session_id"],
        int(row["seq"]),
        row["client_id"],
        int(row["client_seq"]),
        row["name"],
        row["params"],
        row["fingerprint"],
        row["activation_id"],
        row["state"],
        row["outcome"],
        int(row["revision"]) if row["revision"] is not None else None,
    )


def item_record(row: Row) -> Call | Action:
    """A row of the facts' one-queue read (`store.facts`): the call or the UI Action."""
    if row["kind"] == "call":
        return Call(
            row["key"],
            row["fingerprint"],
            row["conversation_id"],
            row["scope"],
            row["method"],
            row["params"],
            row["app_session_id"],
            row["activation_id"],
            int(row["seq"]),
            row["state"],
        )
    return Action(
        row["app_session_id"],
        int(row["seq"]),
        row["key"],
        int(row["client_seq"]),
        row["method"],
        row["params"],
        row["fingerprint"],
        row["activation_id"],
        row["state"],
    )


def session_record(row: Row) -> Session:
    return Session(
        row["app_session_id"],
        row["conversation_id"],
        row["scope"],
        row["version"],
        int(row["next_seq"]),
    )


def activation_record(row: Row) -> Activation:
    return Activation(
        row["activation_id"],
        row["app_session_id"],
        row["trigger_call_id"],
        row["state"],
        bool(row["requires_foreground"]),
        bool(row["worker_ready"]),
        bool(row["foreground"]),
        int(row["deadline_ms"]),
    )


def operation_record(row: Row) -> Operation:
    return Operation(
        row["operation_id"],
        row["call_id"],
        row["conversation_id"],
        row["app_session_id"],
        row["kind"],
        row["state"],
        int(row["started_ms"]),
        int(row["ends_ms"]),
        row["params"],
    )
