"""The embeddable, synchronous `Runtime` (SPEC 5.0): a thin wrapper that runs an
`AsyncRuntime` on a loop thread of its own. Same behaviour, same messages."""

from __future__ import annotations

import _thread
import asyncio
import threading
from collections.abc import Callable, Coroutine, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from lineup_runtime_lite._validator_pool import DEFAULT_BUDGET_S
from lineup_runtime_lite.async_runtime import (
    DEFAULT_ISOLATION,
    AsyncRuntime,
    _check_ids,
    _check_limit,
    _usable_id,
)
from lineup_runtime_lite.clock import Clock
from lineup_runtime_lite.engine import Engine
from lineup_runtime_lite.host import HostSimulator
from lineup_runtime_lite.install import InstallResult
from lineup_runtime_lite.params import DEFAULT_MAX_PARAMS_BYTES
from lineup_sdk.context import Snapshot
from lineup_sdk.errors import LineupError
from lineup_sdk.sandbox import DEFAULT_PROCESSES

__all__ = ["Outbox", "Runtime", "Surface"]

T = TypeVar("T")


class Outbox:
    """The Agent channel: at-least-once; unacked items are fetched again."""

    def __init__(self, rt: Runtime) -> None:
        self._rt = rt

    def fetch(self, limit: int = 100) -> list[dict[str, Any]]:
        """Up to `limit` (1–1000) unacknowledged messages, oldest first.

        Raises:
            LineupError: `usage_invalid` for a limit outside 1–1000.
        """
        _check_limit(limit)
        return self._rt._run(self._rt._art.outbox_fetch(limit))

    def ack(self, ids: list[str]) -> None:
        """Mark messages (by their `id`) as received.

        Raises:
            LineupError: `usage_invalid` unless `ids` is a list of strings.
        """
        _check_ids(ids)
        self._rt._run(self._rt._art.outbox_ack(ids))

    def all(self) -> list[dict[str, Any]]:
        """Every message ever written, acked or not (timelines and tests)."""
        return self._rt._run(self._rt._art.outbox_all())


class Surface:
    """The Surface's read-only view of one conversation's App session for a scope."""

    def __init__(self, rt: Runtime, conversation_id: str, scope: str) -> None:
        self._rt, self.conversation_id, self.scope = rt, conversation_id, scope

    def get(self) -> Snapshot:
        """The current session data (`Snapshot(None, 0)` when nothing is stored)."""
        return self._rt._run(self._rt._art.surface_get(self.conversation_id, self.scope))

    def subscribe(self, listener: Callable[[str, Snapshot], None]) -> Callable[[], None]:
        """Current snapshot first, then every change with strictly increasing revisions.

        The listener runs on a thread of its own subscription, never on the runtime's loop:
        it may call the runtime's API, and a slow listener delays only its own frames.
        Returns once the first frame (the snapshot) was delivered; `settle()` waits for
        the frames queued after it.
        """
        if not callable(listener):
            raise LineupError("usage_invalid", "subscribe(listener) takes a callable")
        art, conv, scope = self._rt._art, self.conversation_id, self.scope
        token, sub = self._rt._call_sync(lambda: art._subscribe(conv, scope, listener))
        sub.wait()

        def unsubscribe() -> None:
            if not self._rt._closed:  # a closed runtime holds no listeners any more
                self._rt._call_sync(lambda: art._unsubscribe(conv, scope, token))

        return unsubscribe

    def replace(self, data: Any, *, expected_revision: int) -> Snapshot:
        """A Surface write: refused this iteration (only handlers write session data; a
        Surface write waits for the mutation queue, SPEC 5.5 and 14).

        Raises:
            LineupError: `session_data_write_not_allowed`, always.
        """
        from lineup_runtime_lite.surface_client import surface_write_refused

        raise surface_write_refused()

    def operations(self) -> list[dict[str, Any]]:
        """The Runtime's operation facts for this session (e.g. a focus and its `ends_at`)."""
        return self._rt._run(self._rt._art.operations(self.conversation_id, self.scope))


