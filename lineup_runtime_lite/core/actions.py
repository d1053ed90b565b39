"""A UI Action's acceptance, as a pure function (SPEC 17): `decide_action(event, facts,
now) -> Decision` over the `ActionFacts` a driver read inside the savepoint that applies it.
Its delivery and its one outcome are `deliveries`' (`next_delivery`, `answer_action`,
`interrupt_action`). No IO, no clock reads, no randomness.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lineup_runtime_lite.core.decisions import (
    Decision,
    NewAction,
)
from lineup_runtime_lite.core.messages import (
    Checked,
    Unchecked,
    error_body,
    schema_rejection,
)
from lineup_runtime_lite.core.rows import (
    Action,
    ActionEntry,
    Activation,
    Session,
)

__all__ = [
    "ActionEvent",
    "ActionFacts",
    "decide_action",
]


@dataclass(frozen=True, slots=True)
class ActionEvent:
    """A UI Action that passed the envelope checks: `params` is canonical JSON text,
    `fingerprint` the SHA-256 of the canonical JSON of its name and params."""

    conversation_id: str
    scope: str
    name: str
    params: str
    fingerprint: str
    client_id: str
    client_seq: int

    @property
    def action_id(self) -> str:
        return f"{self.client_id}:{self.client_seq}"


@dataclass(frozen=True, slots=True)
class ActionFacts:
    """What a UI Action's acceptance reads, inside the savepoint that applies it: the
    conversation's App session for the scope and its current activation, the client's mark
    there (0: none), its stored action at `client_seq` when that is at or below the mark,
    the action as the session's version declares it (the current version's when there is
    no session; None: not declared) and its params' problems against that declaration."""

    session: Session | None
    act: Activation | None
    mark: int
    existing: Action | None
    entry: ActionEntry | None
    problems: Checked | None = None


def _reject_action(code: str, message: str, **kw: Any) -> Decision:
    """A rejection before acceptance: persists nothing, uses no seq."""
    return Decision(extra={"error": error_body(code, message, **kw)})


def decide_action(ev: ActionEvent, facts: ActionFacts, now: int) -> Decision:
    """A UI Action's acceptance (SPEC 17): `extra["error"]` for a rejection before
    acceptance (nothing persisted), `extra["replay"]` (the stored `Action`) for a seq the
    client used before with the same name and params, else the accepted action persisted
    in one transaction — its row with the session's next `seq`, the client's mark — and
    `extra["accepted"]` (its `(app_session_id, seq)`), its session kicked when ready."""
    session, act = facts.session, facts.act
    if session is None:
        if facts.entry is None:
            return _reject_action("unknown_action", f"no app declares the action {ev.name!r}")
        return _reject_action("app_not_running", f"{ev.scope} is not running in this conversation")
    if ev.client_seq <= facts.mark:
        existing = facts.existing
        assert existing is not None, "a mark covers every seq below it"
        if existing.fingerprint != ev.fingerprint:
            return _reject_action(
                "action_id_conflict",
                f"action {ev.action_id!r} was already used with another name or params",
            )
        return Decision(extra={"replay": existing})
    if ev.client_seq > facts.mark + 1:
        return _reject_action(
            "action_out_of_order",
            f"client {ev.client_id!r} sent seq {ev.client_seq}; the next is {facts.mark + 1}",
            details={"expected_seq": facts.mark + 1},
        )
    entry = facts.entry
    if entry is None:
        return _reject_action(
            "unknown_action", f"{ev.scope} {session.version} declares no action {ev.name!r}"
        )
    problems = facts.problems
    if isinstance(problems, Unchecked):
        message = (
            f"params of {ev.name} could not be validated within the "
            f"{problems.budget_s:g} s validation budget"
        )
        return _reject_action("invalid_params", message, details=problems.details())
    if problems:
        message, details = schema_rejection(ev.name, problems)
        return _reject_action("invalid_params", message, details=details)
    if act is None or act.state not in ("starting", "ready"):
        return _reject_action("app_not_running", f"{ev.scope} is not running in this conversation")
    sid = session.app_session_id
    row = NewAction(
        sid,
        session.next_seq,
        ev.client_id,
        ev.client_seq,
        entry.name,
        ev.params,
        ev.fingerprint,
        act.activation_id,
        now,
    )
    # queued behind whatever is ahead; a starting activation kicks its session when ready
    return Decision(
        (row,),
        kick=(sid,) if act.state == "ready" else (),
        extra={"accepted": (sid, session.next_seq)},
    )
