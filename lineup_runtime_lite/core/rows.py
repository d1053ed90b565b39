"""Typed records the pure core decides on: the Registry's entries and the store's facts.

Plain frozen data with no IO: the store (`store/`) returns these records, the Registry is
built of `RegistryEntry`s at install and load (`install.py`; the manifest's own tool is
`lineup_build.model.Tool`), and the transitions, the handlers and the drivers read them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = [
    "Action",
    "ActionEntry",
    "Activation",
    "Call",
    "Intent",
    "Operation",
    "PendingData",
    "RegistryEntry",
    "Session",
]


@dataclass(frozen=True)
class RegistryEntry:
    """One Registry record: method → how the runtime routes it."""

    method: str
    scope: str
    version: str
    description: str
    delivery: str
    activation: str
    long_running: bool
    timeout_s: float
    input_schema: dict[str, Any]
    result_schema: Any
    handler_key: str | None
    hints: tuple[tuple[str, bool], ...] = ()
    #: Linked to the app's Surface (SPEC 18.2).
    surface: bool = False

    def inventory(self) -> dict[str, Any]:
        """The Agent Inventory entry: no delivery internals, no handler keys; `hints`
        only when the author set some."""
        out = {
            "method": self.method,
            "app_scope": self.scope,
            "description": self.description,
            "input_schema": self.input_schema,
            "result_schema": self.result_schema,
            "activation": self.activation,
            "long_running": self.long_running,
        }
        if self.hints:
            out["hints"] = dict(self.hints)
        if self.surface:
            out["surface"] = True
        return out


@dataclass(frozen=True)
class ActionEntry:
    """One UI Action an app version declares (SPEC 17): never in the Agent Inventory."""

    name: str
    scope: str
    version: str
    description: str
    input_schema: dict[str, Any]
    result_schema: Any
    timeout_s: float


@dataclass(frozen=True, slots=True)
class Session:
    """One App session: a conversation's use of one app scope, pinned to one version."""

    app_session_id: str
    conversation_id: str
    scope: str
    version: str
    next_seq: int
    #: A UI Action of the session is queued or in flight (read with the session where a
    #: call's acceptance reads it: no later call takes the fast path past it, SPEC 17).
    actions_ahead: bool = False


@dataclass(frozen=True, slots=True)
class Activation:
    """One activation instance of an App session (SPEC 5.2)."""

    activation_id: str
    app_session_id: str
    trigger_call_id: str
    state: str  # starting | ready | failed | cancelled
    requires_foreground: bool
    worker_ready: bool
    foreground: bool
    deadline_ms: int

    @property
    def waits_for_host(self) -> bool:
        """Starting, its worker is up, and only the Host's confirmation is missing."""
        return self.worker_ready and self.requires_foreground and not self.foreground


@dataclass(frozen=True, slots=True)
class Call:
    """One accepted Agent call; `params` is its canonical JSON text."""

    call_id: str
    fingerprint: str
    conversation_id: str
    scope: str
    method: str
    params: str
    app_session_id: str | None
    activation_id: str | None
    seq: int | None
    state: str  # queued | delivered | running | done


@dataclass(frozen=True, slots=True)
class Action:
    """One accepted UI Action (SPEC 17): `seq` is its place in the App session's one queue
    (shared with the session's calls), `client_seq` the client's own number; `params` is
    its canonical JSON text; `outcome` (JSON text: `{"result": ...}` or `{"error": ...}`)
    and `revision` (after a result; None after an error) once it is `done`."""

    app_session_id: str
    seq: int
    client_id: str
    client_seq: int
    name: str
    params: str
    fingerprint: str
    activation_id: str
    state: str  # queued | delivered | done
    outcome: str | None = None
    revision: int | None = None

    @property
    def action_id(self) -> str:
        return f"{self.client_id}:{self.client_seq}"


@dataclass(frozen=True, slots=True)
class Operation:
    """A runtime operation with a deadline (a Pomodoro focus)."""

    operation_id: str
    call_id: str
    conversation_id: str
    app_session_id: str
    kind: str
    state: str  # focusing | completed | interrupted
    started_ms: int
    ends_ms: int
    params: str


@dataclass(frozen=True, slots=True)
class Intent:
    """An undelivered Host intent at the head of its instance's queue, with the state of
    that instance's activation (None when the activation is unknown)."""

    id: int
    instance: str
    body: str
    activation_state: str | None


@dataclass(frozen=True, slots=True)
class PendingData:
    """The session data one delivery's handler wrote and the runtime holds until the
    delivery's answer (SPEC 17, "every delivery atomic"): its canonical JSON bytes, to be
    committed as revision `base + 1` with the answer, or dropped with a failure. Not tied
    to a call: any kind of delivery (a tool call's, a UI Action's) holds one the same way."""

    scope: str
    app_session_id: str
    #: The committed revision the delivery started from.
    base: int
    data: bytes

    @property
    def revision(self) -> int:
        return self.base + 1
