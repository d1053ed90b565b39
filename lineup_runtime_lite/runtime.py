"""The embeddable, synchronous `Runtime` (SPEC 5.0): a facade over the core's event loop."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import tempfile
import threading
from collections.abc import Callable, Coroutine, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from lineup_runtime_lite.clock import Clock, RealClock, VirtualClock
from lineup_runtime_lite.core import Core, input_problems
from lineup_runtime_lite.host import HostSimulator
from lineup_runtime_lite.install import InstallResult, Tool, install_verified
from lineup_runtime_lite.messages import error_body, reject
from lineup_runtime_lite.params import (
    DEFAULT_MAX_PARAMS_BYTES,
    Envelope,
    Rejection,
    check_envelope,
    id_problem,
)
from lineup_runtime_lite.store import Store
from lineup_runtime_lite.workers import WorkerOptions
from lineup_sdk.context import Snapshot
from lineup_sdk.errors import LineupError

__all__ = ["Outbox", "Runtime", "Surface"]

T = TypeVar("T")

#: The most messages one `outbox.fetch` returns.
MAX_FETCH = 1000


class Outbox:
    """The Agent channel: at-least-once; unacked items are fetched again."""

    def __init__(self, rt: Runtime) -> None:
        self._rt = rt

    def fetch(self, limit: int = 100) -> list[dict[str, Any]]:
        """Up to `limit` (1–1000) unacknowledged messages, oldest first.

        Raises:
            LineupError: `usage_invalid` for a limit outside 1–1000.
        """
        if type(limit) is not int or not 1 <= limit <= MAX_FETCH:
            raise LineupError(
                "usage_invalid",
                f"outbox.fetch(limit) takes an integer from 1 to {MAX_FETCH}, not {limit!r}",
            )

        def go() -> list[dict[str, Any]]:
            from lineup_runtime_lite import faults

            faults.hit("outbox.fetch")
            rows = self._rt._core.store.all(
                "SELECT body FROM outbox WHERE acked=0 ORDER BY id LIMIT ?", (limit,)
            )
            return [json.loads(r[0]) for r in rows]

        return self._rt._call_sync(go)

    def ack(self, ids: list[str]) -> None:
        """Mark messages (by their `id`) as received.

        Raises:
            LineupError: `usage_invalid` unless `ids` is a list of strings.
        """
        if not isinstance(ids, list | tuple) or not all(type(i) is str for i in ids):
            raise LineupError("usage_invalid", "outbox.ack(ids) takes a list of message ids")

        def go() -> None:
            from lineup_runtime_lite import faults

            faults.hit("outbox.ack")
            with self._rt._core.store.transaction(fault_points=False) as db:
                db.executemany("UPDATE outbox SET acked=1 WHERE msg_id=?", [(i,) for i in ids])

        self._rt._call_sync(go)

    def all(self) -> list[dict[str, Any]]:
        """Every message ever written, acked or not (timelines and tests)."""
        rows = self._rt._call_sync(
            lambda: self._rt._core.store.all("SELECT body FROM outbox ORDER BY id")
        )
        return [json.loads(r[0]) for r in rows]


class Surface:
    """The Surface's read-only view of one conversation's App session for a scope."""

    def __init__(self, rt: Runtime, conversation_id: str, scope: str) -> None:
        self._rt, self.conversation_id, self.scope = rt, conversation_id, scope

    def get(self) -> Snapshot:
        """The current session data (`Snapshot(None, 0)` when nothing is stored)."""
        return self._rt._call_sync(
            lambda: self._rt._core.surface_get(self.conversation_id, self.scope)
        )

    def subscribe(self, listener: Callable[[str, Snapshot], None]) -> Callable[[], None]:
        """Current snapshot first, then every change with strictly increasing revisions.

        The listener runs on a thread of its own subscription, never on the runtime's loop:
        it may call the runtime's API, and a slow listener delays only its own frames.
        Returns once the first frame (the snapshot) was delivered; `settle()` waits for
        the frames queued after it.
        """
        if not callable(listener):
            raise LineupError("usage_invalid", "subscribe(listener) takes a callable")
        key = (self.scope, self.conversation_id)
        core = self._rt._core

        def register() -> tuple[int, Any]:
            token = core.subs.add(key, listener, core.surface_get(self.conversation_id, self.scope))
            return token, core.subs.subscription(key, token)

        token, sub = self._rt._call_sync(register)
        sub.wait()

        def unsubscribe() -> None:
            if not self._rt._closed:  # a closed runtime holds no listeners any more
                self._rt._call_sync(lambda: core.subs.remove(key, token))

        return unsubscribe

    def operations(self) -> list[dict[str, Any]]:
        """The Runtime's operation facts for this session (e.g. a focus and its `ends_at`)."""
        from lineup_runtime_lite.clock import format_ts

        def go() -> list[dict[str, Any]]:
            rows = self._rt._core.store.all(
                "SELECT o.* FROM operations o JOIN app_sessions s ON s.app_session_id=o.app_session_id "
                "WHERE s.conversation_id=? AND s.scope=? ORDER BY o.started_ms",
                (self.conversation_id, self.scope),
            )
            return [
                {
                    "kind": r["kind"],
                    "state": r["state"],
                    "started_at": format_ts(r["started_ms"]),
                    "ends_at": format_ts(r["ends_ms"]),
                    "ended_at": format_ts(r["ended_ms"]) if r["ended_ms"] is not None else None,
                }
                for r in rows
            ]

        return self._rt._call_sync(go)


