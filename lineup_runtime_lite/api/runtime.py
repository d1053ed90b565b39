"""The embeddable, synchronous `Runtime` (SPEC 5.0): a thin wrapper that runs an
`AsyncRuntime` on a loop thread of its own. Same behaviour, same messages, same shape
(`rt.outbox.fetch`, `rt.host.event`, `rt.surface(...)`); it uses only the public members of
`AsyncRuntime` (a test checks both surfaces name the same members)."""

from __future__ import annotations

import _thread
import asyncio
import concurrent.futures
import contextlib
import contextvars
import functools
import inspect
import threading
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from lineup_runtime_lite.api.arguments import check_ids, check_limit, check_position, usable_id
from lineup_runtime_lite.api.async_faces import AsyncMarks, AsyncOutbox, AsyncSurface
from lineup_runtime_lite.api.async_runtime import AsyncRuntime
from lineup_runtime_lite.api.clock import Clock
from lineup_runtime_lite.api.options import RuntimeOptions
from lineup_runtime_lite.core.messages import ActionAccepted, ActionOutcome, AgentMessage
from lineup_runtime_lite.drivers.install import InstallResult
from lineup_sdk.context import Snapshot
from lineup_sdk.errors import LineupError

__all__ = ["Marks", "Outbox", "Runtime", "Surface"]

T = TypeVar("T")
P = ParamSpec("P")


class Outbox:
    """The Agent channel: at-least-once; unacked items are fetched again."""

    def __init__(self, rt: Runtime, outbox: AsyncOutbox) -> None:
        self._rt, self._outbox = rt, outbox

    def fetch(self, limit: int = 100) -> list[AgentMessage]:
        """Up to `limit` (1–1000) unacknowledged messages, oldest first.

        Raises:
            LineupError: `usage_invalid` for a limit outside 1–1000.
        """
        check_limit(limit)  # before the closed check, as on the loop
        return self._rt._run(self._outbox.fetch(limit))

    def ack(self, ids: list[str]) -> None:
        """Mark messages (by their `id`) as received.

        Raises:
            LineupError: `usage_invalid` unless `ids` is a list of strings.
        """
        check_ids(ids)
        self._rt._run(self._outbox.ack(ids))

    def all(self) -> list[AgentMessage]:
        """Every message ever written, acked or not (timelines and tests)."""
        return self._rt._run(self._outbox.all())

    def after(self, position: int = 0, limit: int = 100) -> tuple[list[AgentMessage], int]:
        """Up to `limit` (1–1000) messages written after `position`, acked or not, oldest
        first, and the position to read from next (`position` again when there were none):
        a reader that follows the outbox (a timeline) reads what is new, never the history
        before it.

        Raises:
            LineupError: `usage_invalid` for a limit outside 1–1000 or a negative position.
        """
        check_position(position)
        check_limit(limit)
        return self._rt._run(self._outbox.after(position, limit))


class Marks:
    """`rt.marks`: marks kept with accepted calls (see `AsyncMarks`)."""

    def __init__(self, rt: Runtime, marks: AsyncMarks) -> None:
        self._rt, self._marks = rt, marks

    def add(self, call_id: str, mark: str) -> None:
        """Keep `mark` with the accepted call `call_id` (see `AsyncMarks.add`)."""
        self._rt._run(self._marks.add(call_id, mark))

    def has(self, call_id: str, mark: str) -> bool:
        """Whether `add(call_id, mark)` was done (in this or an earlier process)."""
        return self._rt._run(self._marks.has(call_id, mark))

    def calls(
        self,
        mark: str,
        conversation_id: str | None = None,
        *,
        after: str | None = None,
        limit: int | None = None,
    ) -> list[str]:
        """The call_ids marked with `mark`, oldest first (see `AsyncMarks.calls`)."""
        return self._rt._run(self._marks.calls(mark, conversation_id, after=after, limit=limit))


