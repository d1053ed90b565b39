"""What a handler sees of its call: `ToolContext` and the session-data client interface."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = [
    "MAX_SESSION_DATA",
    "ActionContext",
    "SessionData",
    "Snapshot",
    "ToolContext",
    "session_data_blob",
]


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One revision of a session's data. Nothing stored yet is `data=None, revision=0`."""

    data: dict[str, Any] | None
    revision: int


class SessionData(Protocol):
    """The session-data client a handler gets; scope and session come from the delivery.

    A MiniApp cannot name another session: the client is bound to the call's session.
    """

    async def get(self) -> Snapshot:
        """Read the current snapshot."""
        ...

    async def replace(self, data: dict[str, Any], *, expected_revision: int) -> Snapshot:
        """Replace the whole object if the revision is still `expected_revision`.

        Raises:
            LineupError: `session_data_revision_conflict`, `session_data_invalid`, or
                `session_data_too_large`.
        """
        ...

    def get_sync(self) -> Snapshot:
        """`get()` for a sync handler (which runs in a worker thread)."""
        ...

    def replace_sync(self, data: dict[str, Any], *, expected_revision: int) -> Snapshot:
        """`replace()` for a sync handler (which runs in a worker thread)."""
        ...

    def subscribe(self, listener: Callable[[str, Snapshot], None]) -> Callable[[], None]:
        """Register a listener; returns the function that unsubscribes it."""
        ...


@dataclass(frozen=True)
class ToolContext:
    """The context of one delivered call.

    Attributes:
        call_id: The Agent's call id; use it to make side effects idempotent.
        app_scope: The MiniApp's scope.
        app_session_id: The App session this call was delivered to.
        conversation_id: The conversation the call came from.
        session_data: The session-data client bound to this App session.
        logger: A logger whose output goes to the worker log, never to the Agent.
    """

    call_id: str
    app_scope: str
    app_session_id: str
    conversation_id: str
    session_data: SessionData
    logger: logging.Logger = field(default_factory=lambda: logging.getLogger("lineup.app"))


@dataclass(frozen=True)
class ActionContext:
    """The context of one delivered UI Action (SPEC 17): `ToolContext` with the action's
    id and the Surface client that asked for it in place of a call id.

    Attributes:
        action_id: `"<client_id>:<seq>"`, unique per App session; use it to make side
            effects idempotent.
        client_id: The Surface client (one loaded Surface SDK) that asked for the action.
        app_scope: The MiniApp's scope.
        app_session_id: The App session this action was delivered to.
        conversation_id: The conversation whose App session it is.
        session_data: The session-data client bound to this App session (`get` reads
            what this delivery wrote so far; its writes commit with its answer).
        logger: A logger whose output goes to the worker log.
    """

    action_id: str
    client_id: str
    app_scope: str
    app_session_id: str
    conversation_id: str
    session_data: SessionData
    logger: logging.Logger = field(default_factory=lambda: logging.getLogger("lineup.app"))


#: The limit on one App session's data, as canonical JSON (SPEC 5.5).
MAX_SESSION_DATA = 1024 * 1024


def session_data_blob(data: Any, expected_revision: Any) -> bytes:
    """The canonical JSON a `replace(data, expected_revision=...)` stores, once its
    arguments pass SPEC 5.5 (the one rule the runtime and `lineup_sdk.testing` share).

    Raises:
        LineupError: `session_data_invalid` (not a JSON object, or a revision that is not an
            integer) or `session_data_too_large` (over `MAX_SESSION_DATA`).
    """
    import json

    from lineup_sdk.errors import LineupError

    if not isinstance(data, dict):
        raise LineupError("session_data_invalid", "session data must be a JSON object")
    if not isinstance(expected_revision, int) or isinstance(expected_revision, bool):
        raise LineupError("session_data_invalid", "expected_revision must be an integer")
    try:
        blob = json.dumps(
            data, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        ).encode("utf-8")
    except (TypeError, ValueError, RecursionError) as exc:
        raise LineupError("session_data_invalid", f"session data is not JSON: {exc}") from None
    if len(blob) > MAX_SESSION_DATA:
        raise LineupError(
            "session_data_too_large", f"session data is {len(blob)} bytes; the limit is 1 MiB"
        )
    return blob
