"""RFC 3339 timestamps of runtime-clock milliseconds (pure: the clocks are in `clock.py`)."""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["LAST_MS", "format_ts"]

#: The last instant an RFC 3339 timestamp can name: 9999-12-31T23:59:59.999Z.
LAST_MS = 253_402_300_799_999


#: The last second formatted and its text up to the milliseconds (one tuple, swapped whole:
#: the store thread and the loop may both format).
_last: tuple[int, str] = (-1, "")


def format_ts(ms: int) -> str:
    """RFC 3339 UTC with milliseconds, e.g. `2026-01-01T00:00:00.000Z`."""
    global _last
    second, frac = divmod(ms, 1000)
    last = _last
    if last[0] == second:  # the calls of one second share their date and time
        head = last[1]
    else:
        head = datetime.fromtimestamp(second, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.")
        _last = (second, head)
    return f"{head}{frac:03d}Z"