class _HostPort:
    """`rt.host`: the Host simulator's event entry point."""

    def __init__(self, rt: Runtime, sim: HostSimulator) -> None:
        self._rt, self.simulator = rt, sim

    def event(
        self, event: str, *, conversation: str, scope: str, instance: str | None = None
    ) -> bool:
        """Send a Host event (see `AsyncRuntime.host_event`); True when the runtime
        applied it, False when the rules ignore it (stale or foreign).

        Raises:
            LineupError: `usage_invalid` for an unknown event, a bad conversation or scope,
                or when there is no instance to address.
        """
        art = self._rt._art
        return self._rt._run(
            art.host_event(event, conversation=conversation, scope=scope, instance=instance)
        )


class Runtime:
    """The reference runtime, synchronous. Create it with `Runtime.open(...)`; asyncio
    code uses `AsyncRuntime` instead (no thread hop)."""

    host: _HostPort
    outbox: Outbox
    _art: AsyncRuntime

    def __init__(self) -> None:  # use Runtime.open
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="lineup-runtime", daemon=True
        )
        self._closed = False

    @classmethod
    def open(
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
    ) -> Runtime:
        """Open (or create) the runtime database at `path` (`:memory:` for tests).

        Takes exactly the arguments of `AsyncRuntime.open` (see there).

        Raises:
            LineupError: `usage_invalid` for a bad option, `trust_store_invalid`,
                `runtime_locked`, `store_corrupt`, `store_unavailable`,
                `store_schema_unsupported`.
        """
        rt = cls()
        rt._thread.start()
        try:
            rt._art = asyncio.run_coroutine_threadsafe(
                AsyncRuntime.open(
                    path,
                    trust=trust,
                    clock=clock,
                    host=host,
                    apps_dir=apps_dir,
                    activation_timeout_s=activation_timeout_s,
                    max_params_bytes=max_params_bytes,
                    sandbox=sandbox,
                    worker_memory_mb=worker_memory_mb,
                    worker_processes=worker_processes,
                    worker_heartbeat_s=worker_heartbeat_s,
                    worker_cpu_s=worker_cpu_s,
                    worker_log_max_bytes=worker_log_max_bytes,
                    worker_env=worker_env,
                    validation_budget_s=validation_budget_s,
                    isolation=isolation,
                    session_idle_s=session_idle_s,
                    workers_memory_mb=workers_memory_mb,
                    _follow_clock=False,
                ),
                rt._loop,
            ).result()
        except BaseException:
            rt._stop_loop()
            raise
        rt.host = _HostPort(rt, rt._art.simulator)
        rt.outbox = Outbox(rt)
        rt.clock.on_advance(rt._advanced)
        return rt

    # -- loop plumbing -------------------------------------------------------------------
    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` on the runtime's loop and wait for it here (one wake-up each way: a
        task started by `call_soon_threadsafe`, a lock released by its done callback)."""
        if self._closed:
            coro.close()  # never scheduled: no "coroutine was never awaited" warning
            raise LineupError("usage_invalid", "the runtime is closed", hint="open a new Runtime")
        done = _thread.allocate_lock()
        done.acquire()
        box: list[Any] = []

        async def run() -> None:
            try:
                box.append((True, await coro))
            except BaseException as exc:  # handed to the caller's thread as it is
                box.append((False, exc))
            finally:
                done.release()  # at once, not one loop turn later in a done callback

        self._loop.call_soon_threadsafe(lambda: self._loop.create_task(run()))
        done.acquire()
        ok, value = box[0]
        if not ok:
            raise value
        return value  # type: ignore[no-any-return]

    def _call_sync(self, fn: Callable[[], T]) -> T:
        async def wrap() -> T:
            return fn()

        return self._run(wrap())

    def _stop_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        if not self._thread.is_alive():
            self._loop.close()

    def _settle(self) -> None:
        """Let background work and Surface listeners finish (a listener may start more
        work; it waits here, in its own thread, never for itself), then arm the timer."""
        engine = self._art._engine
        while True:
            self._run(engine.idle())
            pending = engine.subs.pending()
            if not pending:
                break
            for sub in pending:
                sub.wait()
        self._call_sync(self._art._arm)

    def _advanced(self, now_ms: int) -> None:
        self._run(self._art._advance_to(now_ms))
        self._settle()

    @property
    def _core(self) -> Engine:
        """The engine (tests and in-tree tools only)."""
        return self._art._engine

    @property
    def trust(self) -> Any:
        return self._art.trust

    @trust.setter
    def trust(self, value: Any) -> None:
        self._art.trust = value

    @property
    def _timer(self) -> asyncio.TimerHandle | None:
        """The real-clock timer armed for the next deadline (tests)."""
        return self._art._timer

    def _fire(self) -> Coroutine[Any, Any, None]:
        """Fire the timer now (tests: a wall clock that jumps)."""
        return self._art._fire()

    @property
    def clock(self) -> Clock:
        return self._art.clock

    @property
    def logs_dir(self) -> Path:
        """Where the worker logs are written (one file per app version)."""
        return self._art._engine.logs_dir

    def worker_log(self, scope: str, version: str) -> Path:
        """The worker log of an installed app version (see `AsyncRuntime.worker_log`).

        Raises:
            LineupError: `usage_invalid` when `scope` has no installed `version`.
        """
        return self._call_sync(lambda: self._art.worker_log(scope, version))

    @property
    def sandbox(self) -> dict[str, Any]:
        """What the sandbox enforces for workers here: `files`, `network`, `privileges`,
        `process_tree`, `memory`, `tmp` (each a description, or None when not enforced),
        `mode`, and `refused` (why `required` would refuse to start a worker, or None)."""
        return self._art.sandbox

    # -- public API ----------------------------------------------------------------------
    def install(self, bundle: str | Path, *, dev_build: bool = False) -> InstallResult:
        """Verify a bundle against the trust store and install it (SPEC 5.1).

        Args:
            bundle: The `.lineup` file.
            dev_build: A local dev build of a project folder: when its scope and version
                are installed with another manifest, it installs beside that build (as
                `<version>+dev.<manifest sha256 prefix>`) and becomes current instead of
                `version_conflict`; sessions pinned to the old build keep it.
        """
        from lineup_build.verify import verify_bundle

        art = self._art
        verified = verify_bundle(Path(bundle), self._call_sync(art._current_trust))
        return self._call_sync(lambda: art._install_verified(verified, dev_build))

    def apps(self) -> list[dict[str, Any]]:
        """Installed apps: scope, current version, key id, manifest hash, permissions."""
        return self._run(self._art.apps())

    def uninstall(self, scope: str) -> None:
        """Remove a scope from the Registry (its sessions' history stays in the database)."""
        _usable_id("scope", scope)
        self._run(self._art.uninstall(scope))

    def sessions(self, scope: str | None = None) -> list[dict[str, Any]]:
        """Every App session (of one scope), oldest first (see `AsyncRuntime.sessions`)."""
        return self._run(self._art.sessions(scope))

    def move_dev_sessions(self, scope: str) -> int:
        """Move the sessions of older dev builds of `scope` to its current dev build (see
        `AsyncRuntime.move_dev_sessions`); returns how many moved."""
        return self._run(self._art.move_dev_sessions(scope))

    def inventory(self) -> list[dict[str, Any]]:
        """The Agent Inventory: every installed tool without delivery internals."""
        return self._run(self._art.inventory())

    def call(self, call_id: Any, conversation_id: Any, method: Any, params: Any) -> dict[str, Any]:
        """Send one Agent call; returns the AgentMessage for this step (SPEC 5.0).

        The envelope and the input schema are checked in the caller's thread, so a huge or
        hostile call delays only its caller, never another conversation.

        Raises:
            LineupError: `store_unavailable` or `store_corrupt` (nothing was persisted or
                sent; the same call may be retried), `usage_invalid` once closed. Every
                problem with the call itself is an `error` message, not an exception.
        """
        if self._closed:
            raise LineupError("usage_invalid", "the runtime is closed", hint="open a new Runtime")
        prepared = self._art._prepare(call_id, conversation_id, method, params)
        if not isinstance(prepared, tuple):
            return prepared
        return self._run(self._art._accept(prepared))

    async def acall(
        self, call_id: Any, conversation_id: Any, method: Any, params: Any
    ) -> dict[str, Any]:
        """`call()` for asyncio code on another event loop: the same answer, awaited without
        blocking that loop (small params against a plain input schema are checked right
        there; larger ones, and any schema that is not plain, in that loop's executor;
        never on the runtime's loop). Code that owns its loop should prefer
        `AsyncRuntime` (no thread hop)."""
        if self._closed:
            raise LineupError("usage_invalid", "the runtime is closed", hint="open a new Runtime")
        art = self._art
        if art._inline(method, params):  # plainly small and plain: on the caller's loop
            prepared = art._prepare(call_id, conversation_id, method, params)
        else:
            prepared = await asyncio.get_running_loop().run_in_executor(
                None, art._prepare, call_id, conversation_id, method, params
            )
        if not isinstance(prepared, tuple):
            return prepared
        if self._closed:
            raise LineupError("usage_invalid", "the runtime is closed", hint="open a new Runtime")
        future = asyncio.run_coroutine_threadsafe(art._accept(prepared), self._loop)
        return await asyncio.wrap_future(future)

    def call_many(self, calls: Sequence[tuple[str, str, str, Any]]) -> list[dict[str, Any]]:
        """Accept several Agent calls `(call_id, conversation_id, method, params)` in one
        runtime turn: each is routed, in the order given, before anything they start can
        progress (so the first that starts an activation answers `starting` and the rest
        `queued`); returns their messages in that order."""
        if self._closed:
            raise LineupError("usage_invalid", "the runtime is closed", hint="open a new Runtime")
        prepared = [self._art._prepare(*c) for c in calls]  # the pure checks, in this thread
        return self._run(self._art._accept_many(prepared))

    def call_record(self, call_id: str) -> dict[str, Any] | None:
        """What the runtime keeps of one Agent call: its `method`, `conversation_id` and
        every persisted `messages` entry, oldest first (receipts, then the final); None for
        a call_id it never accepted (rejections are not persisted)."""
        return self._run(self._art.call_record(call_id))

    def settle(self) -> None:
        """Wait until background work (activations, deliveries) has settled."""
        self._settle()

    def surface(self, conversation_id: str, scope: str) -> Surface:
        """The Surface's read-only view for a conversation and app scope.

        Raises:
            LineupError: `usage_invalid` unless both are strings of 1–200 characters
                without control characters.
        """
        _usable_id("conversation_id", conversation_id)
        _usable_id("scope", scope)
        return Surface(self, conversation_id, scope)

    def im_records(self, conversation_id: str) -> list[dict[str, Any]]:
        """The immutable IM records written for a conversation, oldest first."""
        _usable_id("conversation_id", conversation_id)
        return self._run(self._art.im_records(conversation_id))

    def store_dump(self) -> dict[str, list[tuple[Any, ...]]]:
        """Every table's rows (tests and invariant checks)."""
        return self._run(self._art.store_dump())

    def close(self) -> None:
        """Stop workers, close the database and release its lock."""
        if self._closed:
            return
        try:
            self._run(self._art.close())
        finally:
            self._closed = True
            self._stop_loop()

    def __enter__(self) -> Runtime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
