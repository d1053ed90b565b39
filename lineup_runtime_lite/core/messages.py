"""AgentMessages: receipts, results and errors — persisted, then written to the outbox once."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, NotRequired, TypedDict

from lineup_runtime_lite.core.timestamps import format_ts
from lineup_sdk.codes import CODES

__all__ = [
    "BUDGET_REASON",
    "FINAL_STAGES",
    "MAX_DETAILS",
    "ActionAccepted",
    "ActionOutcome",
    "AgentMessage",
    "Checked",
    "ErrorBody",
    "Kind",
    "Unchecked",
    "cap_details",
    "error_body",
    "fingerprint",
    "make_message",
    "plain",
    "reject",
    "schema_rejection",
]

FINAL_STAGES = ("result", "error")

#: An AgentMessage's `kind`.
Kind = Literal["receipt", "result", "error"]


class ErrorBody(TypedDict):
    """An AgentMessage's `error` (SPEC 5.0, 7): a stable code, a message, and where it
    applies a hint and details."""

    code: str
    message: str
    hint: NotRequired[str]
    details: NotRequired[Any]


class AgentMessage(TypedDict):
    """Everything the Agent receives (SPEC 5.0): what `call()` returns and the outbox
    carries for the same step — a plain `dict` at run time, this closed field list to a
    type checker. Receipts carry `activation` or `reason` where they apply and, for
    `started`, `started_at` and `ends_at`; a final carries `result` or `error`."""

    id: str
    call_id: str
    app_scope: str
    kind: Kind
    stage: str
    at: str
    activation: NotRequired[str]
    reason: NotRequired[str]
    started_at: NotRequired[str]
    ends_at: NotRequired[str]
    result: NotRequired[Any]
    error: NotRequired[ErrorBody]


class ActionOutcome(TypedDict):
    """A UI Action's outcome (SPEC 17), as `Surface.act` returns it: its id, its handler's
    result and the session data's revision after it — always a number: the revision its
    writes made, else the one stored when it answered (0 while the session has no data).
    An error outcome is raised, never returned, so there is no revision-less outcome."""

    action_id: str
    result: Any
    revision: int


class ActionAccepted(TypedDict):
    """What `Surface.submit` answers once an action is accepted (persisted, or found)."""

    action_id: str
    seq: int


#: `details.reason` of a value not validated within the validation budget (SPEC 13.3).
BUDGET_REASON = "validation_budget"


@dataclass(frozen=True, slots=True)
class Unchecked:
    """A value that was not validated within the validation budget (so it is refused)."""

    budget_s: float

    def details(self) -> dict[str, Any]:
        """The error's `details`: `{"reason": "validation_budget", "budget_s": ...}`."""
        return {"reason": BUDGET_REASON, "budget_s": self.budget_s}


#: A validated value's problems (empty when valid), or `Unchecked`.
Checked = list[dict[str, Any]] | Unchecked


def fingerprint(conversation_id: str, method: str, params: Any) -> str:
    """SHA-256 of the canonical JSON of (conversation_id, method, params)."""
    blob = json.dumps(
        [conversation_id, method, params], sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def plain(message: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a message (or an outcome) as a plain `dict`, for code that keeps its own
    records of them and adds fields of its own (a scenario's report, an MCP answer)."""
    return dict(message)


def error_body(
    code: str, message: str, *, hint: str | None = None, details: Any = None
) -> ErrorBody:
    """An `error` object; documented codes get their documented fix as hint by default."""
    out: ErrorBody = {"code": code, "message": message}
    if hint is None and code in CODES:
        hint = CODES[code][1]
    if hint:
        out["hint"] = hint
    if details is not None:
        out["details"] = details
    return out


def make_message(
    call_id: str,
    app_scope: str,
    stage: str,
    at_ms: int,
    *,
    result: Any = None,
    error: ErrorBody | None = None,
    activation: str | None = None,
    reason: str | None = None,
    started_at: str | None = None,
    ends_at: str | None = None,
    has_result: bool = False,
) -> AgentMessage:
    """One AgentMessage (a closed field list; never an instance, session or operation id)."""
    kind: Kind = "result" if stage == "result" else "error" if stage == "error" else "receipt"
    msg: AgentMessage = {
        "id": f"{call_id}:{stage}",
        "call_id": call_id,
        "app_scope": app_scope,
        "kind": kind,
        "stage": stage,
        "at": format_ts(at_ms),
    }
    if activation is not None:
        msg["activation"] = activation
    if reason is not None:
        msg["reason"] = reason
    if started_at is not None:
        msg["started_at"] = started_at
    if ends_at is not None:
        msg["ends_at"] = ends_at
    if stage == "result" or has_result:
        msg["result"] = result
    if error is not None:
        msg["error"] = error
    return msg


def reject(call_id: str, app_scope: str, at_ms: int, error: ErrorBody) -> AgentMessage:
    """An error answered without persisting anything (unknown method, bad params, conflict)."""
    return make_message(call_id, app_scope, "error", at_ms, error=error)


#: The most schema problems an error's `details` lists.
MAX_DETAILS = 50


def cap_details(problems: list[dict[str, Any]], total: int | None = None) -> tuple[list[Any], str]:
    """The first `MAX_DETAILS` problems and a message suffix saying how many there were."""
    total = len(problems) if total is None else total
    shown = problems[:MAX_DETAILS]
    if total > len(shown):
        return shown, f" ({total} problems; the first {len(shown)} are listed)"
    return shown, ""


def schema_rejection(method: str, problems: list[dict[str, Any]]) -> tuple[str, list[Any]]:
    """The `invalid_params` message and capped details of an input-schema failure."""
    details, suffix = cap_details(problems)
    return f"params of {method} do not match its input schema{suffix}", details
