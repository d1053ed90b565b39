"""The faces an `AsyncRuntime` hands out: `art.outbox` (the Agent channel), `art.marks`
(an embedder's marks on accepted calls), `art.host`
(the Host simulator's event entry) and `art.surface(conversation_id, scope)` (the Surface's
view, and its UI Action entry, SPEC 17)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from typing import Any

from lineup_runtime_lite.api import reads, ui_actions
from lineup_runtime_lite.api.arguments import (
    Owner,
    check_ids,
    check_limit,
    check_position,
    usable_id,
)
from lineup_runtime_lite.api.clock import format_ts
from lineup_runtime_lite.core.actions import ActionEvent
from lineup_runtime_lite.core.messages import ActionAccepted, ActionOutcome, AgentMessage
from lineup_runtime_lite.host.simulator import HostSimulator
from lineup_runtime_lite.store import faults
from lineup_runtime_lite.validation.params import Rejection, check_envelope
from lineup_sdk.context import Snapshot
from lineup_sdk.errors import LineupError

__all__ = ["MAX_ACTION_SEQ", "AsyncMarks", "AsyncOutbox", "AsyncSurface"]


class AsyncOutbox:
    """`art.outbox`: the Agent channel, at least once (unacked items are fetched again)."""

    def __init__(self, rt: Owner) -> None:
        self._rt = rt

    async def fetch(self, limit: int = 100) -> list[AgentMessage]:
        """Up to `limit` (1–1000) unacknowledged messages, oldest first.

        Raises:
            LineupError: `usage_invalid` for a limit outside 1–1000.
        """
        check_limit(limit)
        self._rt._check_open()
        faults.hit("outbox.fetch")
        return self._rt._engine.facts.outbox_pending(limit)

    async def ack(self, ids: list[str]) -> None:
        """Mark messages (by their `id`) as received.

        Raises:
            LineupError: `usage_invalid` unless `ids` is a list of strings.
        """
        check_ids(ids)
        self._rt._check_open()
        faults.hit("outbox.ack")
        engine = self._rt._engine
        with engine.store.transaction(fault_points=False):
            engine.facts.ack(list(ids))

    async def all(self) -> list[AgentMessage]:
        """Every message ever written, acked or not (timelines and tests)."""
        self._rt._check_open()
        return self._rt._engine.facts.outbox_all()

    async def after(self, position: int = 0, limit: int = 100) -> tuple[list[AgentMessage], int]:
        """Up to `limit` (1–1000) messages written after `position`, acked or not, oldest
        first, and the position to read from next (`position` again when there were none):
        a reader that follows the outbox (a timeline) reads what is new, never the history
        before it. Positions are the store's own (0 is before the first message).

        Raises:
            LineupError: `usage_invalid` for a limit outside 1–1000 or a negative position.
        """
        check_position(position)
        check_limit(limit)
        self._rt._check_open()
        rows = self._rt._engine.facts.outbox_after(position, limit)
        return [m for _, m in rows], (rows[-1][0] if rows else position)


class AsyncMarks:
    """`art.marks`: short snake_case marks an embedder keeps with accepted calls, in the
    state beside them, as long as the call (they survive restarts: `lineup serve` marks
    the calls that created MCP tasks)."""

    def __init__(self, rt: Owner) -> None:
        self._rt = rt

    async def add(self, call_id: str, mark: str) -> None:
        """Keep `mark` with the accepted call `call_id` (once; adding it again changes
        nothing).

        Raises:
            LineupError: `usage_invalid` for a mark that is not a short snake_case name or a
                call_id the runtime never accepted.
        """
        self._rt._check_open()
        reads.mark_call(self._rt._engine, call_id, mark)

    async def has(self, call_id: str, mark: str) -> bool:
        """Whether `add(call_id, mark)` was done (in this or an earlier process)."""
        self._rt._check_open()
        return self._rt._engine.facts.call_marked(mark, call_id)

    async def calls(
        self,
        mark: str,
        conversation_id: str | None = None,
        *,
        after: str | None = None,
        limit: int | None = None,
    ) -> list[str]:
        """The call_ids marked with `mark` (of one conversation), oldest first; with
        `after` (a call_id this returned), the ones after it; at most `limit`.

        Raises:
            LineupError: `usage_invalid` for a bad mark, conversation id or limit.
        """
        self._rt._check_open()
        return reads.marked_calls(self._rt._engine.facts, mark, conversation_id, after, limit)


class _AsyncHostPort:
    """`art.host`: the Host simulator's event entry point."""

    def __init__(self, rt: Owner, sim: HostSimulator) -> None:
        self._rt, self.simulator = rt, sim

    async def event(
        self, event: str, *, conversation: str, scope: str, instance: str | None = None
    ) -> bool:
        """Send a Host event through the simulator; without `instance`, the latest the
        runtime asked the Host to show for that conversation and scope (else its latest
        instance, live or ended). Returns whether the runtime applied it: an event the rules
        ignore (stale, or foreign to that conversation) is False.

        Raises:
            LineupError: `usage_invalid` for an unknown event, a bad conversation or scope,
                or when there is no instance to address (nothing was started there).
        """
        from lineup_runtime_lite.host.simulator import EVENTS

        rt = self._rt
        rt._check_open()
        usable_id("conversation", conversation)
        usable_id("scope", scope)
        if event not in EVENTS:
            raise LineupError(
                "usage_invalid",
                f"unknown Host event {str(event)[:60]!r}",
                hint=f"one of: {', '.join(EVENTS)}",
            )
        if instance is not None:
            usable_id("instance", instance)
        inst = instance or self._instance_for(conversation, scope)
        applied = await self.simulator.send(event, inst, conversation, scope)
        await rt.settle()
        return applied

    def _instance_for(self, conversation: str, scope: str) -> str:
        inst = self.simulator.instance_for(conversation, scope)
        if inst is not None:
            return inst
        _, act = self._rt._engine.facts.session_and_activation(conversation, scope)
        if act is None:
            raise LineupError(
                "usage_invalid",
                f"no instance to address: conversation {conversation!r} has started no "
                f"instance of {scope!r}",
                hint="send the Host event after a call that starts the app (its answer "
                "is `accepted` with `activation: starting`), or pass instance=",
            )
        return act.activation_id


