"""What a transition decides: guarded row changes, messages to record, and the effects to
perform once the commit that records them returned (RUNTIME-NOTES, "functional core").

Plain frozen data: the transitions build it, the store applies it (every change says the
prior state it expects; a change whose guard finds no row makes the whole decision a lost
race, written nowhere), the drivers perform its effects after COMMIT.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from lineup_runtime_lite.core.messages import AgentMessage

__all__ = [
    "ActionDone",
    "ActionState",
    "ActivationUpdate",
    "CallState",
    "Decision",
    "EndOperation",
    "IntentDelivered",
    "MoveSession",
    "NewAction",
    "NewActivation",
    "NewCall",
    "NewIMRecord",
    "NewIntent",
    "NewOperation",
    "NewReceipt",
    "NewSession",
    "ReopenActivation",
    "ReplaceSessionData",
    "SupersedeIntents",
]


@dataclass(frozen=True, slots=True)
class NewSession:
    app_session_id: str
    conversation_id: str
    scope: str
    version: str
    created_ms: int


@dataclass(frozen=True, slots=True)
class NewActivation:
    activation_id: str
    app_session_id: str
    trigger_call_id: str
    requires_foreground: bool
    deadline_ms: int
    created_ms: int


@dataclass(frozen=True, slots=True)
class NewCall:
    """A call row; with a session, `seq` must be the session's `next_seq` (guarded), which
    then moves on by one."""

    call_id: str
    fingerprint: str
    conversation_id: str
    scope: str
    method: str
    params: str
    app_session_id: str | None
    activation_id: str | None
    seq: int | None
    state: str
    created_ms: int


@dataclass(frozen=True, slots=True)
class NewAction:
    """An accepted UI Action (SPEC 17): `seq` must be its session's `next_seq` (guarded,
    moved on by one, as for calls) and `client_seq` the client's mark + 1 (guarded: the
    mark `client_seq - 1` moves to `client_seq`, or is created at 1)."""

    app_session_id: str
    seq: int
    client_id: str
    client_seq: int
    name: str
    params: str
    fingerprint: str
    activation_id: str
    created_ms: int


@dataclass(frozen=True, slots=True)
class ActionState:
    """Move a UI Action from `queued` to `delivered` (guarded)."""

    app_session_id: str
    seq: int
    expect: str
    to: str


@dataclass(frozen=True, slots=True)
class ActionDone:
    """A UI Action's one outcome (guarded: it has none yet). `outcome` is JSON text
    (`{"result": ...}` or `{"error": {...}}`); `revision` the session data's revision after
    a result (None after an error: nothing applied); `action_id` names it for its waiters."""

    app_session_id: str
    seq: int
    action_id: str
    outcome: str
    revision: int | None
    ended_ms: int


@dataclass(frozen=True, slots=True)
class CallState:
    """Move a call from `expect` to `to` (guarded)."""

    call_id: str
    expect: str
    to: str


@dataclass(frozen=True, slots=True)
class ActivationUpdate:
    """Change a `starting` activation (guarded on `starting`); None fields stay."""

    activation_id: str
    state: str | None = None
    reason: str | None = None
    ended_ms: int | None = None
    worker_ready: bool | None = None
    foreground: bool | None = None
    requires_foreground: bool | None = None


@dataclass(frozen=True, slots=True)
class ReopenActivation:
    """A `ready` activation whose app cannot run any more goes back to `starting` (guarded),
    so the same decision can fail it."""

    activation_id: str


@dataclass(frozen=True, slots=True)
class NewReceipt:
    """Persist an AgentMessage as its call's next receipt and queue it in the outbox; a
    final also ends the call. Guarded: the stage must not be recorded yet, and a final
    only for a call that has none (`result` after a `delivery_interrupted` loses)."""

    message: AgentMessage


@dataclass(frozen=True, slots=True)
class NewIntent:
    """A Host intent (kept once per dedup key)."""

    dedup_key: str
    body: dict[str, Any]
    instance: str


@dataclass(frozen=True, slots=True)
class IntentDelivered:
    id: int


@dataclass(frozen=True, slots=True)
class SupersedeIntents:
    """Undelivered intents of an ended instance: never delivered (SPEC 5.7)."""

    instance: str


@dataclass(frozen=True, slots=True)
class NewOperation:
    operation_id: str
    call_id: str
    conversation_id: str
    app_session_id: str
    kind: str
    started_ms: int
    ends_ms: int
    params: str


@dataclass(frozen=True, slots=True)
class EndOperation:
    """End a `focusing` operation (guarded)."""

    operation_id: str
    state: str
    ended_ms: int


@dataclass(frozen=True, slots=True)
class NewIMRecord:
    operation_id: str
    conversation_id: str
    body: dict[str, Any]
    created_ms: int


@dataclass(frozen=True, slots=True)
class ReplaceSessionData:
    """Session data at `expected_revision` becomes `data` (canonical JSON text) at
    `expected_revision + 1` (guarded on the revision)."""

    scope: str
    app_session_id: str
    expected_revision: int
    data: str


@dataclass(frozen=True, slots=True)
class MoveSession:
    """A dev build's App session moves to a newer dev build of its scope (guarded on the
    version it is pinned to): the one exception to pinning (SPEC 14, `lineup dev`)."""

    app_session_id: str
    from_version: str
    to_version: str


Change = (
    NewSession
    | NewActivation
    | NewCall
    | CallState
    | ActivationUpdate
    | ReopenActivation
    | NewReceipt
    | NewIntent
    | IntentDelivered
    | SupersedeIntents
    | NewOperation
    | EndOperation
    | NewIMRecord
    | ReplaceSessionData
    | MoveSession
    | NewAction
    | ActionState
    | ActionDone
)


@dataclass(frozen=True, slots=True)
class Decision:
    """One transition's outcome.

    Attributes:
        changes: Applied in order in one savepoint of a group commit.
        answer: The message the triggering caller gets (recorded or not).
        deliver: A call (committed as `delivered` by these changes) to send to its worker.
        drive: Activations whose driver should run after the commit.
        stop: Activations that ended: their drivers stop.
        kick: App sessions whose delivery pump should run.
        host: Whether the Host relay has new intents.
        replay: The call already exists: answer from what is stored.
    """

    changes: tuple[Change, ...] = ()
    answer: AgentMessage | None = None
    deliver: str | None = None
    drive: tuple[str, ...] = ()
    stop: tuple[str, ...] = ()
    kick: tuple[str, ...] = ()
    host: bool = False
    replay: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def action_outcomes(self) -> list[ActionDone]:
        """The UI Action outcomes these changes record (their waiters are answered)."""
        return [c for c in self.changes if isinstance(c, ActionDone)]

    @property
    def finals(self) -> list[AgentMessage]:
        """The final messages these changes record (their waiters are answered)."""
        return [
            c.message
            for c in self.changes
            if isinstance(c, NewReceipt) and c.message["stage"] in ("result", "error")
        ]


#: A decision that changes nothing and has no effect.
NOTHING = Decision()
