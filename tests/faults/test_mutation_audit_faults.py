"""At most once on the *queued* delivery path (issue 12, "Missing today"): a call accepted
while its session's activation is starting waits in the queue, is delivered by the pump,
and a crash anywhere between `delivered` and its result ends it `delivery_interrupted`
after the restart, its handler having run at most once. The crash tests elsewhere cover
the ready-session path only (accept and `delivered` in one commit).

The handler's side channel is its session data: `probe.append` appends its item, so the
list says how often each handler ran.

Catches, in `deliveries.next_delivery`, a delivery that is not recorded before the send
(after a crash the call is still `queued`, so recovery delivers it again):
    CallState(call.call_id, "queued", "delivered")
 -> CallState(call.call_id, "queued", "queued")
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from lineup_runtime_lite.store import faults
from tests.faults import invariants
from tests.faults.harness import Env

#: q1 starts the session's activation, q2 waits behind it: both go through the queue.
QUEUED = {
    "call_many": [
        ["q1", "c1", "probe.append", {"item": "q1"}],
        ["q2", "c1", "probe.append", {"item": "q2"}],
    ]
}


@pytest.fixture(autouse=True)
def _disarm() -> Iterator[None]:
    yield
    faults.disarm()


def outcome(env: Env) -> tuple[dict[str, str | None], list[str]]:
    """After a restart: each call's one final (`result` or its error code; None for a call
    the crash kept from being stored) and the handler runs, from the session data."""
    with env.open() as rt:
        rt.settle()
        finals: dict[str, str | None] = {}
        for cid in ("q1", "q2"):
            record = rt.call_record(cid)
            if record is None:
                finals[cid] = None
                continue
            ends = [m for m in record["messages"] if m["kind"] != "receipt"]
            assert len(ends) == 1, (cid, record)
            finals[cid] = "result" if ends[0]["kind"] == "result" else ends[0]["error"]["code"]
        items = list((rt.surface("c1", "probe").get().data or {}).get("items", []))
        invariants.check(rt)
    return finals, items


def accepted_queued(run: Any) -> None:
    calls = run.calls()
    assert calls["q1"]["activation"] == "starting"
    assert calls["q2"]["activation"] == "queued"


@pytest.mark.store
@pytest.mark.parametrize(
    ("point", "after", "finals", "items"),
    [
        # the trigger call (queued while its activation starts), then the one behind it
        ("deliver.before_send", 0, {"q1": "delivery_interrupted", "q2": "result"}, ["q2"]),
        # after its reply, before its answer's commit: its write was held, so none applied
        ("deliver.after_reply", 0, {"q1": "delivery_interrupted", "q2": "result"}, ["q2"]),
        ("deliver.before_send", 1, {"q1": "result", "q2": "delivery_interrupted"}, ["q1"]),
        ("deliver.after_reply", 1, {"q1": "result", "q2": "delivery_interrupted"}, ["q1"]),
    ],
    ids=["q1-before-send", "q1-after-reply", "q2-before-send", "q2-after-reply"],
)
def test_a_queued_call_crashed_in_delivery_ends_interrupted_and_ran_at_most_once(
    env: Env, point: str, after: int, finals: dict[str, str], items: list[str]
) -> None:
    run = env.drive([{"arm": [point, "crash", after]}, QUEUED, {"settle": True}])
    env.crashed_at(run, point)
    accepted_queued(run)
    assert outcome(env) == (finals, items)


@pytest.mark.parametrize("point", ["commit.after_write", "commit.after"])
def test_a_crash_at_every_commit_of_a_queued_delivery_never_runs_a_handler_twice(
    sqlite_env: Env, point: str
) -> None:
    """Crash at the n-th commit point after arming, for every n until the plan completes:
    inside each transaction before COMMIT (`after_write`: it is lost) and right after each
    COMMIT (`after`). Whatever the point, each handler ran at most once; a call with a
    result ran exactly once; one interrupted applied nothing (SPEC 17: its writes commit
    only with its answer); and the sweep passed through the window between q2's
    `delivered` and its result."""
    env = sqlite_env  # a fresh file per crash (the crash points themselves run on both)
    seen: set[tuple[str | None, bool]] = set()
    for n in range(60):
        env.db.unlink(missing_ok=True)
        for extra in env.db.parent.glob(env.db.name + "-*"):
            extra.unlink()
        run = env.drive([{"arm": [point, "crash", n]}, QUEUED, {"settle": True}])
        if run.done:
            break
        env.crashed_at(run, point)
        finals, items = outcome(env)
        for cid in ("q1", "q2"):
            assert items.count(cid) <= 1, (n, finals, items)
            if finals[cid] == "result":
                assert items.count(cid) == 1, (n, finals, items)
            if finals[cid] != "result":  # interrupted, or never stored: nothing applied
                assert items.count(cid) == 0, (n, finals, items)
            assert finals[cid] in (None, "result", "delivery_interrupted"), (n, finals)
        seen.add((finals["q2"], "q2" in items))
    else:
        raise AssertionError("the plan never completed")
    assert ("delivery_interrupted", False) in seen  # crashed after `delivered`
    assert ("result", True) in seen