class AsyncSurface:
    """`art.surface(conversation_id, scope)`: the Surface's read-only view of one
    conversation's App session for a scope."""

    conversation_id: str
    scope: str

    def __init__(self, rt: Owner, conversation_id: str, scope: str) -> None:
        self._rt, self.conversation_id, self.scope = rt, conversation_id, scope

    async def get(self) -> Snapshot:
        """The current session data (`Snapshot(None, 0)` when nothing is stored)."""
        self._rt._check_open()
        return self._rt._engine.surface_get(self.conversation_id, self.scope)

    async def subscribe(self, listener: Callable[[str, Snapshot], None]) -> Callable[[], None]:
        """Current snapshot first, then every change with strictly increasing revisions.

        The listener runs on a thread of its own subscription, never on the loop; returns
        (once the first frame was delivered) a function that unsubscribes, to call on
        this loop."""
        if not callable(listener):
            raise LineupError("usage_invalid", "subscribe(listener) takes a callable")
        rt, conv, scope = self._rt, self.conversation_id, self.scope
        rt._check_open()
        engine = rt._engine
        key = (scope, conv)
        token = engine.subs.add(key, listener, engine.surface_get(conv, scope))
        sub = engine.subs.subscription(key, token)
        assert sub is not None  # added just now, on this loop
        await asyncio.get_running_loop().run_in_executor(None, sub.wait)

        def unsubscribe() -> None:
            if not rt._closed:  # a closed runtime holds no listeners any more
                rt._engine.subs.remove(key, token)

        return unsubscribe

    async def replace(self, data: Any, *, expected_revision: int) -> Snapshot:
        """A Surface write: refused this iteration (only handlers write session data; a
        Surface write waits for the mutation queue, SPEC 5.5 and 14).

        Raises:
            LineupError: `session_data_write_not_allowed`, always.
        """
        from lineup_runtime_lite.host.surface_client import surface_write_refused

        raise surface_write_refused()

    async def act(
        self,
        name: Any,
        params: Any,
        *,
        client_id: Any,
        seq: Any,
        timeout: float | None = None,
    ) -> ActionOutcome:
        """Ask for a UI Action (SPEC 17): `client_id` (1–64 of `[A-Za-z0-9_-]`) numbers its
        actions in this App session 1, 2, 3… (`seq`); the action is persisted, queued with
        the session's calls, applied in its turn, and its outcome returned:
        `{"action_id": "<client_id>:<seq>", "result", "revision"}` (`revision`: the session
        data's revision after it). A `seq` used before answers that action's outcome
        (waiting for it if it has none yet) and appends nothing.

        `timeout` bounds the wait in seconds (default: the activation timeout plus the
        action's `timeout_s`).

        Raises:
            LineupError: before acceptance, nothing persisted — `unknown_action`,
                `invalid_params` (also for a `client_id` or `seq` outside its limits),
                `app_not_running`, `action_out_of_order`, `action_id_conflict`; the
                outcome's code (`app.<code>` for a `ToolError`, `handler_timeout`,
                `handler_result_invalid`, `delivery_interrupted`, `activation_failed`,
                `activation_cancelled`, …); `action_pending` when `timeout` ran out (the
                action stays queued); `usage_invalid` for a bad `timeout` or once closed.
        """
        rt = self._rt
        rt._check_open()
        if timeout is not None and (
            type(timeout) not in (int, float) or not 0 <= timeout < float("inf")
        ):
            raise LineupError("usage_invalid", "act(timeout=) takes seconds (a number ≥ 0)")
        ev, value = _action_event(
            self.conversation_id, self.scope, name, params, client_id, seq, rt._max_params_bytes
        )
        return await ui_actions.act(rt._engine, ev, value, timeout=timeout)

    async def submit(
        self,
        name: Any,
        params: Any,
        *,
        client_id: Any,
        seq: Any,
        timeout: float | None = None,
    ) -> tuple[ActionAccepted, asyncio.Future[ActionOutcome]]:
        """`act()` in its two halves, as the Surface bridge answers them (SPEC 17): returns
        once the action is accepted (persisted; or found, for a `seq` used before) with
        `({"action_id", "seq"}, outcome)`, where `outcome` resolves as `act()` returns or
        raises. A rejection before acceptance is raised here, and nothing was persisted.

        Raises:
            LineupError: as `act()` before acceptance (`unknown_action`, `invalid_params`,
                `app_not_running`, `action_out_of_order`, `action_id_conflict`,
                `usage_invalid`).
        """
        rt = self._rt
        rt._check_open()
        if timeout is not None and (
            type(timeout) not in (int, float) or not 0 <= timeout < float("inf")
        ):
            raise LineupError("usage_invalid", "submit(timeout=) takes seconds (a number ≥ 0)")
        ev, value = _action_event(
            self.conversation_id, self.scope, name, params, client_id, seq, rt._max_params_bytes
        )
        accepted: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def on_accepted() -> None:
            if not accepted.done():
                accepted.set_result(None)

        outcome = asyncio.ensure_future(
            ui_actions.act(rt._engine, ev, value, timeout=timeout, accepted=on_accepted)
        )
        try:
            waits: set[asyncio.Future[Any]] = {accepted, outcome}
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            outcome.cancel()
            raise
        if not accepted.done():  # rejected before acceptance: raise its error
            accepted.cancel()
            outcome.result()
        return {"action_id": ev.action_id, "seq": ev.client_seq}, outcome

    async def operations(self) -> list[dict[str, Any]]:
        """The Runtime's operation facts for this session (e.g. a focus and its `ends_at`)."""
        rt = self._rt
        rt._check_open()
        return [
            {
                "kind": r["kind"],
                "state": r["state"],
                "started_at": format_ts(r["started_ms"]),
                "ends_at": format_ts(r["ends_ms"]),
                "ended_at": format_ts(r["ended_ms"]) if r["ended_ms"] is not None else None,
            }
            for r in rt._engine.facts.operations_of(self.conversation_id, self.scope)
        ]


