"""Delivery: the per-session serial pump, at-most-once sends to workers, and the session
data requests of the handlers they run.

Every delivery is atomic (SPEC 17): what its handler writes is held in the delivery's grant
as canonical JSON bytes (`PendingData`), `get` reads it back, and nothing is committed or
framed until the delivery's answer, which writes it in the same transaction as one revision.
A delivery that fails, times out or is interrupted drops it: nothing was applied."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
import sys
from dataclasses import dataclass
from typing import Any

from lineup_runtime_lite.core.decisions import Decision, ReplaceSessionData
from lineup_runtime_lite.core.deliveries import (
    answer_action,
    answer_delivery,
    hold_replace,
    interrupt_action,
    interrupt_delivery,
    next_delivery,
)
from lineup_runtime_lite.core.messages import Checked
from lineup_runtime_lite.core.port import Facts
from lineup_runtime_lite.core.rows import (
    Action,
    ActionEntry,
    Call,
    PendingData,
    RegistryEntry,
    Session,
)
from lineup_runtime_lite.drivers import STEP_TRIES, steps
from lineup_runtime_lite.drivers.shell import Shell
from lineup_runtime_lite.drivers.subscriptions import SubscriptionHub
from lineup_runtime_lite.drivers.workers import WorkerPool
from lineup_runtime_lite.processes.worker import Worker, WorkerError
from lineup_runtime_lite.store import faults
from lineup_runtime_lite.validation.checks import acheck_value
from lineup_sdk.context import Snapshot
from lineup_sdk.errors import LineupError

__all__ = ["DeliveryDriver"]

log = logging.getLogger("lineup.runtime")


class DeliveryDriver:
    """Deliver the queued calls and UI Actions of each App session to its worker, one at
    a time per session in `seq` order (one queue, SPEC 17); answer each once."""

    def __init__(self, shell: Shell, pool: WorkerPool, subs: SubscriptionHub) -> None:
        self.shell = shell
        self.pool = pool
        self.subs = subs
        self._pumps: dict[str, asyncio.Task[None]] = {}
        #: Sessions a decision in the current batch chose to send to at once (their pump
        #: starts after the commit): no second call of theirs may be sent meanwhile.
        self._claimed: set[str] = set()
        self._caps: dict[str, _Grant] = {}  # capability -> what it grants
        #: Sessions kicked since their pump last looked at the queue: a fast send is
        #: followed by a pump step only when something may be waiting behind it.
        self._dirty: set[str] = set()
        #: Sessions a decision of the batch being written will kick (`will_kick`).
        self._kicking: set[str] = set()
        #: Sessions whose pump gave up on a failing step: their queue waits for a kick.
        self._stalled: set[str] = set()
        #: Pending snapshots held per worker (SPEC 13.3's bridge-flow bound counts them: at
        #: most `max_requests` per worker; a first write past it waits for a slot).
        self._held: dict[Worker, int] = {}
        self._slot_waiters: dict[Worker, list[asyncio.Future[None]]] = {}

    # -- the fast path -------------------------------------------------------------------
    def idle(self, session: Session, method: str) -> bool:
        """A call of `method` may be sent right after its commit: nothing may be queued
        ahead of it (SPEC 5.2: arrival order) — the session's pump is not sending, no
        decision earlier in this batch will kick it (an activation that became ready there
        has not started its pump yet: that happens after the COMMIT, so "no pump" alone
        does not mean "empty queue"), no pump gave up on its queue — and its worker is up
        and its version serves the method from the SDK."""
        sid = session.app_session_id
        if sid in self._claimed or sid in self._kicking or sid in self._stalled:
            return False
        pump = self._pumps.get(sid)
        if pump is not None and not pump.done():
            return False
        if self.pool.live(session.scope, session.version, session.app_session_id) is None:
            return False
        pinned = self.shell.tools_of(session.scope, session.version).get(method)
        return pinned is not None and pinned.delivery == "miniapp_sdk"

    def will_kick(self, session_ids: tuple[str, ...]) -> None:
        """A decision of the batch being written kicks these sessions after its COMMIT:
        until then no call of theirs takes the fast path (`kick` clears the mark; a batch
        that failed leaves it, which only sends the next call through the queue)."""
        self._kicking.update(session_ids)

    def claim(self, session_id: str) -> None:
        self._claimed.add(session_id)

    def release(self, session_id: str) -> None:
        self._claimed.discard(session_id)

    def send_claimed(self, session: Session, call: Call) -> None:
        """After the commit that marked `call` delivered: send it now (the line is written
        before this returns), then a task waits for the answer and pumps what is behind."""
        sid = session.app_session_id
        self._claimed.discard(sid)
        tool = self.shell.tools_of(session.scope, session.version)[call.method]
        worker = self.pool.sendable(session.scope, session.version, session.app_session_id)
        flight: _Flight | None = None
        try:
            if worker is None:  # it died between the decision and its commit
                raise WorkerError("crashed", "the worker stopped")
            flight = self._start(session, tool, call, worker)
        except Exception as exc:  # the pump ends a call left `delivered` (at most once)
            log.warning("delivery step failed: %s: %s", type(exc).__name__, exc)
            self._dirty.add(sid)
        self._set_pump(sid, self.shell.spawn(self._finish_then_pump(sid, flight)))

    async def _finish_then_pump(self, session_id: str, flight: _Flight | None) -> None:
        if flight is not None:
            try:
                await self._finish(flight)
            except Exception as exc:  # the pump ends a call left `delivered` (at most once)
                log.warning("delivery step failed: %s: %s", type(exc).__name__, exc)
                self._dirty.add(session_id)
                # its answer may have committed before the step failed: its waiter hears
                # it now (as the pump's failed steps do), not never
                self.shell.wake_waiters()
        if session_id in self._dirty:
            await self._pump(session_id)

    # -- the pump ------------------------------------------------------------------------
    def kick(self, session_id: str) -> None:
        """Make sure the session's serial delivery pump is running (on its owner: another
        node's session is woken there, `Engine.perform`)."""
        if not self.shell.owns(session_id):
            return
        self._kicking.discard(session_id)
        self._dirty.add(session_id)
        if session_id in self._claimed:
            return  # its send starts the pump after the commit
        task = self._pumps.get(session_id)
        if task is None or task.done():
            self._set_pump(session_id, self.shell.spawn(self._pump(session_id)))

    def _set_pump(self, session_id: str, task: asyncio.Task[Any]) -> None:
        """Record the session's running pump; its entry goes when it ends (an idle session
        holds no memory here, however many conversations there were)."""
        self._pumps[session_id] = task

        def done(finished: asyncio.Task[Any]) -> None:
            if self._pumps.get(session_id) is finished:
                del self._pumps[session_id]

        task.add_done_callback(done)

    async def _pump(self, session_id: str) -> None:
        """Deliver the session's queue in arrival order, one call at a time.

        A step that fails (a commit, a reconcile step) is retried from the saved facts; after
        `STEP_TRIES` failures in a row the facts wait for the next kick or recovery.
        """
        failures = 0
        while True:
            try:
                if not await self._step(session_id):
                    self._stalled.discard(session_id)
                    return
            except Exception:
                failures += 1
                self.shell.wake_waiters()
                if failures >= STEP_TRIES:
                    self._stalled.add(session_id)  # no fast send may overtake its queue
                    # a caller waiting on a delivered call of this session hears why now,
                    # rather than waiting for a store that may not come back
                    self.shell.give_up_waiters(session_id, sys.exc_info()[1])
                    raise
                await asyncio.sleep(0.01 * (2**failures))
                continue
            failures = 0

    async def _step(self, session_id: str) -> bool:
        """One delivery; False when the queue is empty or its head waits on an activation."""
        shell = self.shell
        self._dirty.discard(session_id)  # what is queued from here on kicks again
        # Deliveries to a session are serial, so a call or action still `delivered` here
        # was cut off by a failed step: at most once, so it ends `delivery_interrupted`.
        for item in shell.facts.delivered_in(session_id):
            await self.interrupt(item)
        head = shell.facts.queue_head(session_id)
        if head is None or head[1] != "ready":
            return False
        session = shell.facts.session_by_id(session_id)
        assert session is not None
        item = head[0]
        tool: RegistryEntry | None = None
        entry: ActionEntry | None = None
        problems: Checked | None = None
        if isinstance(item, Action):
            # the session's version now (a dev rebuild may have moved it, SPEC 17)
            entry = shell.actions_of(session.scope, session.version).get(item.name)
            if entry is not None:
                problems = await acheck_value(
                    entry.input_schema, json.loads(item.params), shell.validators, entry.scope
                )
            serve = entry is not None and not problems
        else:
            tool = shell.tools_of(session.scope, session.version).get(item.method)
            serve = tool is not None and tool.delivery == "miniapp_sdk"
        worker = None
        if serve:
            try:
                worker = await self.pool.ensure(
                    session.scope, session.version, session.app_session_id
                )
            except (WorkerError, LineupError):
                await self._worker_lost(item)
                return True
        now = shell.now()
        key = _key(item)

        def step(tx: Facts) -> Decision | None:
            current = tx.queue_head(session_id)
            if current is None or _key(current[0]) != key:
                return None  # it moved on meanwhile: the next step looks again
            return next_delivery(current, tool, now, action=entry, problems=problems)

        decision = await shell.decide(step)
        if decision is not None and decision.deliver is not None:
            assert worker is not None
            if isinstance(item, Action):
                assert entry is not None
                await self._finish(self._start(session, entry, item, worker))
            else:
                assert tool is not None
                await self._send(session, tool, item, worker)
        return True

    async def interrupt(self, item: Call | Action) -> None:
        now = self.shell.now()
        if isinstance(item, Action):
            await self.shell.decide(lambda tx: interrupt_action(item, now))
        else:
            await self.shell.decide(lambda tx: interrupt_delivery(item, now))

    async def _worker_lost(self, call: Call | Action) -> None:
        """The app cannot run any more: its ready activation fails, its queue is answered."""
        assert call.activation_id is not None
        shell = self.shell
        await shell.decide(steps.worker_lost(call.activation_id, shell.tools_of, now=shell.now()))

    async def _send(
        self, session: Session, tool: RegistryEntry, call: Call, worker: Worker
    ) -> None:
        """Send a call already committed as `delivered`; commit its one final answer."""
        await self._finish(self._start(session, tool, call, worker))

    def _start(
        self,
        session: Session,
        tool: RegistryEntry | ActionEntry,
        call: Call | Action,
        worker: Worker,
    ) -> _Flight:
        """Write the delivery to the worker (its capability and timeout start now): a
        tool call's, or a UI Action's (`kind: "action"`, its ctx naming the action and its
        client instead of a call)."""
        faults.hit("deliver.before_send")
        cap = secrets.token_urlsafe(24)
        ids: dict[str, Any]
        if isinstance(call, Action):
            ids = {"action_id": call.action_id, "client_id": call.client_id}
            method, kind = call.name, "action"
        else:
            ids = {"call_id": call.call_id}
            method, kind = call.method, "tool"
        ctx = {
            **ids,
            "app_scope": session.scope,
            "app_session_id": session.app_session_id,
            "conversation_id": session.conversation_id,
            "cap": cap,
            "timeout_s": tool.timeout_s,
        }
        flight = _Flight(call, tool, cap)
        try:
            # the stored params text goes to the worker as is: never decoded and re-encoded
            # on the loop (a 1 MiB array would cost other sessions tens of milliseconds)
            if kind == "action":
                rid, fut = worker.send_delivery(method, call.params, ctx, kind=kind)
            else:
                rid, fut = worker.send_delivery(method, call.params, ctx)
        except WorkerError as exc:
            flight.error = exc
            return flight
        # the capability names this delivery's App session only, and only until it ends
        grant = _Grant(session.scope, session.app_session_id, session.conversation_id, worker, rid)
        self._caps[cap] = grant
        flight.grant, flight.worker, flight.rid, flight.reply = grant, worker, rid, fut
        # a timer on the loop instead of wait_for(shield(...)): no extra tasks per call
        flight.timer = asyncio.get_running_loop().call_later(tool.timeout_s, _expire, fut)
        return flight

    async def _finish(self, flight: _Flight) -> None:
        """Wait for a sent delivery's answer and commit its one final, with the session
        data its handler wrote when it answered a result (SPEC 17: one transaction)."""
        grant = flight.grant
        try:
            outcome = await self._outcome(flight)
            pending = grant.pending if grant is not None else None
            call, tool, now = flight.call, flight.tool, self.shell.now()

            def step(tx: Facts) -> Decision:
                if isinstance(call, Action):  # a UI Action's outcome carries the revision
                    assert isinstance(tool, ActionEntry)
                    stored = tx.session_revision(tool.scope, call.app_session_id)
                    return answer_action(
                        call, tool, now=now, committed=stored, pending=pending, **outcome
                    )
                committed = None
                if pending is not None:
                    committed = tx.session_revision(pending.scope, pending.app_session_id)
                assert isinstance(tool, RegistryEntry)
                return answer_delivery(
                    call, tool, now=now, pending=pending, committed=committed, **outcome
                )

            try:
                decision = await self.shell.decide(step)
            except Exception:
                if pending is not None:  # whatever is committed reaches the subscribers
                    self._resync(pending, grant)
                raise
        finally:
            if grant is not None and grant.pending is not None:
                grant.pending = None
                self._release(grant.worker)
        if pending is not None and decision is not None:
            assert grant is not None
            self.committed(decision, grant.conversation_id)

    async def _outcome(self, flight: _Flight) -> dict[str, Any]:
        """What the delivery's answer says: its reply (with its result checked), a timeout
        or the worker's failure. Its capability is revoked when this returns."""
        tool = flight.tool
        try:
            if flight.error is not None:
                raise flight.error
            assert flight.reply is not None
            reply = await flight.reply
        except TimeoutError:
            if flight.worker is not None and flight.rid is not None:
                flight.worker.timed_out(flight.rid)  # its capability goes below, now
            return {"timed_out": True}
        except WorkerError as exc:
            return {"worker_error": (exc.kind, str(exc)), "worker_reason": exc.reason}
        else:
            faults.hit("deliver.after_reply")
            problems = None
            if reply.get("ok"):
                # a plain schema here as before; any other awaited from a validator process
                pool = self.shell.validators
                problems = await acheck_value(
                    tool.result_schema, reply.get("result"), pool, tool.scope
                )
            return {"reply": reply, "result_problems": problems}
        finally:
            if flight.timer is not None:
                flight.timer.cancel()
            # revoked now: a late request of a handler still running (a timed-out one
            # draining) is refused, and nothing more joins what this delivery holds
            self._caps.pop(flight.cap, None)

    def _resync(self, pending: PendingData, grant: _Grant | None) -> None:
        """The answer's step failed, maybe after its COMMIT: subscribers get the committed
        snapshot if it is newer than what they have (never a revision twice)."""
        assert grant is not None
        key = (pending.scope, grant.conversation_id)
        if self.subs.watched(key):
            with contextlib.suppress(Exception):  # the store may be down: the next frame is
                snap = self.shell.facts.session_data(pending.scope, pending.app_session_id)
                self.subs.changed_elsewhere(key, snap)

    def committed(self, decision: Decision, conversation_id: str) -> None:
        """After the COMMIT of a delivery's answer: the one `session_data.changed` frame of
        the revision it wrote, if it wrote one (a failed delivery's answer writes none)."""
        for change in decision.changes:
            if isinstance(change, ReplaceSessionData):
                key = (change.scope, conversation_id)
                if self.subs.watched(key):
                    snap = Snapshot(json.loads(change.data), change.expected_revision + 1)
                    self.subs.changed(key, snap)

    # -- session data from workers -------------------------------------------------------
    async def session_request(self, worker: Worker, msg: dict[str, Any]) -> dict[str, Any]:
        """A handler's `get` or `replace`, answered from and into its delivery's grant:
        nothing is written here (the delivery's answer commits what it holds)."""
        grant = self._caps.get(msg["cap"])
        if grant is None or grant.worker is not worker or grant.delivery != msg["d"]:
            return self._unknown_cap(worker, msg)
        scope, sid = grant.scope, grant.session_id
        op = msg.get("op")
        try:
            if op == "get":
                mine = grant.pending
                if mine is not None:
                    return {"ok": True, "revision": mine.revision, "data": json.loads(mine.data)}
                snap = self.shell.facts.session_data(scope, sid)
                return {"ok": True, "revision": snap.revision, "data": snap.data}
            if op != "replace":
                return _refusal("worker_protocol_error", f"unknown op {op!r}")
            data, expected = msg.get("data"), msg.get("expected_revision")
            held = grant.pending
            committed = 0 if held is not None else self.shell.facts.session_revision(scope, sid)
            pending = hold_replace(held, committed, scope, sid, data, expected)
            if held is None:  # the delivery's first write takes one of the worker's slots
                await self._hold(worker)
                if self._caps.get(msg["cap"]) is not grant:
                    self._release(worker)  # it ended while this write waited
                    return self._unknown_cap(worker, msg)
                if grant.pending is not None:  # another write of its handler came first
                    self._release(worker)
                    pending = hold_replace(grant.pending, 0, scope, sid, data, expected)
            grant.pending = pending
            return {"ok": True, "revision": pending.revision, "data": json.loads(pending.data)}
        except LineupError as exc:
            return _refusal(exc.code, exc.message)

    @staticmethod
    def _unknown_cap(worker: Worker, msg: dict[str, Any]) -> dict[str, Any]:
        # a capability of another delivery, or of one that has ended: the asking delivery
        # ends now, whatever its handler does next
        worker.end_delivery(msg["d"], "the handler used a session capability it does not hold")
        return _refusal("worker_protocol_error", "unknown session capability")

    async def _hold(self, worker: Worker) -> None:
        """Take a pending-snapshot slot of `worker`, waiting while it holds its bound's worth
        (every holder is a delivery in flight, which frees its slot when it is answered)."""
        bound = self.pool.options.max_requests
        while self._held.get(worker, 0) >= bound:
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._slot_waiters.setdefault(worker, []).append(fut)
            await fut
        self._held[worker] = self._held.get(worker, 0) + 1

    def _release(self, worker: Worker) -> None:
        left = self._held.get(worker, 0) - 1
        if left > 0:
            self._held[worker] = left
        else:
            self._held.pop(worker, None)
        waiters = self._slot_waiters.get(worker)
        while waiters:
            fut = waiters.pop(0)
            if not fut.done():
                fut.set_result(None)
                break
        if not waiters:
            self._slot_waiters.pop(worker, None)


