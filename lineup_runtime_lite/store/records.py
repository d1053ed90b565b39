"""Typed records of the runtime's facts: what the store reads and the transitions decide on."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Activation", "Call", "Intent", "Operation", "Session"]


@dataclass(frozen=True, slots=True)
class Session:
    """One App session: a conversation's use of one app scope, pinned to one version."""

    app_session_id: str
    conversation_id: str
    scope: str
    version: str
    next_seq: int


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
