"""A transition-level "engine" for tests: the production steps (`drivers/steps.py`: what
the engine and the drivers read and ask, acceptance included) over the production store on
SQLite `:memory:`, driven synchronously (no loop, no workers, no Host), each decision
committed through `Store.batch` (the group commit's own path) in its own savepoint.

The Hypothesis state machine and the conformance replay so run the production decisions:
changing a transition's answer fails them (tests/runtime/core/test_production_decisions.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from lineup_runtime_lite.core import pomodoro
from lineup_runtime_lite.core.activations import (
    host_event_action,
    intent_delivered,
    supersede_ended,
)
from lineup_runtime_lite.core.calls import CallEvent, NewIds
from lineup_runtime_lite.core.decisions import Decision
from lineup_runtime_lite.core.deliveries import (
    answer_delivery,
    commit_pending,
    hold_replace,
    interrupt_delivery,
    next_delivery,
)
from lineup_runtime_lite.core.messages import fingerprint
from lineup_runtime_lite.core.rows import Call, RegistryEntry, Session
from lineup_runtime_lite.drivers import steps
from lineup_runtime_lite.store.facts import Facts, LostRace, SqlFacts
from lineup_runtime_lite.store.sqlite import Store
from lineup_runtime_lite.validation.params import canonical_text
from lineup_sdk.context import Snapshot

EPOCH = 1_767_225_600_000  # the virtual clock's default start (2026-01-01T00:00:00Z)


def tool(
    method: str,
    *,
    activation: str = "app_ready",
    delivery: str = "miniapp_sdk",
    long_running: bool = False,
    handler_key: str | None = None,
    version: str = "1.0.0",
    timeout_s: float = 30.0,
) -> RegistryEntry:
    """A Registry record as `install.load_tools` makes it."""
    return RegistryEntry(
        method=method,
        scope=method.split(".")[0],
        version=version,
        description=method,
        delivery=delivery,
        activation=activation,
        long_running=long_running,
        timeout_s=timeout_s,
        input_schema={"type": "object"},
        result_schema={},
        handler_key=handler_key,
    )


def pomodoro_tools(scope: str = "pomodoro") -> list[RegistryEntry]:
    return [
        tool(
            f"{scope}.start",
            activation="foreground_required",
            delivery="runtime",
            long_running=True,
            handler_key="pomodoro.start",
        ),
        tool(
            f"{scope}.interrupt",
            activation="activation_not_required",
            delivery="runtime",
            handler_key="pomodoro.interrupt",
        ),
    ]


def event(call_id: str, conversation: str, method: str, params: Any = None) -> CallEvent:
    """A call that passed the envelope checks (canonical params, its fingerprint)."""
    params = {} if params is None else params
    return CallEvent(
        call_id,
        conversation,
        method,
        canonical_text(params),
        fingerprint(conversation, method, params),
    )


@dataclass
class Kit:
    """The production steps over one SQLite `:memory:` store, driven by hand.

    `decide` commits one step through `Store.batch`: the step reads, the transition
    decides, the changes are applied; a `LostRace` rolls its savepoint back and the step
    returns None.
    """

    tools: list[RegistryEntry]
    now: int = EPOCH
    timeout_ms: int = 60_000
    store: Store = field(default_factory=lambda: Store(":memory:"))
    lost: int = 0
    #: Every decision a step made, committed or not (tests replay them on another store).
    log: list[Decision] = field(default_factory=list)
    _n: int = 0

    def __post_init__(self) -> None:
        for scope, version in sorted({(x.scope, x.version) for x in self.tools}):
            self.facts.make_current(scope, version)

    # -- plumbing ------------------------------------------------------------------------
    @property
    def facts(self) -> SqlFacts:
        """Reads outside a step (the store's own connection, as the engine's)."""
        return self.store.facts

    def dump(self) -> dict[str, list[tuple[Any, ...]]]:
        """Every row of every table (to compare two states)."""
        return self.store.dump()

    def close(self) -> None:
        self.store.close()

    @property
    def registry(self) -> dict[str, RegistryEntry]:
        return {x.method: x for x in self.tools}

    def tools_of(self, scope: str, version: str) -> Mapping[str, RegistryEntry]:
        return {x.method: x for x in self.tools if x.scope == scope and x.version == version}

    def methods_for(self, scope: str, handler_key: str) -> list[str]:
        return [x.method for x in self.tools if x.scope == scope and x.handler_key == handler_key]

    def ids(self) -> NewIds:
        self._n += 1
        return NewIds(f"ses{self._n}", f"inst{self._n}", f"op{self._n}")

    def decide(self, step: Callable[[Facts], Decision | None]) -> Decision | None:
        def applying(tx: Facts) -> Decision | None:
            decision = step(tx)
            if decision is not None:
                self.log.append(decision)
                for change in decision.changes:
                    tx.apply(change)
            return decision

        (out,) = self.store.batch([applying])
        if isinstance(out, LostRace):
            self.lost += 1
            return None
        if isinstance(out, BaseException):
            raise out
        return out

    def apply(self, decision: Decision | None) -> Decision | None:
        """Commit a decision made before (its guards re-check)."""
        if decision is None:
            return None
        return self.decide(lambda tx: decision)

    # -- Agent calls (the engine's acceptance step) --------------------------------------
    def call(self, ev: CallEvent, *, idle: bool | None = None) -> Decision | None:
        """Accept one call through `steps.accept` (what `Engine.call` commits); a session
        is idle when nothing of it is `delivered` (`idle` may say it is not)."""

        def free(tx: Facts, session: Session, method: str) -> bool:
            return (idle is None or idle) and not tx.delivered_calls(session.app_session_id)

        return self.decide(
            steps.accept(
                ev,
                self.registry.get(ev.method),
                None,
                pomodoro.HANDLERS,
                now=self.now,
                timeout_ms=self.timeout_ms,
                draw_ids=self.ids,
                idle=free,
                tools_of=self.tools_of,
                methods_for=self.methods_for,
            )
        )

    # -- activations (ActivationDriver) --------------------------------------------------
    def advance(
        self, act_id: str, *, worker_up: bool = False, confirmed: bool = False
    ) -> Decision | None:
        step = steps.advance(
            act_id,
            self.tools_of,
            pomodoro.HANDLERS,
            now=self.now,
            operation_id=self.ids().operation,
            worker_up=worker_up,
            confirmed=confirmed,
        )
        return self.decide(step)

    def end(
        self, act_id: str, state: str, reason: str, *, cause: str | None = None
    ) -> Decision | None:
        return self.decide(
            steps.end(act_id, self.tools_of, state, reason, now=self.now, cause=cause)
        )

    def host_event(
        self, event_: str, instance: str, conversation: str, scope: str
    ) -> Decision | None:
        act = self.facts.activation(instance)
        session = self.facts.session_by_id(act.app_session_id) if act is not None else None
        action = host_event_action(act, session, event_, conversation, scope)
        if action == "confirm":
            return self.advance(instance, confirmed=True)
        if action == "fail":
            return self.end(instance, "failed", "host_failed")
        if action == "leave":
            return self.end(instance, "cancelled", "user_left")
        return None

    def worker_lost(self, act_id: str) -> Decision | None:
        return self.decide(steps.worker_lost(act_id, self.tools_of, now=self.now))

    # -- delivery (DeliveryDriver) -------------------------------------------------------
    def deliver_next(self, session_id: str) -> Call | None:
        """Commit the session's next delivery; the call now `delivered`, or None."""
        now = self.now

        def step(tx: Facts) -> Decision | None:
            head = tx.queue_head(session_id)
            if head is None:
                return None
            session = tx.session_by_id(session_id)
            assert session is not None
            assert isinstance(head[0], Call), "this kit queues calls only"
            tool_ = self.tools_of(session.scope, session.version).get(head[0].method)
            return next_delivery(head, tool_, now)

        decision = self.decide(step)
        if decision is None or decision.deliver is None:
            return None
        return self.facts.call(decision.deliver)

    def answer(self, call: Call, **outcome: Any) -> Decision | None:
        now = self.now
        tool_ = self.registry[call.method]
        return self.decide(lambda tx: answer_delivery(call, tool_, now=now, **outcome))

    def interrupt(self, call: Call) -> Decision | None:
        now = self.now
        return self.decide(lambda tx: interrupt_delivery(call, now))

    # -- clock and Host relay ------------------------------------------------------------
    def tick(self) -> list[Decision | None]:
        out = [self.end(a, "failed", "timeout") for a in self.facts.due_activations(self.now)]
        out += [
            self.apply(d) for d in pomodoro.HANDLERS["pomodoro.start"].due(self.facts, self.now)
        ]
        return out

    def relay(self, take: Callable[[dict[str, Any]], None]) -> int:
        """Hand every deliverable Host intent to `take` (the Host), per instance, oldest
        first; ended instances' intents are superseded. Returns how many were taken."""
        taken = 0
        while True:
            heads = self.facts.intent_heads()
            if not heads:
                return taken
            superseded = supersede_ended(heads)
            if superseded is not None:
                self.apply(superseded)
                continue
            head = heads[0]
            take(json.loads(head.body))
            taken += 1
            self.apply(intent_delivered(head))

    def replace_session_data(self, scope: str, session_id: str, data: Any, expected: Any) -> Any:
        """A delivery that writes once and answers (SPEC 17): the write held through the
        transition, then committed by `commit_pending` as the answer's step does; the new
        snapshot, or the `LineupError` it raised (nothing written)."""
        made: list[Any] = []

        def step(tx: Facts) -> Decision:
            committed = tx.session_revision(scope, session_id)
            held = hold_replace(None, committed, scope, session_id, data, expected)
            written = commit_pending(held, tx.session_revision(scope, session_id))
            assert written is not None
            made.append(Snapshot(json.loads(held.data), held.revision))
            return Decision(written)

        if self.decide(step) is None:
            return None
        return made[-1]


def stages(facts: Facts, call_id: str) -> list[str]:
    return [m["stage"] for m in facts.messages(call_id)]


def outbox_ids(facts: Facts) -> list[str]:
    return [m["id"] for m in facts.outbox_all()]


def changes_of(decision: Decision | None) -> list[type[Any]]:
    assert decision is not None
    return [type(c) for c in decision.changes]


def only(items: Iterable[Any]) -> Any:
    (item,) = list(items)
    return item
