"""RFC 3339 timestamps of runtime-clock milliseconds: the text `datetime` gives, however the
calls before it went (the date and time of a second are reused for its milliseconds)."""

from __future__ import annotations

import random
from datetime import UTC, datetime

from lineup_runtime_lite.core.timestamps import LAST_MS, format_ts

SEED = 36


def _reference(ms: int) -> str:
    dt = datetime.fromtimestamp(ms / 1000, tz=UTC)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def test_format_ts_matches_datetime_across_seconds_and_in_any_order() -> None:
    print(f"seed {SEED}")
    rng = random.Random(SEED)
    start = 1_767_225_599_990  # 2025-12-31T23:59:59.990Z: a year ends on the way
    runs = list(range(start, start + 30))  # one call per ms through a second's end
    runs += [rng.randrange(0, LAST_MS + 1) for _ in range(2000)]  # jumping about
    runs += [0, 999, 1000, LAST_MS, start, start + 10, start]  # back and forth
    for ms in runs:
        assert format_ts(ms) == _reference(ms), ms
    assert format_ts(1_767_225_600_000) == "2026-01-01T00:00:00.000Z"
    assert format_ts(LAST_MS) == "9999-12-31T23:59:59.999Z"