class _HostPort:
    """`rt.host`: the Host simulator's event entry point."""

    def __init__(self, rt: Runtime, sim: HostSimulator) -> None:
        self._rt, self.simulator = rt, sim

    def event(
        self, event: str, *, conversation: str, scope: str, instance: str | None = None
    ) -> bool:
        """Send a Host event; without `instance`, the latest shown for that conversation."""
        inst = instance or self.simulator.instance_for(conversation, scope)
        if inst is None:
            return False
        applied = self._rt._run(self.simulator.send(event, inst, conversation, scope))
        self._rt._settle()
        return applied


class Runtime:
    """The reference runtime. Create it with `Runtime.open(...)`."""

    trust: Any
    clock: Clock
    host: _HostPort
    outbox: Outbox
    _core: Core
    _max_params_bytes: int = DEFAULT_MAX_PARAMS_BYTES

    def __init__(self) -> None:  # use Runtime.open
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="lineup-runtime", daemon=True
        )
        self._timer: asyncio.TimerHandle | None = None
        self._tmp: Path | None = None
        self._trust_path: Path | None = None
        self._trust_stamp: tuple[int, int, int] | None = None
        self._sandbox_mode = "best_effort"
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
        worker_heartbeat_s: float = 5.0,
        worker_log_max_bytes: int = 10 * 1024 * 1024,
        worker_env: Mapping[str, str] | None = None,
    ) -> Runtime:
        """Open (or create) the runtime database at `path` (`:memory:` for tests).

        Args:
            path: SQLite file; one runtime per file (`runtime_locked`).
            trust: A trust store path or `TrustStore`.
            clock: `RealClock()` (default) or a `VirtualClock`, whose time persists here.
            host: The Host simulator (default: `HostSimulator(policy="auto")`).
            apps_dir: Where installed apps are unpacked (default: next to the database).
            activation_timeout_s: Runtime-clock seconds before a starting activation fails.
            max_params_bytes: The largest Agent params accepted, in bytes of canonical
                JSON (`params_too_large` above it).
            sandbox: `best_effort` (contain workers as far as the platform allows, and
                report it in `rt.sandbox`), `required` (refuse to start a worker without
                file, network and process-tree containment: `sandbox_unavailable`) or
                `off` (debugging only).
            worker_memory_mb: Data-memory cap of each worker process.
            worker_heartbeat_s: A worker whose loop does not answer a heartbeat this long
                is recycled (real time).
            worker_log_max_bytes: Each worker log is truncated, with a note, past this size.
            worker_env: Extra environment variables for every worker (configuration an
                operator chooses to give MiniApps; nothing of this process's environment
                reaches a worker otherwise). Names are upper-case identifiers, never
                `LINEUP_*` or `PYTHON*`.

        Raises:
            LineupError: `usage_invalid` for a bad option, `trust_store_invalid`,
                `runtime_locked`, `store_corrupt`, `store_unavailable`,
                `store_schema_unsupported`.
        """
        from lineup_build.trust import TrustStore
        from lineup_sdk.sandbox import check_mode

        if type(max_params_bytes) is not int or max_params_bytes < 1:
            raise LineupError(
                "usage_invalid",
                f"max_params_bytes must be a positive integer, not {max_params_bytes!r}",
            )
        if not isinstance(path, str | os.PathLike) or str(path) == "":
            raise LineupError("usage_invalid", f"path must be a file path, not {path!r}")
        if not isinstance(trust, TrustStore | str | os.PathLike):
            raise LineupError(
                "usage_invalid", f"trust must be a TrustStore or a file path, not {trust!r}"
            )
        if isinstance(activation_timeout_s, bool) or not (
            isinstance(activation_timeout_s, int | float) and 0 < activation_timeout_s < 10**9
        ):
            raise LineupError(
                "usage_invalid",
                f"activation_timeout_s must be a positive number, not {activation_timeout_s!r}",
            )
        check_mode(sandbox)
        if worker_memory_mb < 64 or worker_heartbeat_s <= 0 or worker_log_max_bytes < 0:
            raise LineupError(
                "usage_invalid",
                "worker_memory_mb must be at least 64, worker_heartbeat_s positive and "
                "worker_log_max_bytes not negative",
            )
        extra_env = _worker_env(worker_env)
        rt = cls()
        rt._max_params_bytes = max_params_bytes
        if isinstance(trust, TrustStore):
            rt.trust = trust
        else:
            rt._trust_path = Path(trust)
            rt._trust_stamp = _stamp(rt._trust_path)
            rt.trust = TrustStore.load(rt._trust_path)
        rt._sandbox_mode = sandbox
        rt.clock = clock or RealClock()
        try:
            store = Store(path)
        except BaseException:
            rt._loop.close()
            raise
        try:
            if str(path) == ":memory:" and apps_dir is None:
                rt._tmp = Path(tempfile.mkdtemp(prefix="lineup-rt-"))
                apps = rt._tmp
            else:
                apps = Path(apps_dir) if apps_dir else Path(str(path) + ".apps")
            try:
                apps.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise LineupError(
                    "store_unavailable", f"cannot create the apps folder {apps}: {exc.strerror}"
                ) from None
            if isinstance(rt.clock, VirtualClock):
                saved = store.meta("virtual_now_ms")
                if saved is not None:
                    if not saved.isdigit():
                        raise LineupError("store_corrupt", f"{path}: a damaged virtual time")
                    rt.clock.set(int(saved))
            sim = host or HostSimulator(policy="auto")
            rt._core = Core(
                store,
                rt.clock,
                apps,
                apps / "_logs",
                activation_timeout_s=activation_timeout_s,
                host_intent=sim.on_intent,
                check_app=rt._check_app,
                check_trust=rt._check_trust,
                worker_options=WorkerOptions(
                    sandbox=sandbox,
                    memory_mb=worker_memory_mb,
                    heartbeat_s=worker_heartbeat_s,
                    log_max_bytes=worker_log_max_bytes,
                    env=extra_env,
                ),
            )
            sim.bind(rt._core.host_event)
            rt.host = _HostPort(rt, sim)
            rt.outbox = Outbox(rt)
            rt._thread.start()
            rt._run(rt._core.recover())
            rt._settle()
            rt.clock.on_advance(rt._advanced)
        except BaseException:
            if rt._thread.is_alive():
                if hasattr(rt, "_core"):
                    asyncio.run_coroutine_threadsafe(rt._core.close(), rt._loop).result()
                rt._loop.call_soon_threadsafe(rt._loop.stop)
                rt._thread.join(timeout=5)
            rt._loop.close()
            store.close()
            if rt._tmp is not None:
                shutil.rmtree(rt._tmp, ignore_errors=True)
            raise
        return rt

    # -- loop plumbing -------------------------------------------------------------------
    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        if self._closed:
            coro.close()  # never scheduled: no "coroutine was never awaited" warning
            raise LineupError("usage_invalid", "the runtime is closed", hint="open a new Runtime")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def _call_sync(self, fn: Callable[[], T]) -> T:
        async def wrap() -> T:
            return fn()

        return self._run(wrap())

    def _settle(self) -> None:
        """Let background work and Surface listeners finish (a listener may start more
        work), then arm the real-clock timer for the next deadline."""
        while True:
            self._run(self._core.idle())
            pending = self._core.subs.pending()
            if not pending:
                break
            for sub in pending:
                sub.wait()
        self._arm()

    def _arm(self) -> None:
        if self.clock.virtual:
            return

        def arm() -> None:
            if self._timer is not None:
                self._timer.cancel()
            due = self._core.next_deadline()
            if due is None:
                return
            delay = max(0.0, (due - self.clock.now_ms()) / 1000)
            self._timer = self._loop.call_later(delay, lambda: self._core.spawn(self._fire()))

        self._loop.call_soon_threadsafe(arm)

    async def _fire(self) -> None:
        try:
            await self._core.tick()
        finally:  # a failed tick leaves its facts due; the next timer fires them
            self._arm()

    def _advanced(self, now_ms: int) -> None:
        async def go() -> None:
            with self._core.store.transaction(fault_points=False) as db:
                db.execute(
                    "INSERT OR REPLACE INTO meta VALUES ('virtual_now_ms', ?)", (str(now_ms),)
                )
            await self._core.tick()

        self._run(go())
        self._settle()

    def _current_trust(self) -> Any:
        """The trust store, re-read when its file changed since it was last read."""
        if self._trust_path is not None:
            stamp = _stamp(self._trust_path)
            if stamp != self._trust_stamp:
                from lineup_build.trust import TrustStore

                self.trust = TrustStore.load(self._trust_path)
                self._trust_stamp = stamp
        return self.trust

    def _check_app(self, scope: str, version: str) -> None:
        from lineup_runtime_lite.install import check_installed

        check_installed(self._core.store, self._current_trust(), scope, version)

    def _check_trust(self, scope: str, version: str) -> None:
        """At every activation: the key still trusted for the app, nothing planted."""
        from lineup_runtime_lite.install import check_no_strays, check_trusted

        check_trusted(self._core.store, self._current_trust(), scope, version)
        check_no_strays(self._core.store, scope, version)

    @property
    def sandbox(self) -> dict[str, Any]:
        """What the sandbox enforces for workers here: `files`, `network`, `privileges`,
        `process_tree`, `memory`, `tmp` (each a description, or None when not enforced),
        `mode`, and `refused` (why `required` would refuse to start a worker, or None)."""
        from lineup_sdk.sandbox import probe

        report = self._core.sandbox_report
        return dict(report) if report is not None else probe(self._sandbox_mode)

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

        verified = verify_bundle(Path(bundle), self._current_trust())

        def go() -> InstallResult:
            result = install_verified(
                self._core.store,
                self._core.apps_dir,
                verified,
                self.clock.now_ms(),
                dev_build=dev_build,
            )
            self._core.load_registry()
            return result

        return self._call_sync(go)

    def apps(self) -> list[dict[str, Any]]:
        """Installed apps: scope, current version, key id, manifest hash, permissions."""

        def go() -> list[dict[str, Any]]:
            store = self._core.store
            rows = store.all(
                "SELECT a.scope, a.version, v.key_id, v.manifest_sha256, v.manifest FROM apps a "
                "JOIN app_versions v ON v.scope=a.scope AND v.version=a.version ORDER BY a.scope"
            )
            out = []
            for r in rows:
                app = dict(r)
                manifest = json.loads(app.pop("manifest"))
                app["permissions"] = sorted(manifest["app"].get("permissions", {}))
                out.append(app)
            return out

        return self._call_sync(go)

    def uninstall(self, scope: str) -> None:
        """Remove a scope from the Registry (its sessions' history stays in the database)."""
        _usable_id("scope", scope)

        def go() -> None:
            with self._core.store.transaction() as db:
                db.execute("DELETE FROM apps WHERE scope=?", (scope,))
            self._core.load_registry()

        self._call_sync(go)

    def inventory(self) -> list[dict[str, Any]]:
        """The Agent Inventory: every installed tool without delivery internals."""
        return self._call_sync(
            lambda: [
                t.inventory() for t in sorted(self._core.registry.values(), key=lambda t: t.method)
            ]
        )

    def call(self, call_id: Any, conversation_id: Any, method: Any, params: Any) -> dict[str, Any]:
        """Send one Agent call; returns the AgentMessage for this step (SPEC 5.0).

        The envelope and the input schema are checked in the caller's thread, so a huge or
        hostile call delays only its caller, never another conversation.

        Raises:
            LineupError: `store_unavailable` or `store_corrupt` (nothing was persisted or
                sent; the same call may be retried), `usage_invalid` once closed. Every
                problem with the call itself is an `error` message, not an exception.
        """
        prepared = self._prepare(call_id, conversation_id, method, params)
        if not isinstance(prepared, tuple):
            return prepared
        msg = self._run(self._core.call(*prepared))
        if msg["kind"] == "receipt":  # only a call that starts or waits can add a deadline
            self._arm()
        return msg

    def _prepare(
        self, call_id: Any, conversation_id: Any, method: Any, params: Any
    ) -> dict[str, Any] | tuple[Envelope, Tool | None, list[dict[str, Any]] | None]:
        """The pure part of a call, in the calling thread: the envelope and the input
        schema. Returns the rejection to answer, or what the loop needs to go on."""
        if self._closed:
            raise LineupError("usage_invalid", "the runtime is closed", hint="open a new Runtime")
        checked = check_envelope(
            call_id, conversation_id, method, params, max_bytes=self._max_params_bytes
        )
        if isinstance(checked, Rejection):
            tool = self._core.registry.get(method) if type(method) is str else None
            scope = tool.scope if tool else method.split(".")[0] if type(method) is str else ""
            body = error_body(checked.code, checked.message, details=checked.details)
            return reject(checked.call_id, scope, self.clock.now_ms(), body)
        tool = self._core.registry.get(checked.method)  # swapped whole, never edited in place
        problems = input_problems(tool, checked.params) if tool is not None else None
        return checked, tool, problems

    def call_record(self, call_id: str) -> dict[str, Any] | None:
        """What the runtime keeps of one Agent call: its `method`, `conversation_id` and
        every persisted `messages` entry, oldest first (receipts, then the final); None for
        a call_id it never accepted (rejections are not persisted)."""

        def go() -> dict[str, Any] | None:
            store = self._core.store
            row = store.one("SELECT method, conversation_id FROM calls WHERE call_id=?", (call_id,))
            if row is None:
                return None
            bodies = store.all("SELECT body FROM receipts WHERE call_id=? ORDER BY n", (call_id,))
            return {
                "call_id": call_id,
                "method": row["method"],
                "conversation_id": row["conversation_id"],
                "messages": [json.loads(r[0]) for r in bodies],
            }

        return self._call_sync(go)

    async def acall(
        self, call_id: Any, conversation_id: Any, method: Any, params: Any
    ) -> dict[str, Any]:
        """`call()` for asyncio code on another event loop (an MCP server, say): the same
        answer, awaited without blocking that loop. The pure checks never run on the
        runtime's loop: small params (a bounded walk says so) are checked right here, larger
        ones in the default executor's threads, so a huge call never blocks the caller's
        loop either."""
        if _small(params):
            prepared = self._prepare(call_id, conversation_id, method, params)
        else:
            prepared = await asyncio.get_running_loop().run_in_executor(
                None, self._prepare, call_id, conversation_id, method, params
            )
        if not isinstance(prepared, tuple):
            return prepared
        if self._closed:
            raise LineupError("usage_invalid", "the runtime is closed", hint="open a new Runtime")
        future = asyncio.run_coroutine_threadsafe(self._core.call(*prepared), self._loop)
        msg = await asyncio.wrap_future(future)
        if msg["kind"] == "receipt":  # only a call that starts or waits can add a deadline
            self._arm()
        return msg

    def call_many(self, calls: Sequence[tuple[str, str, str, Any]]) -> list[dict[str, Any]]:
        """Accept several Agent calls `(call_id, conversation_id, method, params)` in one
        runtime turn: each is routed, in the order given, before anything they start can
        progress (so the first that starts an activation answers `starting` and the rest
        `queued`); returns their messages in that order."""

        prepared = [self._prepare(*c) for c in calls]  # the pure checks, in this thread

        async def go() -> list[dict[str, Any]]:
            # gather schedules the calls as tasks ahead of anything they spawn (FIFO loop)
            accepted = [self._core.call(*p) for p in prepared if isinstance(p, tuple)]
            answers = iter(await asyncio.gather(*accepted))
            return [next(answers) if isinstance(p, tuple) else p for p in prepared]

        msgs = self._run(go())
        if any(m["kind"] == "receipt" for m in msgs):
            self._arm()
        return msgs

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
        rows = self._call_sync(
            lambda: self._core.store.all(
                "SELECT body FROM im_records WHERE conversation_id=? ORDER BY created_ms, operation_id",
                (conversation_id,),
            )
        )
        return [json.loads(r[0]) for r in rows]

    def store_dump(self) -> dict[str, list[tuple[Any, ...]]]:
        """Every table's rows (tests and invariant checks)."""
        return self._call_sync(self._core.store.dump)

    def close(self) -> None:
        """Stop workers, close the database and release its lock."""
        if self._closed:
            return
        try:
            self._run(self._core.close())
            self._call_sync(self._core.store.close)
        finally:
            self._closed = True
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=5)
            if not self._thread.is_alive():
                self._loop.close()
            if self._tmp is not None:
                shutil.rmtree(self._tmp, ignore_errors=True)

    def __enter__(self) -> Runtime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _stamp(path: Path) -> tuple[int, int, int] | None:
    """What changes when a file is rewritten (atomically or in place)."""
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