class Surface:
    """The Surface's read-only view of one conversation's App session for a scope."""

    conversation_id: str
    scope: str

    def __init__(self, rt: Runtime, surface: AsyncSurface) -> None:
        self._rt, self._surface = rt, surface
        self.conversation_id, self.scope = surface.conversation_id, surface.scope

    def get(self) -> Snapshot:
        """The current session data (`Snapshot(None, 0)` when nothing is stored)."""
        return self._rt._run(self._surface.get())

    def subscribe(self, listener: Callable[[str, Snapshot], None]) -> Callable[[], None]:
        """Current snapshot first, then every change with strictly increasing revisions.

        The listener runs on a thread of its own subscription, never on the runtime's loop:
        it may call the runtime's API, and a slow listener delays only its own frames.
        Returns once the first frame (the snapshot) was delivered; `settle()` waits for
        the frames queued after it.
        """
        if not callable(listener):
            raise LineupError("usage_invalid", "subscribe(listener) takes a callable")
        rt = self._rt
        off = rt._run(self._surface.subscribe(listener))

        def unsubscribe() -> None:
            if not rt._closed:  # a closed runtime holds no listeners any more
                rt._call_sync(off)

        return unsubscribe

    def replace(self, data: Any, *, expected_revision: int) -> Snapshot:
        """A Surface write: refused this iteration (only handlers write session data; a
        Surface write waits for the mutation queue, SPEC 5.5 and 14).

        Raises:
            LineupError: `session_data_write_not_allowed`, always.
        """
        from lineup_runtime_lite.host.surface_client import surface_write_refused

        raise surface_write_refused()

    def act(
        self,
        name: str,
        params: Any,
        *,
        client_id: str,
        seq: int,
        timeout: float | None = None,
    ) -> ActionOutcome:
        """Ask for a UI Action and wait for its outcome (`AsyncSurface.act`):
        `{"action_id", "result", "revision"}`, or `LineupError` with the outcome's code
        (`action_pending` when `timeout` ran out: the action stays queued)."""
        return self._rt._run(
            self._surface.act(name, params, client_id=client_id, seq=seq, timeout=timeout)
        )

    def submit(
        self,
        name: Any,
        params: Any,
        *,
        client_id: Any,
        seq: Any,
        timeout: float | None = None,
    ) -> tuple[ActionAccepted, concurrent.futures.Future[ActionOutcome]]:
        """`act()` in its two halves (`AsyncSurface.submit`): blocks until the action is
        accepted, then returns `({"action_id", "seq"}, outcome)`; `outcome.result()` returns
        or raises as `act()` does (cancelling it only stops waiting: the action stays
        queued).

        Raises:
            LineupError: a rejection before acceptance (nothing persisted), as `act()`.
        """
        accept, result = self._submitting(name, params, client_id, seq, timeout)
        return self._rt._run(accept), result

    async def asubmit(
        self,
        name: Any,
        params: Any,
        *,
        client_id: Any,
        seq: Any,
        timeout: float | None = None,
    ) -> tuple[ActionAccepted, Awaitable[ActionOutcome]]:
        """`submit()` for asyncio code on another event loop (the dev Host's Surface
        bridge): returns once the action is accepted, with `({"action_id", "seq"},
        outcome)`; `outcome` is awaited on the caller's loop.

        Raises:
            LineupError: a rejection before acceptance (nothing persisted), as `act()`.
        """
        rt = self._rt
        if rt._closed:
            raise LineupError("usage_invalid", "the runtime is closed", hint="open a new Runtime")
        accept, result = self._submitting(name, params, client_id, seq, timeout)
        accepted = await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(accept, rt._loop))
        return accepted, asyncio.wrap_future(result)

    def _submitting(
        self, name: Any, params: Any, client_id: Any, seq: Any, timeout: float | None
    ) -> tuple[Coroutine[Any, Any, ActionAccepted], concurrent.futures.Future[ActionOutcome]]:
        """The acceptance to run on the runtime's loop, and the outcome it will fill in."""
        rt = self._rt
        result: concurrent.futures.Future[ActionOutcome] = concurrent.futures.Future()

        def copy(task: asyncio.Future[ActionOutcome]) -> None:
            # the caller may have stopped waiting (cancelled `result`) meanwhile
            with contextlib.suppress(concurrent.futures.InvalidStateError):
                if task.cancelled():
                    result.cancel()
                elif (exc := task.exception()) is not None:
                    result.set_exception(exc)
                else:
                    result.set_result(task.result())

        async def accept() -> ActionAccepted:
            accepted, outcome = await self._surface.submit(
                name, params, client_id=client_id, seq=seq, timeout=timeout
            )
            outcome.add_done_callback(copy)

            def stop_waiting(f: concurrent.futures.Future[ActionOutcome]) -> None:
                if f.cancelled():  # only the wait ends: the action stays queued
                    with contextlib.suppress(RuntimeError):
                        rt._loop.call_soon_threadsafe(outcome.cancel)

            result.add_done_callback(stop_waiting)
            return accepted

        return accept(), result

    def operations(self) -> list[dict[str, Any]]:
        """The Runtime's operation facts for this session (e.g. a focus and its `ends_at`)."""
        return self._rt._run(self._surface.operations())


