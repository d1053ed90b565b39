"""`outbox.after(position, limit)` (issue 36): a reader that follows the outbox reads the
messages written after the position it holds, oldest first, acked or not, a page at a time,
and the position to read from next."""

from __future__ import annotations

from pathlib import Path

import pytest

from lineup_build.trust import TrustStore
from lineup_runtime_lite import Runtime, VirtualClock
from lineup_sdk.errors import LineupError


def test_after_pages_through_the_outbox_from_a_position(
    tmp_path: Path, todo_bundle: Path, trust: TrustStore
) -> None:
    with Runtime.open(tmp_path / "rt.db", trust=trust, clock=VirtualClock()) as rt:
        rt.install(todo_bundle)
        assert rt.outbox.after() == ([], 0)
        for n in range(3):
            rt.call(f"c{n}", "conv", "todo.add", {"title": f"t{n}"})
        rt.settle()
        everything = rt.outbox.all()
        rt.outbox.ack([everything[0]["id"]])  # acked or not: all are read
        page, cursor = rt.outbox.after(0, 2)
        assert page == everything[:2] and cursor > 0
        rest, end = rt.outbox.after(cursor, 1000)
        assert page + rest == everything and end > cursor
        assert rt.outbox.after(end) == ([], end)  # nothing new: the same position
        rt.call("c9", "conv", "todo.add", {"title": "later"})
        rt.settle()
        new, _ = rt.outbox.after(end)
        assert [m["call_id"] for m in new] == ["c9"] * len(new) and new
        for bad in ((-1, 10), ("0", 10), (0, 0), (0, 1001)):
            with pytest.raises(LineupError) as exc:
                rt.outbox.after(*bad)
            assert exc.value.code == "usage_invalid"