_ENV_NAME = re.compile(r"[A-Z_][A-Z0-9_]*\Z")


def _worker_env(env: Mapping[str, str] | None) -> tuple[tuple[str, str], ...]:
    out = []
    for name, value in sorted((env or {}).items()):
        if (
            not isinstance(name, str)
            or not _ENV_NAME.match(name)
            or name.startswith(("LINEUP_", "PYTHON"))
            or not isinstance(value, str)
            or "\0" in value
        ):
            raise LineupError(
                "usage_invalid",
                f"worker_env: {str(name)[:60]!r} is not an upper-case variable name with a "
                "string value (LINEUP_* and PYTHON* are never passed to workers)",
            )
        out.append((name, value))
    return tuple(out)


def _usable_id(name: str, value: Any) -> None:
    """A conversation id or scope argument the store can look up (`usage_invalid`)."""
    why = id_problem(name, value)
    if why is not None:
        raise LineupError("usage_invalid", why)


def _small(value: Any, *, nodes: int = 256, chars: int = 16_384) -> bool:
    """Whether `value` is plainly small: at most `nodes` containers and scalars and
    `chars` characters of strings, found by a walk that stops as soon as it is not."""
    stack = [value]
    while stack:
        item = stack.pop()
        nodes -= 1
        if nodes < 0:
            return False
        if isinstance(item, str):
            chars -= len(item)
            if chars < 0:
                return False
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return True