class _HostPort:
    """`rt.host`: the Host simulator's event entry point."""

    def __init__(self, rt: Runtime, art: AsyncRuntime) -> None:
        self._rt, self._host, self.simulator = rt, art.host, art.host.simulator

    def event(
        self, event: str, *, conversation: str, scope: str, instance: str | None = None
    ) -> bool:
        """Send a Host event (see `AsyncRuntime.host.event`); True when the runtime
        applied it, False when the rules ignore it (stale or foreign).

        Raises:
            LineupError: `usage_invalid` for an unknown event, a bad conversation or scope,
                or when there is no instance to address.
        """
        host = self._host
        return self._rt._run(
            host.event(event, conversation=conversation, scope=scope, instance=instance)
        )


def _opens_like(
    opener: Callable[P, Coroutine[Any, Any, AsyncRuntime]],
) -> Callable[[Callable[..., Runtime]], Callable[P, Runtime]]:
    """`Runtime.open` takes exactly the arguments of `AsyncRuntime.open`: one signature,
    typed (mypy checks callers against it) and shown by `help()` and `inspect`."""

    def wrap(fn: Callable[..., Runtime]) -> Callable[P, Runtime]:
        return functools.wraps(opener, assigned=("__wrapped__",), updated=())(fn)

    return wrap


#: `AsyncRuntime.open`'s parameters, which `Runtime.open` binds its arguments to.
_OPEN = inspect.signature(AsyncRuntime.open)


