"""The runtime's engine on one asyncio loop: the composition root of the drivers.

It routes Agent calls (`drivers.steps.accept` reads a call's facts and asks
`transitions.decide_call` inside one savepoint of a group commit), performs every
decision's effects after its COMMIT, and owns the Registry, the waiters for final answers
and the background tasks (SPEC 5.2, 5.6).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from lineup_build.model import Manifest
from lineup_runtime_lite.api.clock import Clock
from lineup_runtime_lite.api.input_checks import ainput_problems, input_problems
from lineup_runtime_lite.coordination import OwnedSessions
from lineup_runtime_lite.core.calls import CallEvent, NewIds
from lineup_runtime_lite.core.decisions import Decision, NewCall, NewIntent
from lineup_runtime_lite.core.handlers import CatalogHandler
from lineup_runtime_lite.core.messages import FINAL_STAGES, AgentMessage
from lineup_runtime_lite.core.pomodoro import HANDLERS
from lineup_runtime_lite.core.port import reading_as
from lineup_runtime_lite.core.rows import Action, ActionEntry, RegistryEntry, Session
from lineup_runtime_lite.drivers import steps
from lineup_runtime_lite.drivers.activation import ActivationDriver
from lineup_runtime_lite.drivers.commit import GroupCommit, applying
from lineup_runtime_lite.drivers.delivery import DeliveryDriver
from lineup_runtime_lite.drivers.install import InstalledApp, load_actions, load_tools
from lineup_runtime_lite.drivers.intents import HostRelay
from lineup_runtime_lite.drivers.subscriptions import SubscriptionHub
from lineup_runtime_lite.drivers.timers import Timers
from lineup_runtime_lite.drivers.workers import WorkerPool
from lineup_runtime_lite.processes.worker import WorkerOptions
from lineup_runtime_lite.store.database import Database
from lineup_runtime_lite.store.facts import Facts, LostRace, written_call
from lineup_runtime_lite.validation.checks import Checked, validator_for
from lineup_runtime_lite.validation.params import Envelope
from lineup_runtime_lite.validation.pool import DEFAULT_BUDGET_S, ValidatorPool
from lineup_sdk.context import Snapshot
from lineup_sdk.errors import LineupError
from lineup_sdk.sandbox import shared_memory

__all__ = ["Engine", "new_id"]

log = logging.getLogger("lineup.runtime")


def new_id(prefix: str) -> str:
    """A fresh, unguessable id such as `ses_…` or `inst_…`."""
    return f"{prefix}_{secrets.token_hex(8)}"


class Engine:
    """Everything on the runtime's loop. Methods run on that loop only."""

    def __init__(
        self,
        store: Database,
        clock: Clock,
        apps_dir: Path,
        logs_dir: Path,
        *,
        activation_timeout_s: float,
        host_intent: Callable[[dict[str, Any]], Awaitable[None]] | None,
        check_app: Callable[[str, str], Awaitable[InstalledApp]],
        check_trust: Callable[[str, str], Awaitable[None]],
        worker_options: WorkerOptions,
        handlers: dict[str, CatalogHandler] | None = None,
        validation_budget_s: float = DEFAULT_BUDGET_S,
        workers_memory_mb: int | None = None,
        model_of: Callable[[str, str], Manifest] | None = None,
        verify_ahead: Callable[[list[tuple[str, str]]], Awaitable[None]] | None = None,
        trust_stamp: Callable[[], str] | None = None,
    ) -> None:
        self.store = store
        self.facts: Facts = store.facts
        self.clock = clock
        self.apps_dir = apps_dir
        self.logs_dir = logs_dir
        self.activation_timeout_ms = int(activation_timeout_s * 1000)
        self.handlers = dict(HANDLERS if handlers is None else handlers)
        self.registry: dict[str, RegistryEntry] = {}
        #: Installed current versions listing no tools: their record is not what the
        #: signer signed (SPEC 16.1), by `(scope, version)`.
        self.untrusted: dict[tuple[str, str], LineupError] = {}
        self.model_of = model_of or self._row_model
        self._verify_ahead = verify_ahead
        self._trust_stamp = trust_stamp
        #: What the Registry was last projected from (`_registry_stamp`; None: not yet).
        self._projected: object = None
        self._versions: dict[tuple[str, str], tuple[Manifest, dict[str, RegistryEntry]]] = {}
        self._finals: dict[str, list[asyncio.Future[AgentMessage]]] = {}
        #: Callers waiting for a UI Action's outcome, by `(app_session_id, action_id)`.
        self._outcomes: dict[tuple[str, str], list[asyncio.Future[Action]]] = {}
        self._actions: dict[tuple[str, str], tuple[Manifest, dict[str, ActionEntry]]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self.subs = SubscriptionHub()
        #: Validator processes for schemas that are not plain (SPEC 13.3).
        self.validators = ValidatorPool(validation_budget_s)
        self.commits = GroupCommit(store)
        self.pool = WorkerPool(
            self,
            logs_dir,
            worker_options,
            check_app,
            self._session_request,
            shared_memory=shared_memory(workers_memory_mb) if workers_memory_mb else None,
        )
        self.delivery = DeliveryDriver(self, self.pool, self.subs)
        self.activations = ActivationDriver(self, self.pool, self.handlers, check_trust)
        self.host = HostRelay(self, host_intent)
        self.timers = Timers(self, self.activations, self.delivery, self.host, self.handlers)
        #: On a database of several nodes: whose App sessions are this node's, each
        #: looked up when first asked (None: all are, there is one runtime).
        self._owned: OwnedSessions | None = (
            OwnedSessions(self.facts.session_mine) if store.coordination.several() else None
        )
        self._reconciling = False
        if verify_ahead is None:
            self.load_registry()  # else `refresh_registry`, off the loop, before use

    # -- plumbing ------------------------------------------------------------------------
    def now(self) -> int:
        return self.clock.now_ms()

    def owns(self, app_session_id: str) -> bool:
        return self._owned is None or app_session_id in self._owned

    def _own(self, session_ids: set[str]) -> None:
        """Sessions a decision creates are this node's (marked before its COMMIT: should it
        fail, the fresh ids name nothing anyone else could own)."""
        if self._owned is not None:
            self._owned.add(session_ids)

    # -- several nodes (SPEC 15) -----------------------------------------------------------
    def on_wake(self, payloads: list[str]) -> None:
        """Wake-ups from the nodes (on this loop; each node hears its own too): `c:<call_id>`
        a final committed (a waiter here answers), `s:`/`a:`/`h:` work for a session's
        owner (pump it, drive an activation, relay intents: `drivers.commit.applying`),
        `d:<app_session_id>` its session data changed (Surface subscribers here), `r:` the
        installed apps changed; none at all is the polling tick, which re-drives
        everything (a wake-up lost with a listener's connection)."""
        if "r:" in payloads:  # an install on another node
            self.spawn(self._reload())
        elif not payloads:  # the poll: a reload only when what it is made from changed
            self.spawn(self.poll_registry())
        calls = [p[2:] for p in payloads if p.startswith("c:")]
        if calls:
            self.wake_waiters(calls)
        outcomes = [p[2:] for p in payloads if p.startswith("u:")]
        if outcomes:  # `u:<app_session_id>:<action_id>`: an action's outcome committed
            self._wake_outcomes({tuple(p.split(":", 1)) for p in outcomes})  # type: ignore[misc]
        for payload in dict.fromkeys(payloads):
            kind, key = payload[:2], payload[2:]
            if kind == "s:":
                self.delivery.kick(key)  # a session of another node's: nothing
            elif kind == "a:":
                self.spawn(self.activations.drive(key))  # likewise
            elif kind == "h:" and self.owns(key):
                self.host.kick()
            elif kind == "d:":
                self._data_changed(key)
        if not payloads:
            self._reconcile_soon()

    def _data_changed(self, app_session_id: str) -> None:
        if not len(self.subs) or self.owns(app_session_id):
            return  # the owner's own commits reach its subscribers directly
        session = self.facts.session_by_id(app_session_id)
        if session is None:
            return
        key = (session.scope, session.conversation_id)
        if self.subs.watched(key):
            self.subs.changed_elsewhere(key, self.facts.session_data(session.scope, app_session_id))

    def _reconcile_soon(self) -> None:
        """One reconcile for all the wake-ups of this loop turn."""
        if self._reconciling:
            return
        self._reconciling = True

        def run() -> None:
            self._reconciling = False
            try:
                self.timers.reconcile()
            except LineupError as exc:  # the store is away: the next tick tries again
                log.warning("reconcile: %s", exc.message)

        asyncio.get_running_loop().call_soon(run)

    async def take_over(self, session_ids: list[str]) -> None:
        """Sessions of a node whose lease lapsed are this node's now: recover them as a
        restart would (their deliveries in flight there end `delivery_interrupted`, their
        queues are delivered here, their deadlines fire)."""
        assert self._owned is not None
        self._owned.add(session_ids)
        for sid in session_ids:
            for item in self.facts.delivered_in(sid):  # calls and UI Actions alike
                await self.delivery.interrupt(item)
        await self.tick()

    def fail_waiters(self, why: str) -> None:
        """This node stopped (its lease was lost): whoever waits here is told to retry."""
        _fail_all(
            self._finals,
            lambda call_id: LineupError(
                "store_unavailable",
                f"call {call_id!r}: {why}",
                hint="retry the same call_id: it replays on whichever node answers",
            ),
        )
        _fail_all(
            self._outcomes,
            lambda key: LineupError(
                "store_unavailable",
                f"action {key[1]!r}: {why}",
                hint="send the same action again (same client_id and seq): it answers its "
                "outcome on whichever node answers",
            ),
        )

    def spawn(self, coro: Awaitable[Any]) -> asyncio.Task[Any]:
        task: asyncio.Task[Any] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            # A reconcile step failed after its commit: the saved facts stay pending (the next
            # reconcile re-drives them); whoever waits on a final that did commit is answered.
            log.warning("background step failed: %s: %s", type(exc).__name__, exc)
            self.wake_waiters()

    async def idle(self) -> None:
        """Wait until no background work is pending."""
        while self._tasks:
            await asyncio.wait(list(self._tasks))

    async def settle(self) -> None:
        """Wait until background work and Surface listeners have settled (a listener may
        start more work; each waits in the default executor)."""
        loop = asyncio.get_running_loop()
        while True:
            await self.idle()
            pending = self.subs.pending()
            if not pending:
                break
            for sub in pending:
                await loop.run_in_executor(None, sub.wait)

    async def kill_workers(self, scope: str) -> int:
        """Kill the running workers of an app scope now, as a crash would; how many."""
        doomed = [w for key, w in list(self.workers.items()) if key[0] == scope]
        for worker in doomed:
            await worker.kill()
        return len(doomed)

    async def _session_request(self, worker: Any, msg: dict[str, Any]) -> dict[str, Any]:
        return await self.delivery.session_request(worker, msg)

    # -- the Registry --------------------------------------------------------------------
    def _row_model(self, scope: str, version: str) -> Manifest:
        """A store whose rows are the runtime user's own (SQLite): the row's manifest."""
        manifest = self.facts.manifest(scope, version)
        if manifest is None:
            raise KeyError((scope, version))
        return manifest

    async def refresh_registry(self) -> None:
        """Verify what the current versions' records need off this loop (a store that
        keeps bundles, SPEC 16.1: once per manifest and trust store), then project them."""
        # (only nodes poll: one runtime reloads when it installs, and reads no stamp)
        stamp = self._registry_stamp() if self._owned is not None else None
        if self._verify_ahead is not None:
            await self._verify_ahead(self.facts.installed())
        self.load_registry()
        self._projected = stamp  # (a change since is seen by the next poll)

    def _registry_stamp(self) -> object:
        """What the Registry is projected from, in one read: every current version's
        scope, version, manifest hash, key id and folder, and the trust store's
        fingerprint."""
        trust = self._trust_stamp() if self._trust_stamp is not None else None
        return (tuple(self.facts.installed_stamp()), trust)

    async def poll_registry(self) -> bool:
        """The nodes' poll (a lost `r:` wake-up): project the Registry again only when what
        it is made from changed since — one read per poll, not two per installed app.
        Whether it did."""
        try:
            if self._registry_stamp() == self._projected:
                return False
        except LineupError as exc:
            log.warning("reloading the installed apps: %s", exc.message)
            return False
        await self._reload()
        return True

    async def _reload(self) -> None:
        try:
            await self.refresh_registry()
        except LineupError as exc:
            log.warning("reloading the installed apps: %s", exc.message)

    def load_registry(self) -> None:
        """Project installed manifests into the Registry: on a store that keeps bundles,
        only manifests this node verified (a version whose record is not what its signer
        signed lists no tools; it is in `untrusted`)."""
        registry: dict[str, RegistryEntry] = {}
        untrusted: dict[tuple[str, str], LineupError] = {}
        for scope, version in self.facts.installed():
            try:
                tools = self._tools((scope, version))
            except LineupError as exc:
                untrusted[(scope, version)] = exc
                if self.untrusted.get((scope, version)) is None:
                    log.warning("%s %s lists no tools: %s", scope, version, exc.message)
                continue
            except KeyError:  # uninstalled meanwhile
                continue
            for tool in tools.values():
                registry[tool.method] = tool
                for schema in (tool.input_schema, tool.result_schema):
                    v = validator_for(schema)
                    if not v.plain:  # compiled into every new validator process ahead
                        self.validators.prepare(v.key, v.schema)
        self.untrusted = untrusted
        self.registry = registry  # one swap: callers' threads read it without a lock

    def _tools(self, key: tuple[str, str]) -> dict[str, RegistryEntry]:
        """The tools of a version from its (verified) manifest, projected once per model."""
        model = self.model_of(*key)
        known = self._versions.get(key)
        if known is not None and known[0] is model:
            return known[1]
        tools = {tool.method: tool for tool in load_tools(key[0], key[1], model)}
        self._versions[key] = (model, tools)
        return tools

    def tools_of(self, scope: str, version: str) -> dict[str, RegistryEntry]:
        """A version's tools (a session's pinned one), as this node verified them; a
        version whose record is not what its signer signed has none."""
        key = (scope, version)
        known = self._versions.get(key)
        if known is not None:
            return known[1]
        try:
            return self._tools(key)
        except LineupError:
            return {}

    def actions_of(self, scope: str, version: str) -> dict[str, ActionEntry]:
        """A version's UI Actions by name (SPEC 17), from its manifest as this node
        verified it (a version whose record is not what its signer signed has none)."""
        key = (scope, version)
        try:
            model = self.model_of(scope, version)
        except (LineupError, KeyError):
            return {}
        known = self._actions.get(key)
        if known is not None and known[0] is model:
            return known[1]
        actions = {a.name: a for a in load_actions(scope, version, model)}
        self._actions[key] = (model, actions)
        return actions

    def methods_for(self, scope: str, handler_key: str) -> list[str]:
        return [
            tool.method
            for tool in self.registry.values()
            if tool.scope == scope and tool.handler_key == handler_key
        ]

    # -- decisions -----------------------------------------------------------------------
    async def decide(self, step: Callable[[Facts], Decision | None]) -> Decision | None:
        """Commit the decision `step` makes inside its savepoint of the next group commit,
        then perform its effects. None when it decided nothing or lost a race."""
        try:
            decision = await self.commits.submit(
                applying(step, self.delivery.will_kick, self.owns, self._own)
            )
        except LostRace:
            return None
        if decision is not None:
            self.perform(decision)
        return decision  # type: ignore[no-any-return]

    def perform(self, decision: Decision) -> None:
        """A committed decision's effects: answer waiters, stop ended activations' drivers,
        pump sessions, drive activations, relay Host intents (the drivers leave another
        node's sessions alone: the commit woke it)."""
        for msg in decision.finals:
            for fut in self._finals.pop(msg["call_id"], []):
                if not fut.done():
                    fut.set_result(msg)
        for done in decision.action_outcomes:
            outs = self._outcomes.pop((done.app_session_id, done.action_id), [])
            if outs:
                client_id, seq = done.action_id.rsplit(":", 1)
                row = Action(
                    done.app_session_id,
                    done.seq,
                    client_id,
                    int(seq),
                    "",
                    "",
                    "",
                    "",
                    "done",
                    done.outcome,
                    done.revision,
                )
                for out in outs:
                    if not out.done():
                        out.set_result(row)
        for act_id in decision.stop:
            self.activations.stop_driving(act_id)
        for session_id in decision.kick:
            self.delivery.kick(session_id)
        for act_id in decision.drive:
            self.spawn(self.activations.drive(act_id))
        if decision.host:
            self.host.kick()

    def _wait_final(self, call_id: str) -> asyncio.Future[AgentMessage]:
        fut: asyncio.Future[AgentMessage] = asyncio.get_running_loop().create_future()
        self._finals.setdefault(call_id, []).append(fut)
        return fut

    def _drop_waiter(self, call_id: str, fut: asyncio.Future[AgentMessage]) -> None:
        if fut.done():  # told meanwhile (`fail_waiters`): the caller has its own answer
            if not fut.cancelled():
                fut.exception()
        else:
            fut.cancel()
        waiters = self._finals.get(call_id)
        if waiters is not None:
            if fut in waiters:
                waiters.remove(fut)
            if not waiters:
                del self._finals[call_id]

    def _wake_outcomes(self, keys: set[tuple[str, str]] | None = None) -> None:
        """Answer the waiters of UI Actions (of `keys`, when given) whose outcome is
        committed (on another node, or its publication was lost)."""
        for key in list(self._outcomes) if keys is None else keys:
            if key not in self._outcomes:
                continue
            sid, action_id = key
            client_id, _, seq = action_id.rpartition(":")
            found = self.facts.action(sid, client_id, int(seq))
            if found is not None and found.state == "done":
                for out in self._outcomes.pop(key, []):
                    if not out.done():
                        out.set_result(found)

    def outcome_waiter(self, key: tuple[str, str]) -> asyncio.Future[Action]:
        """A waiter for the outcome of the UI Action `(app_session_id, action_id)` (SPEC
        17); drop it with `drop_outcome_waiter`."""
        out: asyncio.Future[Action] = asyncio.get_running_loop().create_future()
        self._outcomes.setdefault(key, []).append(out)
        # an outcome committed before the waiter was there (a replay of a finished one, or
        # one that finished meanwhile) is read now: no await between, so none is missed
        self._wake_outcomes({key})
        return out

    def drop_outcome_waiter(self, key: tuple[str, str], out: asyncio.Future[Action]) -> None:
        waiters = self._outcomes.get(key)
        if waiters is not None and out in waiters:
            waiters.remove(out)
            if not waiters:
                del self._outcomes[key]
        if not out.done():
            out.cancel()

    def wake_waiters(self, call_ids: list[str] | None = None) -> None:
        """Answer every in-process waiter (of `call_ids`, when given) whose call already has
        a committed final (its publication was lost to a failure between COMMIT and the
        next step, or another node committed it); with no `call_ids`, UI Actions' too."""
        if call_ids is None and self._outcomes:
            self._wake_outcomes()
        for call_id in list(self._finals) if call_ids is None else call_ids:
            if call_id not in self._finals:
                continue
            msg = self.facts.latest_message(call_id)
            if msg is not None and msg["stage"] in FINAL_STAGES:
                for fut in self._finals.pop(call_id, []):
                    if not fut.done():
                        fut.set_result(msg)

    def give_up_waiters(self, app_session_id: str, exc: BaseException | None) -> None:
        """The session's pump gave up on a step that kept failing (the store): a waiter on a
        call of that session gets its committed final, or `store_unavailable` (the call stays
        delivered; its answer is stored when the store is back: the same call_id replays it)."""
        self.wake_waiters()
        why = exc.message if isinstance(exc, LineupError) else str(exc or "the store failed")
        _fail_all(
            {k: self._outcomes.pop(k) for k in list(self._outcomes) if k[0] == app_session_id},
            lambda key: LineupError(
                "store_unavailable",
                f"action {key[1]!r} was accepted, but its outcome could not be stored: {why}",
                hint="send the same action again once the store is back: it answers the "
                "stored outcome",
            ),
        )
        _fail_all(
            {c: self._finals.pop(c) for c in list(self._finals) if self._of(c, app_session_id)},
            lambda call_id: LineupError(
                "store_unavailable",
                f"call {call_id!r} was delivered, but its answer could not be stored: {why}",
                hint="retry the same call_id once the store is back: it replays the stored answer",
            ),
        )

    def _of(self, call_id: str, app_session_id: str) -> bool:
        """Whether a call is the session's (when the store cannot say, its waiter waits)."""
        with contextlib.suppress(Exception):
            call = self.facts.call(call_id)
            return call is not None and call.app_session_id == app_session_id
        return False

    # -- Agent calls ---------------------------------------------------------------------
    async def call(
        self,
        env: Envelope,
        checked_tool: RegistryEntry | None = None,
        problems: Checked | None = None,
    ) -> AgentMessage:
        """Accept one Agent call (SPEC 5.2) and return the message for this step.

        `env` passed the envelope checks in the caller's thread; `problems` are the input
        schema's findings against `checked_tool`, also computed there (validation never
        runs on this loop unless the registry changed in between).
        """
        now = self.now()
        call_id = env.call_id
        tool = self.registry.get(env.method)
        ev = CallEvent(call_id, env.conversation_id, env.method, env.params_json, env.fingerprint)
        if tool is not None and (problems is None or checked_tool is not tool):
            # installed in between: check here, a schema that is not plain off this loop
            if validator_for(tool.input_schema).plain:
                problems = input_problems(tool, env.params, self.validators)
            else:
                problems = await ainput_problems(tool, env.params, self.validators)
        fast: list[Session] = []
        asked: list[Session] = []  # the session the step asked `idle` about (its read)
        fut = self._wait_final(call_id)

        def idle(tx: Facts, session: Session, method: str) -> bool:
            asked.append(session)  # another node's session is delivered there
            return self.owns(session.app_session_id) and self.delivery.idle(session, method)

        accept = steps.accept(
            ev,
            tool,
            problems,
            self.handlers,
            now=now,
            timeout_ms=self.activation_timeout_ms,
            draw_ids=_fresh_ids,
            idle=idle,
            tools_of=self.tools_of,
            methods_for=self.methods_for,
        )

        def claiming(tx: Facts) -> Decision:
            # A store may run a batch's steps again before its COMMIT (PostgreSQL: carefully after a
            # lost race, from the start after a serialization failure). Only the last run's decision
            # is committed: what an earlier run reserved goes first (it would keep the session busy
            # for good), and a call that run decides to queue (the session busy now: a kick marked
            # by an earlier run, say) is not sent.
            for session in fast:
                self.delivery.release(session.app_session_id)
            fast.clear()
            asked.clear()
            decision = accept(tx)
            if decision.deliver is not None:  # sent right after its COMMIT: reserved now
                session = asked[-1]  # only a session found idle is delivered to at once
                self.delivery.claim(session.app_session_id)
                fast.append(session)
            return decision

        step = reading_as(accept, claiming)  # a pipelining store reads ahead of the batch

        decision = None
        for _ in range(3):  # a lost race (a guard found no row) decides again on fresh facts
            try:
                decision = await self.decide(step)
            except BaseException:
                self._drop_waiter(call_id, fut)
                for session in fast:
                    self.delivery.release(session.app_session_id)
                raise
            if decision is not None:
                break
            for session in fast:
                self.delivery.release(session.app_session_id)
            fast.clear()
        if decision is None:
            self._drop_waiter(call_id, fut)
            raise LineupError(
                "store_unavailable",
                f"call {call_id!r} kept losing races in the store; nothing was accepted",
                hint="retry the same call",
            )
        if decision.host:  # hand on what the call committed before answering (SPEC 13.1)
            await self.host.handed_on(
                {c.instance for c in decision.changes if isinstance(c, NewIntent)}
            )
        if decision.replay:
            self._drop_waiter(call_id, fut)
            self.timers.reconcile_call(call_id)
            latest = self.facts.latest_message(call_id)
            if latest is not None:
                return latest
            return await self._wait_final(call_id)
        if decision.answer is not None:
            self._drop_waiter(call_id, fut)
            return decision.answer
        if fast:
            assert tool is not None
            session = fast[0]
            row = decision.changes[0]
            assert isinstance(row, NewCall) and row.call_id == call_id
            self.delivery.send_claimed(session, written_call(row))
        return await fut

    # -- reads ---------------------------------------------------------------------------
    def surface_get(self, conversation_id: str, scope: str) -> Snapshot:
        session = self.facts.session(conversation_id, scope)
        if session is None:
            return Snapshot(None, 0)
        return self.facts.session_data(scope, session.app_session_id)

    # -- clock, recovery, close ----------------------------------------------------------
    async def tick(self) -> None:
        await self.timers.tick()

    def next_deadline(self) -> int | None:
        return self.timers.next_deadline()

    async def recover(self) -> None:
        await self.timers.recover()

    async def host_event(self, event: str, instance: str, conversation_id: str, scope: str) -> bool:
        return await self.activations.host_event(event, instance, conversation_id, scope)

    def held(self) -> dict[str, int]:
        """How much per-session and per-call state the engine holds right now (an idle
        runtime holds none, however many conversations it served)."""
        return {
            "pumps": len(self.delivery._pumps),
            "claimed": len(self.delivery._claimed),
            "dirty": len(self.delivery._dirty),
            "capabilities": len(self.delivery._caps),
            "finals": len(self._finals),
            "outcomes": len(self._outcomes),
            "driving": len(self.activations._driving),
            "tasks": len(self._tasks),
            "subscriptions": len(self.subs),
            "queued_decisions": len(self.commits._queue),
        }

    @property
    def workers(self) -> dict[tuple[str, ...], Any]:
        """The running workers by `(scope, version)` (and App session id under
        `isolation="session"`)."""
        return self.pool.workers

    @property
    def sandbox_report(self) -> dict[str, Any] | None:
        return self.pool.sandbox_report

    def workers_memory(self) -> dict[str, Any] | None:
        """The running workers' memory by PSS, USS and RSS (`WorkerPool.memory`)."""
        return self.pool.memory()

    async def close(self) -> None:
        _fail_all(  # none waits on a stopped loop
            self._outcomes,
            lambda key: LineupError(
                "action_pending",
                f"action {key[1]!r}: the runtime closed before its outcome; it stays queued",
                hint="send the same action again (same client_id and seq) once the runtime is "
                "open: it answers its outcome",
            ),
        )
        self.subs.close()
        self.validators.close()
        await self.pool.close()
        pending = [task for task in self._tasks if task is not asyncio.current_task()]
        for task in pending:
            task.cancel()
        if pending:  # cancelled background steps leave their facts for the next open
            await asyncio.wait(pending, timeout=5)
        self.commits.close()  # the store thread, once its batch in flight has landed
        # a final stopping committed answers its waiter; a call still queued: call_pending
        with contextlib.suppress(Exception):  # the store cannot say: call_pending, then
            self.wake_waiters()
        _fail_all(
            self._finals,
            lambda call_id: LineupError(
                "call_pending",
                f"call {call_id!r}: the runtime closed before its final answer; the call "
                "stays stored and runs once a runtime is open on this database",
                hint="call again with the same call_id once the runtime is open: it answers "
                "its final (the call never runs twice)",
                details={"call_id": call_id},
            ),
        )


def _fail_all(waiters: dict[Any, list[Any]], error: Callable[[Any], LineupError]) -> None:
    """Fail every waiter of `waiters` (futures by key) with `error(key)`, and forget them."""
    for key, fut in [(k, f) for k, futs in waiters.items() for f in futs if not f.done()]:
        fut.set_exception(error(key))
        fut.exception()  # a caller that went meanwhile leaves no "never retrieved"
    waiters.clear()


def _fresh_ids() -> NewIds:
    return NewIds(new_id("ses"), new_id("inst"), new_id("op"))
