"""`AsyncRuntime`: the embeddable runtime for asyncio code (SPEC 5.0), the primary API.

It runs on the caller's own event loop: a call is routed, committed and answered there, with
no thread hop (only a call with large params is checked in the default executor, so it
never blocks the loop). `Runtime` is a thin synchronous wrapper over it.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from lineup_build.reader import Limits
from lineup_runtime_lite.api import reads
from lineup_runtime_lite.api.arguments import MAX_FETCH, usable_id
from lineup_runtime_lite.api.assemble import assemble
from lineup_runtime_lite.api.async_faces import (
    AsyncMarks,
    AsyncOutbox,
    AsyncSurface,
    _AsyncHostPort,
)
from lineup_runtime_lite.api.clock import Clock
from lineup_runtime_lite.api.deadlines import Deadlines
from lineup_runtime_lite.api.deprecated import DeprecatedSpellings
from lineup_runtime_lite.api.dev_builds import move_dev_sessions
from lineup_runtime_lite.api.engine import Engine
from lineup_runtime_lite.api.intake import Prepared, inline, prepare, prepare_off_loop
from lineup_runtime_lite.api.options import (
    DEFAULT_ISOLATION,
    ISOLATIONS,
    RuntimeOptions,
    check_isolation,
)
from lineup_runtime_lite.api.trusted_apps import TrustedApps
from lineup_runtime_lite.coordination.lifecycle import NodeLife
from lineup_runtime_lite.coordination.nodes import DEFAULT_LEASE_S
from lineup_runtime_lite.core.messages import AgentMessage
from lineup_runtime_lite.core.rows import RegistryEntry
from lineup_runtime_lite.drivers.install import InstallResult
from lineup_runtime_lite.host.simulator import HostSimulator
from lineup_runtime_lite.validation.params import (
    DEFAULT_MAX_PARAMS_BYTES,
)
from lineup_runtime_lite.validation.pool import DEFAULT_BUDGET_S
from lineup_sdk.errors import LineupError
from lineup_sdk.sandbox import DEFAULT_PROCESSES

#: The Surface page of a MiniApp, bundle-relative (SPEC 14).
SURFACE_PAGE = "surface/index.html"

__all__ = [
    "DEFAULT_ISOLATION",
    "ISOLATIONS",
    "MAX_FETCH",
    "AsyncMarks",
    "AsyncOutbox",
    "AsyncRuntime",
    "AsyncSurface",
    "check_isolation",
]


class AsyncRuntime(DeprecatedSpellings):
    """The reference runtime on the caller's event loop. Create it with
    `await AsyncRuntime.open(...)`; every method runs on that loop."""

    clock: Clock
    #: The Host simulator's event entry point (`await art.host.event(...)`).
    host: _AsyncHostPort
    #: The Agent channel (`await art.outbox.fetch(...)`, `await art.outbox.ack(...)`).
    outbox: AsyncOutbox
    #: Marks kept with accepted calls (`await art.marks.add(call_id, mark)`, `has`, `calls`).
    marks: AsyncMarks
    _engine: Engine

    def __init__(self) -> None:  # use AsyncRuntime.open
        self._tmp: Path | None = None
        self._apps: TrustedApps
        self._max_params_bytes = DEFAULT_MAX_PARAMS_BYTES
        self._closed = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._deadlines: Deadlines
        self._make_engine: Callable[[], Engine]
        #: The node's life (SPEC 15): its news to the engine, a rejoin after a lost lease.
        self._nodes: NodeLife
        self._options: RuntimeOptions

    @classmethod
    async def open(
        cls,
        path: str | Path,
        *,
        trust: Any,
        clock: Clock | None = None,
        host: HostSimulator | None = None,
        apps_dir: str | Path | None = None,
        activation_timeout_s: float = 60.0,
        max_params_bytes: int = DEFAULT_MAX_PARAMS_BYTES,
        sandbox: str = "best_effort",
        worker_memory_mb: int = 1024,
        worker_processes: int = DEFAULT_PROCESSES,
        worker_heartbeat_s: float = 5.0,
        worker_cpu_s: float = 600.0,
        worker_log_max_bytes: int = 10 * 1024 * 1024,
        worker_env: Mapping[str, str] | None = None,
        validation_budget_s: float = DEFAULT_BUDGET_S,
        isolation: str = DEFAULT_ISOLATION,
        session_idle_s: float = 300.0,
        workers_memory_mb: int = 4096,
        db_schema: str | None = None,
        node_id: str | None = None,
        node_lease_s: float = DEFAULT_LEASE_S,
        bundle_limits: Limits | None = None,
    ) -> AsyncRuntime:
        """Open (or create) the runtime database at `path` (`:memory:` for tests, or a
        `postgresql://` URL): each keyword is a field of `RuntimeOptions`, documented there
        and in docs/reference/runtime-options.md, checked before anything is opened.

        Raises:
            LineupError: `usage_invalid` for a bad option, `trust_store_invalid`,
                `runtime_locked`, `store_corrupt`, `store_unavailable`,
                `store_schema_unsupported`, `install_tampered` (the apps folder, or a
                folder above it, is another user's or others may write it).
        """
        options = RuntimeOptions(**{k: v for k, v in locals().items() if k != "cls"})
        return await cls._from_options(options)

    @classmethod
    async def _from_options(cls, options: RuntimeOptions) -> AsyncRuntime:
        """Open a runtime from checked options (`open`, and `testing.open_app`)."""
        rt = cls()
        rt._loop = asyncio.get_running_loop()
        rt._deadlines = Deadlines(rt)
        rt._options = options
        rt._max_params_bytes = options.max_params_bytes
        parts = assemble(options)
        rt._apps, rt.clock, rt._tmp = parts.apps, parts.clock, parts.tmp
        try:
            rt.host = _AsyncHostPort(rt, parts.host)
            rt.outbox = AsyncOutbox(rt)
            rt.marks = AsyncMarks(rt)
            rt._make_engine = parts.make_engine
            rt._engine = parts.make_engine()
            await rt._engine.refresh_registry()
            await rt._engine.recover()
            await rt.settle()
            rt._nodes = NodeLife(
                rt._engine.store.coordination,
                asyncio.get_running_loop(),
                engine=lambda: rt._engine,
                restart=rt._restart,
                rejoined=rt._arm,
                shown=rt._engine.store.path,
            ).join()
            rt.clock.on_advance(rt._deadlines.advanced)
        except BaseException:
            try:
                if hasattr(rt, "_engine"):
                    await rt._engine.close()
            finally:  # the lock goes whatever stopping the workers did
                parts.release()
            raise
        return rt

    # -- several nodes (SPEC 15) ---------------------------------------------------------
    async def _restart(self) -> None:
        """After the node registered again (`NodeLife`): a new engine, loaded and recovered."""
        self._engine = self._make_engine()
        await self._engine.refresh_registry()
        await self._engine.recover()

    # -- plumbing ------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise LineupError("usage_invalid", "the runtime is closed", hint="open a new Runtime")

    def _arm(self) -> None:
        self._deadlines.arm()

    @property
    def trust(self) -> Any:
        """The trust store as last read (a file given as `trust` is re-read when it
        changes, at the next install or check)."""
        return self._apps.trust

    @trust.setter
    def trust(self, value: Any) -> None:
        self._apps.trust = value

    def worker_log(self, scope: str, version: str) -> Path:
        """The worker log of an installed app version (where its stdout, stderr and the
        traceback of a failed start go; it exists once a worker has started).

        Raises:
            LineupError: `usage_invalid` when `scope` has no installed `version`.
        """
        usable_id("scope", scope)
        self._check_open()
        return reads.worker_log(self._engine, scope, version)

    @property
    def sandbox(self) -> dict[str, Any]:
        """What the sandbox enforces for workers here: `files`, `network`, `privileges`,
        `process_tree`, `memory`, `tmp` (each a description, or None when not enforced),
        `mode`, and `refused` (why `required` would refuse to start a worker, or None);
        and `workers_memory`, what the running workers hold now, each one's process tree
        summed: `{"workers", "pss_kib", "uss_kib", "rss_kib"}` (PSS divides a shared page
        among the processes that map it; RSS, beside it, counts it in each), or None while
        no worker runs or where `/proc` cannot tell."""
        from lineup_sdk.sandbox import probe

        report = self._engine.sandbox_report
        out = dict(report) if report is not None else probe(self._options.sandbox)
        out["workers_memory"] = self._engine.workers_memory()
        return out

    @property
    def logs_dir(self) -> Path:
        """Where the worker logs are written (one file per app version)."""
        return self._engine.logs_dir

    # -- apps ----------------------------------------------------------------------------
    async def install(self, bundle: str | Path, *, dev_build: bool = False) -> InstallResult:
        """Verify a bundle against the trust store and install it (SPEC 5.1); the
        verification runs in the default executor.

        Args:
            bundle: The `.lineup` file.
            dev_build: A local dev build of a project folder: when its scope and version
                are installed with another manifest, it installs beside that build (as
                `<version>+dev.<manifest sha256 prefix>`) and becomes current instead of
                `version_conflict`; sessions pinned to the old build keep it.
        """
        self._check_open()
        verified = await self._apps.verify(bundle)
        self._check_open()
        result = self._apps.install(verified, self.clock.now_ms(), dev_build=dev_build)
        await self._engine.refresh_registry()
        return result

    async def apps(self) -> list[dict[str, Any]]:
        """Installed apps: scope, current version, key id, manifest hash, permissions, and
        `trusted`. On a store that keeps bundles (PostgreSQL) these come from the bundle
        this node verified (SPEC 16.1); a version whose record is not what its signer
        signed is `trusted: False` with the `problem` (`code`, `message`) and lists no
        tools."""
        self._check_open()
        return await reads.app_list(self._engine)

    async def surface_document(self, scope: str, version: str) -> bytes | None:
        """The Surface document of an installed version, as signed: the one self-contained
        document `lineup build` wrote (the manifest's `surface` object), checked against its
        sha256 (so what a host renders is what the signer signed); None when that version
        has no Surface (SPEC 18.1, 18.2).

        Raises:
            LineupError: `install_tampered` when the file differs from its manifest entry;
                the trust codes of `TrustedApps.installed`.
        """
        usable_id("scope", scope)
        self._check_open()
        app, _ = await self._apps.installed(scope, version)
        return await reads.surface_document(app, scope, version)

    async def surface_csp(self, scope: str, version: str) -> dict[str, list[str]] | None:
        """The `csp` an installed version's manifest declares for its Surface document, as
        MCP Apps' `_meta.ui.csp` spells it (`connectDomains`, `resourceDomains`; `{}` when
        `[app.surface]` declares none); None without a Surface (SPEC 18.2).

        Raises:
            LineupError: the trust codes of `TrustedApps.installed`.
        """
        usable_id("scope", scope)
        self._check_open()
        app, _ = await self._apps.installed(scope, version)
        return app.model.surface.csp_json() if app.model.surface is not None else None

    async def uninstall(self, scope: str) -> None:
        """Remove a scope from the Registry (its sessions' history stays in the database)."""
        usable_id("scope", scope)
        self._check_open()
        with self._engine.store.transaction():
            self._engine.facts.remove_app(scope)
        await self._engine.refresh_registry()

    async def sessions(self, scope: str | None = None) -> list[dict[str, Any]]:
        """Every App session (of one scope), oldest first, as a Host lists them:
        `conversation_id`, `scope`, `version`, `app_session_id`, and its latest activation
        (`instance`, `state`; None before any; `waiting_for`: `foreground` while a starting
        activation needs the Host's confirmation, `worker` while its worker starts, else
        None)."""
        if scope is not None:
            usable_id("scope", scope)
        self._check_open()
        return reads.session_list(self._engine.facts, scope)

    async def kill_workers(self, scope: str) -> int:
        """A fault, for simulations and tests (the `crash_worker` scenario step): kill the
        running workers of an app scope now, as a crash would — what they were running ends
        `delivery_interrupted`, the next delivery starts a new worker. Returns how many."""
        usable_id("scope", scope)
        self._check_open()
        return await self._engine.kill_workers(scope)

    async def move_dev_sessions(self, scope: str) -> int:
        """Move every session pinned to an older dev build of `scope` to its current
        version, when that is a dev build too (`lineup dev` after a rebuild, SPEC 14; the
        one exception to SPEC 5.2's pinning). Calls delivered to the old build end
        `delivery_interrupted`, session data is kept, and the next call runs the new code.
        Returns how many sessions moved.

        Raises:
            LineupError: `usage_invalid` for a bad scope or one that is not installed.
        """
        usable_id("scope", scope)
        self._check_open()
        moved = await move_dev_sessions(self._engine, scope)
        if moved is None:
            return 0
        await self.settle()
        return moved

    async def app_file(self, scope: str, version: str, path: str) -> bytes | None:
        """One file of an installed version, as its manifest lists it (`path` exactly as
        listed, such as `surface/index.html`), read from the version's install folder
        (on PostgreSQL the folder of the bundle this node verified) with its size and
        sha256 checked; None when the manifest lists no such file.

        Raises:
            LineupError: `install_tampered` when the file changed since install (or is
                missing or a link) or the version's record is not what its signer signed;
                the key's codes (`key_revoked`, ...).
        """
        usable_id("scope", scope)
        self._check_open()
        try:
            app, _ = await self._apps.installed(scope, version)
        except KeyError:
            return None
        return await reads.app_file(app, path)

    async def inventory(self) -> list[dict[str, Any]]:
        """The Agent Inventory: every installed tool without delivery internals."""
        self._check_open()
        return [t.inventory() for t in sorted(self._engine.registry.values(), key=_method)]

    # -- calls ---------------------------------------------------------------------------
    def _prepare(
        self, call_id: Any, conversation_id: Any, method: Any, params: Any, pooled: bool = True
    ) -> AgentMessage | Prepared:
        self._check_open()  # any thread: `api.intake.prepare`
        call = (call_id, conversation_id, method, params)
        return prepare(self._engine, self._max_params_bytes, call, pooled)

    async def _accept(self, prepared: Prepared) -> AgentMessage:
        self._check_open()
        msg = await self._engine.call(*prepared)
        if msg["kind"] == "receipt":  # only a call that starts or waits can add a deadline
            self._arm()
        return msg

    async def call(
        self, call_id: Any, conversation_id: Any, method: Any, params: Any
    ) -> AgentMessage:
        """Send one Agent call; returns the AgentMessage for this step (SPEC 5.0).

        Small params (a bounded walk says so) against a plain input schema are checked
        right here; larger ones, and any schema that is not plain, in the default executor,
        so neither a huge call nor an expensive schema blocks this loop.

        Raises:
            LineupError: `store_unavailable`/`store_corrupt` (nothing persisted or sent: retry
                the call), `usage_invalid` once closed, `call_pending` if it closes first.
                Every problem with the call itself is an `error` message, not an exception.
        """
        call = (call_id, conversation_id, method, params)
        if inline(self._engine, method, params):
            prepared = self._prepare(*call)
        else:  # the envelope, and any schema that is not plain, off this loop (SPEC 16.4)
            prepared = await prepare_off_loop(self._engine, self._prepare, call)
        if not isinstance(prepared, tuple):
            return prepared
        return await self._accept(prepared)

    async def _accept_many(self, prepared: list[AgentMessage | Prepared]) -> list[AgentMessage]:
        self._check_open()
        # gather schedules the calls as tasks ahead of anything they spawn (FIFO loop), and
        # their acceptances share one group commit, in the order given
        accepted = [self._engine.call(*p) for p in prepared if isinstance(p, tuple)]
        answers = iter(await asyncio.gather(*accepted))
        msgs = [next(answers) if isinstance(p, tuple) else p for p in prepared]
        if any(m["kind"] == "receipt" for m in msgs):
            self._arm()
        return msgs

    async def call_many(self, calls: Sequence[tuple[str, str, str, Any]]) -> list[AgentMessage]:
        """Accept several Agent calls `(call_id, conversation_id, method, params)` in one
        runtime turn: each is routed, in the order given, before anything they start can
        progress (so the first that starts an activation answers `starting` and the rest
        `queued`); returns their messages in that order."""
        if all(inline(self._engine, c[2], c[3]) for c in calls):
            return await self._accept_many([self._prepare(*c) for c in calls])
        prepared = await asyncio.get_running_loop().run_in_executor(
            None, lambda: [self._prepare(*c) for c in calls]
        )
        return await self._accept_many(prepared)

    async def call_record(self, call_id: str) -> dict[str, Any] | None:
        """What the runtime keeps of one Agent call: its `method`, `conversation_id` and
        every persisted `messages` entry, oldest first (receipts, then the final); None for
        a call_id it never accepted (rejections are not persisted)."""
        self._check_open()
        return reads.call_record(self._engine.facts, call_id)

    async def app_session(self, conversation_id: str, scope: str) -> dict[str, Any] | None:
        """A conversation's App session for an app scope (`app_session_id`, `version` it is
        pinned to), or None before any call of that conversation reached the app."""
        usable_id("conversation_id", conversation_id)
        usable_id("scope", scope)
        self._check_open()
        return reads.app_session(self._engine.facts, conversation_id, scope)

    async def surface_view_key(self) -> bytes:
        """The 32 random bytes `lineup serve` signs Surface `view` capabilities with (SPEC
        18.2): kept in the store's meta table, created at first use by whichever node asks
        first (an insert that never overwrites, then a read), the same on every node."""
        self._check_open()
        return reads.view_key(self._engine)

    async def settle(self) -> None:
        """Wait until background work (activations, deliveries) and Surface listeners
        have settled (a listener may start more work)."""
        self._check_open()
        await asyncio.sleep(0)  # what other threads scheduled on this loop starts first
        await self._engine.settle()
        self._arm()

    async def tick(self) -> None:
        """Fire what fell due on the runtime clock (deadlines, a starting activation's
        timeout) now, and wait for it; a virtual clock's time is persisted first. The
        real-clock timer and a virtual clock's `advance()` do this by themselves.

        Raises:
            LineupError: `usage_invalid` once closed; a store failure (`store_unavailable`,
                `store_corrupt`), after which what was due stays due for the next tick.
        """
        self._check_open()
        now = self.clock.now_ms()
        try:
            if self.clock.virtual:
                self._engine.store.set_meta("virtual_now_ms", str(now))
            await self._engine.tick()
            self._deadlines.fired_ms = max(self._deadlines.fired_ms, now)
        finally:  # a failed tick leaves its facts due; the next timer fires them
            self._arm()

    # -- the Host, the Agent channel, the Surface ------------------------------------------
    def surface(self, conversation_id: str, scope: str) -> AsyncSurface:
        """The Surface's read-only view for a conversation and app scope.

        Raises:
            LineupError: `usage_invalid` unless both are strings of 1–200 characters
                without control characters.
        """
        usable_id("conversation_id", conversation_id)
        usable_id("scope", scope)
        return AsyncSurface(self, conversation_id, scope)

    async def im_records(self, conversation_id: str) -> list[dict[str, Any]]:
        """The immutable IM records written for a conversation, oldest first."""
        usable_id("conversation_id", conversation_id)
        self._check_open()
        return self._engine.facts.im_records(conversation_id)

    async def store_dump(self) -> dict[str, list[tuple[Any, ...]]]:
        """Every table's rows (tests and invariant checks)."""
        self._check_open()
        return self._engine.store.dump()

    async def close(self) -> None:
        """Stop workers, close the database and release its lock."""
        if self._closed:
            return
        try:
            self._deadlines.cancel()
            await self._nodes.leave()  # a lease lost now starts no rejoin; one under way stops
            await self._engine.close()
        finally:
            self._closed = True
            self._engine.store.close()  # the lock goes whatever stopping the workers did
            if self._tmp is not None:
                shutil.rmtree(self._tmp, ignore_errors=True)

    async def __aenter__(self) -> AsyncRuntime:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def _method(tool: RegistryEntry) -> str:
    return tool.method