def _refusal(code: str, message: str) -> dict[str, Any]:
    return {"ok": False, "error": {"code": code, "message": message}}


@dataclass(slots=True)
class _Flight:
    """One delivery on its way: what `_finish` needs to wait for it and answer it."""

    call: Call | Action
    tool: RegistryEntry | ActionEntry
    cap: str
    worker: Worker | None = None
    rid: int | None = None
    reply: asyncio.Future[dict[str, Any]] | None = None
    timer: asyncio.TimerHandle | None = None
    error: WorkerError | None = None
    grant: _Grant | None = None


@dataclass(slots=True, eq=False)
class _Grant:
    """What one session-data capability allows: one delivery's App session; and what its
    handler wrote so far, held until the delivery's answer (any kind of delivery: the
    answer's transition takes the `PendingData` whatever row it answers)."""

    scope: str
    session_id: str
    conversation_id: str
    worker: Worker
    delivery: int
    pending: PendingData | None = None


def _key(item: Call | Action) -> tuple[str, ...]:
    """What names a queue item: a call's id, or an action's session and seq."""
    if isinstance(item, Action):
        return ("action", item.app_session_id, str(item.seq))
    return ("call", item.call_id)


def _expire(fut: asyncio.Future[Any]) -> None:
    if not fut.done():
        fut.set_exception(TimeoutError())
