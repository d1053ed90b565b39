"""RFC 3339 timestamps of runtime-clock milliseconds (pure: the clocks are in `clock.py`)."""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["LAST_MS", "format_ts"]

#: The last instant an RFC 3339 timestamp can name: 9999-12-31T23:59:59.999Z.
LAST_MS = 253_402_300_799_999


def format_ts(ms: int) -> str:
    """RFC 3339 UTC with milliseconds, e.g. `2026-01-01T00:00:00.000Z`."""
    dt = datetime.fromtimestamp(ms / 1000, tz=UTC)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"