class Runtime:
    """The reference runtime, synchronous. Create it with `Runtime.open(...)`; asyncio
    code uses `AsyncRuntime` instead (no thread hop)."""

    host: _HostPort
    outbox: Outbox
    #: Marks kept with accepted calls (`rt.marks.add(call_id, mark)`, `has`, `calls`).
    marks: Marks
    _art: AsyncRuntime

    def __init__(self) -> None:  # use Runtime.open
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="lineup-runtime", daemon=True
        )
        self._closed = False

    @staticmethod
    @_opens_like(AsyncRuntime.open)
    def open(*args: Any, **options: Any) -> Runtime:
        """Open (or create) the runtime database at `path` (`:memory:` for tests).

        Takes exactly the arguments of `AsyncRuntime.open` (see there).

        Raises:
            LineupError: `usage_invalid` for a bad option, `trust_store_invalid`,
                `runtime_locked`, `store_corrupt`, `store_unavailable`,
                `store_schema_unsupported`, `install_tampered` (the apps folder, or a
                folder above it, is another user's or others may write it).
        """
        bound = _OPEN.bind(*args, **options)  # a wrong argument is a TypeError
        return Runtime._from_options(RuntimeOptions(**bound.arguments))

    @staticmethod
    def _from_options(options: RuntimeOptions) -> Runtime:
        """Open a runtime from checked options (`open`, and `testing.open_app`)."""
        rt = Runtime()
        rt._thread.start()
        if options.clock is not None:  # before the AsyncRuntime's: `advance()` fires here, waits
            options.clock.on_advance(rt._advanced)
        try:
            rt._art = asyncio.run_coroutine_threadsafe(
                AsyncRuntime._from_options(options), rt._loop
            ).result()
        except BaseException:
            rt._stop_loop()
            raise
        rt.host = _HostPort(rt, rt._art)
        rt.outbox = Outbox(rt, rt._art.outbox)
        rt.marks = Marks(rt, rt._art.marks)
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

        # the task runs in a copy of this thread's context: a Surface listener calling the
        # runtime is known there as that listener (a settle never waits for its caller)
        ctx = contextvars.copy_context()
        self._loop.call_soon_threadsafe(lambda: self._loop.create_task(run(), context=ctx))
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

    def _advanced(self, now_ms: int) -> None:
        """The virtual clock moved: fire what fell due and let it settle before `advance()`
        returns (its failure raises there); the AsyncRuntime's own listener, called next,
        finds that time fired already."""
        if hasattr(self, "_art"):  # not before the runtime is open (nor when open failed)
            self.tick()
            self.settle()

    @property
    def _timer(self) -> asyncio.TimerHandle | None:
        """The real-clock timer armed for the next deadline (tests)."""
        return self._art._deadlines.handle

    def _fire(self) -> Coroutine[Any, Any, None]:
        """Fire the timer now (tests: a wall clock that jumps)."""
        return self._art.tick()

    @property
    def trust(self) -> Any:
        return self._art.trust

    @trust.setter
    def trust(self, value: Any) -> None:
        self._art.trust = value

    @property
    def clock(self) -> Clock:
        return self._art.clock

    @property
    def logs_dir(self) -> Path:
        """Where the worker logs are written (one file per app version)."""
        return self._art.logs_dir

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
        `mode`, and `refused` (why `required` would refuse to start a worker, or None);
        and `workers_memory`, the running workers' memory by PSS with RSS beside it (see
        `AsyncRuntime.sandbox`)."""
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
        return self._run(self._art.install(bundle, dev_build=dev_build))

    def apps(self) -> list[dict[str, Any]]:
        """Installed apps: scope, current version, key id, manifest hash, permissions,
        `trusted` (see `AsyncRuntime.apps`)."""
        return self._run(self._art.apps())

    def surface_document(self, scope: str, version: str) -> bytes | None:
        """The signed Surface document of an installed version, None without a Surface
        (see `AsyncRuntime.surface_document`)."""
        return self._run(self._art.surface_document(scope, version))

    def surface_csp(self, scope: str, version: str) -> dict[str, list[str]] | None:
        """The `csp` of an installed version's Surface document, None without a Surface
        (see `AsyncRuntime.surface_csp`)."""
        return self._run(self._art.surface_csp(scope, version))

    def uninstall(self, scope: str) -> None:
        """Remove a scope from the Registry (its sessions' history stays in the database)."""
        usable_id("scope", scope)
        self._run(self._art.uninstall(scope))

    def sessions(self, scope: str | None = None) -> list[dict[str, Any]]:
        """Every App session (of one scope), oldest first (see `AsyncRuntime.sessions`)."""
        return self._run(self._art.sessions(scope))

    def move_dev_sessions(self, scope: str) -> int:
        """Move the sessions of older dev builds of `scope` to its current dev build (see
        `AsyncRuntime.move_dev_sessions`); returns how many moved."""
        return self._run(self._art.move_dev_sessions(scope))

    def app_file(self, scope: str, version: str, path: str) -> bytes | None:
        """One file of an installed version as its manifest lists it, its hash checked
        (see `AsyncRuntime.app_file`)."""
        return self._run(self._art.app_file(scope, version, path))

    def inventory(self) -> list[dict[str, Any]]:
        """The Agent Inventory: every installed tool without delivery internals."""
        return self._run(self._art.inventory())

    def call(self, call_id: Any, conversation_id: Any, method: Any, params: Any) -> AgentMessage:
        """Send one Agent call; returns the AgentMessage for this step (SPEC 5.0).

        The envelope and the input schema are checked as `AsyncRuntime.call` checks them:
        plainly small params against a plain schema at once, anything larger in an executor
        thread, so a huge or hostile call delays only its caller, never another conversation.

        Raises:
            LineupError: `store_unavailable` or `store_corrupt` (nothing was persisted or
                sent; the same call may be retried), `usage_invalid` once closed,
                `call_pending` when the runtime closes while the call waits for its final
                (it stays stored: the same call_id answers it once open again). Every
                problem with the call itself is an `error` message, not an exception.
        """
        return self._run(self._art.call(call_id, conversation_id, method, params))

    async def acall(
        self, call_id: Any, conversation_id: Any, method: Any, params: Any
    ) -> AgentMessage:
        """`call()` for asyncio code on another event loop: the same answer, awaited without
        blocking that loop (checked as `call()` checks it). Code that owns its loop should
        prefer `AsyncRuntime` (no thread hop)."""
        if self._closed:
            raise LineupError("usage_invalid", "the runtime is closed", hint="open a new Runtime")
        future = asyncio.run_coroutine_threadsafe(
            self._art.call(call_id, conversation_id, method, params), self._loop
        )
        return await asyncio.wrap_future(future)

    def call_many(self, calls: Sequence[tuple[str, str, str, Any]]) -> list[AgentMessage]:
        """Accept several Agent calls `(call_id, conversation_id, method, params)` in one
        runtime turn: each is routed, in the order given, before anything they start can
        progress (so the first that starts an activation answers `starting` and the rest
        `queued`); returns their messages in that order."""
        if self._closed:
            raise LineupError("usage_invalid", "the runtime is closed", hint="open a new Runtime")
        return self._run(self._art.call_many(calls))

    def call_record(self, call_id: str) -> dict[str, Any] | None:
        """What the runtime keeps of one Agent call: its `method`, `conversation_id` and
        every persisted `messages` entry, oldest first (receipts, then the final); None for
        a call_id it never accepted (rejections are not persisted)."""
        return self._run(self._art.call_record(call_id))

    def app_session(self, conversation_id: str, scope: str) -> dict[str, Any] | None:
        """A conversation's App session for a scope (see `AsyncRuntime.app_session`)."""
        return self._run(self._art.app_session(conversation_id, scope))

    def surface_view_key(self) -> bytes:
        """The Surface `view` signing key (see `AsyncRuntime.surface_view_key`)."""
        return self._run(self._art.surface_view_key())

    def kill_workers(self, scope: str) -> int:
        """A fault, for simulations and tests: kill the running workers of an app scope now
        (see `AsyncRuntime.kill_workers`); returns how many."""
        return self._run(self._art.kill_workers(scope))

    def settle(self) -> None:
        """Wait until background work (activations, deliveries) and Surface listeners
        have settled (a listener may start more work; one settling waits for all but
        itself)."""
        self._run(self._art.settle())

    def tick(self) -> None:
        """Fire what fell due on the runtime clock now, and wait for it (see
        `AsyncRuntime.tick`); a virtual clock's `advance()` does this, then settles."""
        self._run(self._art.tick())

    def surface(self, conversation_id: str, scope: str) -> Surface:
        """The Surface's read-only view for a conversation and app scope.

        Raises:
            LineupError: `usage_invalid` unless both are strings of 1–200 characters
                without control characters.
        """
        return Surface(self, self._art.surface(conversation_id, scope))

    def im_records(self, conversation_id: str) -> list[dict[str, Any]]:
        """The immutable IM records written for a conversation, oldest first."""
        usable_id("conversation_id", conversation_id)
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