#: A Surface client's id (SPEC 17).
_CLIENT_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
#: The largest `seq` of a UI Action (JavaScript's largest safe integer).
MAX_ACTION_SEQ = 2**53 - 1


def _action_event(
    conversation_id: str,
    scope: str,
    name: Any,
    params: Any,
    client_id: Any,
    seq: Any,
    max_bytes: int,
) -> tuple[ActionEvent, Any]:
    """A UI Action's envelope checked (any thread): its event (canonical params and their
    fingerprint) and its strict-JSON params.

    Raises:
        LineupError: `invalid_params` for a `client_id`, `seq`, `name` or params outside
            their limits (`params_too_large` past the runtime's bound).
    """
    if type(client_id) is not str or not _CLIENT_ID.fullmatch(client_id):
        raise LineupError(
            "invalid_params",
            "client_id must be 1–64 characters of A-Z, a-z, 0-9, _ and -",
            details=[{"path": "/client_id", "value": repr(client_id)[:120]}],
        )
    if type(seq) is not int or not 1 <= seq <= MAX_ACTION_SEQ:
        raise LineupError(
            "invalid_params",
            f"seq must be an integer from 1 to {MAX_ACTION_SEQ}",
            details=[{"path": "/seq", "value": repr(seq)[:120]}],
        )
    if type(name) is not str or not 1 <= len(name) <= 200:
        raise LineupError("invalid_params", "name must be a string of 1–200 characters")
    action_id = f"{client_id}:{seq}"
    checked = check_envelope(action_id, conversation_id, name, params, max_bytes=max_bytes)
    if isinstance(checked, Rejection):
        raise LineupError(checked.code, checked.message, details=checked.details)
    ev = ActionEvent(
        conversation_id, scope, name, checked.params_json, checked.fingerprint, client_id, seq
    )
    return ev, checked.params
