"""The runtime handler catalog: the frozen contract between SDK, build and runtime.

Each key names one controlled execution the Runtime implements itself. The build checks
`tools.runtime_tool(...)` declarations against this table; the runtime implements exactly
these keys. A key's first segment is the only app scope allowed to use it.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

__all__ = ["ACTIVATION_REASONS", "CATALOG", "RuntimeHandler", "key_allowed_for_scope"]

#: Controlled reasons an activation fails or is cancelled (SPEC 5.2).
ACTIVATION_REASONS: tuple[str, ...] = (
    "host_failed",
    "user_left",
    "timeout",
    "worker_failed",
    "method_mismatch",
    "interrupted",
    "app_untrusted",
)

_TIMESTAMP: dict[str, Any] = {"type": "string", "format": "date-time"}


@dataclass(frozen=True)
class RuntimeHandler:
    """One runtime handler key and its frozen schemas.

    Attributes:
        key: Catalog key, e.g. `pomodoro.start`.
        activation: The only activation a tool using this key may declare.
        long_running: Whether the call spans receipts before its business result.
        input_schema: Frozen JSON Schema of the params.
        result_schema: Frozen JSON Schema of the business result.
        description: Default tool description.
    """

    key: str
    activation: str
    long_running: bool
    input_schema: dict[str, Any]
    result_schema: dict[str, Any]
    description: str


CATALOG: MappingProxyType[str, RuntimeHandler] = MappingProxyType(
    {
        "pomodoro.start": RuntimeHandler(
            key="pomodoro.start",
            activation="foreground_required",
            long_running=True,
            description=(
                "Start a focus timer in the foreground Pomodoro app. The timer starts only "
                "once the user sees the app; the result arrives when the focus ends."
            ),
            input_schema={
                "type": "object",
                "properties": {
                    "minutes": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": 120,
                        "default": 25,
                        "description": "Length of the focus in minutes.",
                    },
                    "label": {
                        "type": "string",
                        "maxLength": 80,
                        "description": "What the user is focusing on.",
                    },
                },
                "additionalProperties": False,
            },
            result_schema={
                "type": "object",
                "properties": {
                    "status": {"enum": ["completed", "interrupted", "not_started"]},
                    "operation_id": {"type": "string"},
                    "started_at": _TIMESTAMP,
                    "ends_at": _TIMESTAMP,
                    "ended_at": _TIMESTAMP,
                    "reason": {"enum": list(ACTIVATION_REASONS)},
                },
                "required": ["status"],
                "additionalProperties": False,
            },
        ),
        "pomodoro.interrupt": RuntimeHandler(
            key="pomodoro.interrupt",
            activation="activation_not_required",
            long_running=False,
            description=(
                "Stop this conversation's Pomodoro: cancel one that is starting or interrupt "
                "a running focus. Never opens the app."
            ),
            input_schema={"type": "object", "properties": {}, "additionalProperties": False},
            result_schema={
                "type": "object",
                "properties": {
                    "status": {"enum": ["cancelled_starting", "interrupted", "nothing_running"]}
                },
                "required": ["status"],
                "additionalProperties": False,
            },
        ),
    }
)


def key_allowed_for_scope(key: str, app_scope: str) -> bool:
    """Whether an app with `app_scope` may declare a runtime tool using `key`."""
    return key.split(".", 1)[0] == app_scope
