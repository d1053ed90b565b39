"""A call delivered twice after a failed group commit (found by issue 33's statement sweep,
SPEC 5.2 and 5.6: commit before side effects, at-most-once delivery).

PostgreSQL runs a batch's steps more than once before its COMMIT: pipelined first, then
again carefully when a step lost its race (two calls to one App session in one batch: the
second one's read taken ahead went stale), or from the start after a serialization failure.
The acceptance step of a call the session could take at once reserved the session for a
send right after COMMIT, and the reservation of the first run stayed: the second run found
the session busy (reserved by that first run, or marked to be kicked by the queued call
behind it), committed the call as `queued`, and it was sent at once all the same. When the
commit of its answer then failed, the queue still held the call and sent it again:
`probe.append` applied its item twice. SQLite runs each step once; the same scenarios are
checked there too. Every send is recorded with the call's stored state at that moment: a
call is sent once, and only once its commit says `delivered`.

Deterministic: the errors are raised in place of chosen statements (`tests/faults/
statements.py`), found by what they say, not by counting.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from lineup_build.trust import TrustStore
from lineup_runtime_lite import HostSimulator, Runtime, VirtualClock
from lineup_runtime_lite.drivers.delivery import DeliveryDriver
from lineup_sdk.errors import LineupError
from tests.faults import invariants
from tests.faults.statements import KINDS, Injector, injecting
from tests.store_kit import chosen_engine

#: Where the answer's batch fails: its BEGIN, the lease guard, `txid_current()` (SQLite:
#: its BEGIN IMMEDIATE and the first write of its step).
AT = {"postgresql": ("BEGIN", "lease guard", "txid_current"), "sqlite": ("BEGIN", "write")}


class _Plan:
    """Raise errors in place of chosen statements, each once, in order: `rules` are
    (does this statement start the count, how many statements after it, the error)."""

    def __init__(self, rules: list[tuple[Callable[[str], bool], int, BaseException]]) -> None:
        self.rules = rules
        #: Statements since the current rule's start, on the thread that sent that one (a
        #: read on another thread meanwhile is another connection's).
        self.after: int | None = None
        self.thread: int | None = None
        self.fired: list[str] = []
        self.lock = threading.Lock()

    def statement(self, sql: Any = None) -> None:
        if threading.current_thread().name.startswith("lineup-node-"):
            return  # the lease's own threads (heartbeat, listener)
        text = str(sql).strip()
        with self.lock:
            if not self.rules:
                return
            starts, offset, exc = self.rules[0]
            if self.after is None:
                if not starts(text):
                    return
                self.after, self.thread = 0, threading.get_ident()
            elif self.thread == threading.get_ident():
                self.after += 1
            else:
                return
            if self.after < offset:
                return
            self.rules.pop(0)
            self.after = None
            self.fired.append(text[:60])
        raise exc


def _session_items(rt: Runtime) -> list[str]:
    rows = rt.store_dump()["session_data"]
    assert len(rows) <= 1, rows
    if not rows:
        return []
    items: list[str] = json.loads(rows[0][3])["items"]
    return items


def _finals(rt: Runtime, call_id: str) -> list[tuple[Any, ...]]:
    return [
        r for r in rt.store_dump()["receipts"] if r[0] == call_id and r[1] in ("result", "error")
    ]


@pytest.fixture
def engine(store_engine: str) -> str:
    """The chosen store engine; the PostgreSQL-only tests below name theirs."""
    return store_engine


@pytest.fixture
def opened(
    engine: str,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    trust: TrustStore,
    probe_bundle: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[tuple[Runtime, Injector]]:
    """A runtime whose probe worker is up (so a call may be sent at once), every statement
    passing through an `Injector` (idle until a test gives it a plan)."""
    with injecting(monkeypatch, engine) as injector:
        injector.statement = lambda sql=None: None  # type: ignore[method-assign]
        if engine == "postgresql":
            target = str(request.getfixturevalue("pg_url"))
            nodes: dict[str, Any] = {"node_id": "main", "node_lease_s": 5.0}
        else:
            target, nodes = str(tmp_path / "rt.db"), {}
        rt = Runtime.open(
            target,
            trust=trust,
            clock=VirtualClock(),
            host=HostSimulator("auto"),
            apps_dir=tmp_path / "apps",
            **nodes,
        )
        try:
            rt.install(probe_bundle)
            assert rt.call("up", "conv", "probe.echo", {"text": "up"})["stage"] == "accepted"
            rt.settle()
            yield rt, injector
        finally:
            rt.close()


def _answer_fails(engine: str, at: str) -> tuple[Callable[[str], bool], int, BaseException]:
    """The rule: the answer's batch of the first call sent — the batch that would write
    the session data its handler holds (SPEC 17) — fails at `at`, with the error a lock
    timeout on the lease guard raises. It is the first batch after the handler's
    `replace`, which reads the committed revision and writes nothing."""
    make = KINDS[engine]["operational_error"]
    seen: list[bool] = []

    def starts(text: str) -> bool:
        if text.startswith("SELECT revision FROM session_data"):
            seen.append(True)
            return False
        return bool(seen) and text.startswith("BEGIN")

    return starts, AT[engine].index(at), make()


@pytest.fixture
def sends(
    opened: tuple[Runtime, Injector], monkeypatch: pytest.MonkeyPatch
) -> list[tuple[str, str | None]]:
    """Every send to a worker once the runtime is up: the call, and its state in the
    store as it is sent."""
    out: list[tuple[str, str | None]] = []
    real_start = DeliveryDriver._start

    def start(self: DeliveryDriver, session: Any, tool: Any, call: Any, worker: Any) -> Any:
        stored = self.shell.facts.call(call.call_id)
        out.append((call.call_id, stored.state if stored is not None else None))
        return real_start(self, session, tool, call, worker)

    monkeypatch.setattr(DeliveryDriver, "_start", start)
    return out


def _check_once(
    rt: Runtime, call_ids: list[str], items: list[str], sends: list[tuple[str, str | None]]
) -> None:
    """Each call sent once, and only once its commit says `delivered`; `items` applied
    exactly once each (a call whose answer failed applied nothing: SPEC 17), each call
    answered once, the facts whole; a retry with the same call_id replays what was stored
    and applies nothing."""
    rt.settle()
    assert sends == [(c, "delivered") for c in call_ids], sends
    assert _session_items(rt) == items, "an item applied twice (or lost)"
    for call_id in call_ids:
        assert len(_finals(rt, call_id)) == 1, (call_id, _finals(rt, call_id))
    invariants.check(rt)
    for call_id in call_ids:
        stored = rt.call_record(call_id)
        assert stored is not None
        sent = f"i{call_id[1:]}"  # the item call m1 (s1, q1) sent is i1
        again = rt.call(call_id, "conv", "probe.append", {"item": sent})
        assert again == stored["messages"][-1], (again, stored)
    rt.settle()
    assert _session_items(rt) == items
    assert len(sends) == len(call_ids), sends
    invariants.check(rt)


@pytest.mark.store
@pytest.mark.parametrize("at", AT[chosen_engine()])  # where the chosen engine's batch fails
def test_an_answer_whose_batch_fails_applies_nothing_and_is_sent_once(
    opened: tuple[Runtime, Injector],
    engine: str,
    at: str,
    sends: list[tuple[str, str | None]],
) -> None:
    """`call_many([append m1, append m2])` on one App session, the first answer's batch
    failing: m1 ran once and, its answer lost with its write, ends interrupted having
    applied nothing; m2 once; nothing sent twice."""
    rt, injector = opened
    plan = _Plan([_answer_fails(engine, at)])
    injector.statement = plan.statement  # type: ignore[method-assign]
    out = rt.call_many([(f"m{n}", "conv", "probe.append", {"item": f"i{n}"}) for n in (1, 2)])
    assert len(plan.fired) == 1, "the failure was not injected"
    assert [m["call_id"] for m in out] == ["m1", "m2"]
    assert out[0]["error"]["code"] == "delivery_interrupted"
    _check_once(rt, ["m1", "m2"], ["i2"], sends)


@pytest.mark.parametrize("engine", ["postgresql"])  # SQLite never runs a step again
def test_a_call_accepted_after_a_serialization_failure_is_sent_once(
    opened: tuple[Runtime, Injector], engine: str, sends: list[tuple[str, str | None]]
) -> None:
    """PostgreSQL runs the acceptance batch again from its start after a serialization
    failure: the call is sent once, as `delivered`, and its failed answer does not send
    it again (nor apply its write)."""
    rt, injector = opened
    race = KINDS[engine]["serialization_failure"]()
    plan = _Plan(
        [(lambda s: s.startswith("INSERT INTO calls"), 0, race), _answer_fails(engine, "BEGIN")]
    )
    injector.statement = plan.statement  # type: ignore[method-assign]
    rt.call("s1", "conv", "probe.append", {"item": "i1"})
    rt.settle()
    assert len(plan.fired) == 2, plan.fired
    _check_once(rt, ["s1"], [], sends)


@pytest.mark.parametrize("engine", ["postgresql"])
def test_a_run_again_that_decides_queued_sends_nothing_at_once(
    opened: tuple[Runtime, Injector],
    engine: str,
    monkeypatch: pytest.MonkeyPatch,
    sends: list[tuple[str, str | None]],
) -> None:
    """The acceptance step runs again (a serialization failure) and this time finds the
    session busy (`idle` says no: a pump started meanwhile, say): the call is queued, and
    only its queue sends it — not also the reservation of the first run."""
    rt, injector = opened
    asked: list[bool] = []
    real_idle = DeliveryDriver.idle

    def idle(self: DeliveryDriver, session: Any, method: str) -> bool:
        answer = real_idle(self, session, method) and not asked
        asked.append(answer)
        return answer

    monkeypatch.setattr(DeliveryDriver, "idle", idle)
    race = KINDS[engine]["serialization_failure"]()
    plan = _Plan([(lambda s: s.startswith("INSERT INTO calls"), 0, race)])
    injector.statement = plan.statement  # type: ignore[method-assign]
    assert rt.call("q1", "conv", "probe.append", {"item": "i1"})["stage"] == "result"
    rt.settle()
    assert asked == [True, False] and len(plan.fired) == 1, (asked, plan.fired)
    _check_once(rt, ["q1"], ["i1"], sends)


@pytest.mark.store
def test_a_failed_acceptance_batch_applies_nothing_and_its_retry_applies_once(
    opened: tuple[Runtime, Injector], engine: str, sends: list[tuple[str, str | None]]
) -> None:
    """The acceptance batch itself failing at its BEGIN: nothing stored, nothing sent; the
    same calls again apply each item once."""
    rt, injector = opened
    make = KINDS[engine]["operational_error"]
    plan = _Plan([(lambda s: s.startswith("BEGIN"), 0, make())])
    injector.statement = plan.statement  # type: ignore[method-assign]
    calls = [(f"m{n}", "conv", "probe.append", {"item": f"i{n}"}) for n in (1, 2)]
    with pytest.raises(LineupError) as failed:
        rt.call_many(calls)
    assert failed.value.code == "store_unavailable"
    rt.settle()
    assert rt.store_dump()["session_data"] == []
    assert _finals(rt, "m1") == [] and _finals(rt, "m2") == []
    out = rt.call_many(calls)
    assert [m["stage"] for m in out] == ["result", "result"], out
    _check_once(rt, ["m1", "m2"], ["i1", "i2"], sends)
