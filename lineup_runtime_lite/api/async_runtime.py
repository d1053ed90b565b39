"""`AsyncRuntime`: the embeddable runtime for asyncio code (SPEC 5.0), the primary API.

It runs on the caller's own event loop: a call is routed, committed and answered there, with
no thread hop (only a call with large params is checked in the default executor, so it
never blocks the loop). `Runtime` is a thin synchronous wrapper over it.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import shutil
import tempfile
import threading
import warnings
from collections.abc import Callable, Coroutine, Mapping, Sequence
from pathlib import Path
from typing import Any

from lineup_build.model import Manifest
from lineup_build.reader import Limits
from lineup_runtime_lite.api.clock import Clock, RealClock, VirtualClock, format_ts
from lineup_runtime_lite.api.engine import Engine, ainput_problems, input_problems
from lineup_runtime_lite.coordination.lifecycle import NodeLife
from lineup_runtime_lite.coordination.nodes import (
    DEFAULT_LEASE_S,
    check_lease_s,
    check_node_id,
    default_node_id,
)
from lineup_runtime_lite.core.actions import ActionEvent
from lineup_runtime_lite.core.decisions import MoveSession
from lineup_runtime_lite.core.deliveries import move_dev_sessions
from lineup_runtime_lite.core.messages import error_body, reject
from lineup_runtime_lite.core.rows import RegistryEntry
from lineup_runtime_lite.drivers.appcache import (
    check_database_file,
    prepare_apps_dir,
    read_listed,
)
from lineup_runtime_lite.drivers.install import (
    InstalledApp,
    InstallResult,
    RecordedBundle,
    check_folder,
    check_trusted,
    install_verified,
    installed_row,
    local_app,
    recorded_app,
    verify_recorded,
)
from lineup_runtime_lite.host.simulator import HostSimulator
from lineup_runtime_lite.processes.worker import WorkerOptions
from lineup_runtime_lite.store import faults
from lineup_runtime_lite.store.database import open_database
from lineup_runtime_lite.store.postgres import is_postgres_url
from lineup_runtime_lite.store.sqlite import StoreRace
from lineup_runtime_lite.validation.checks import Checked, validator_for
from lineup_runtime_lite.validation.params import (
    DEFAULT_MAX_PARAMS_BYTES,
    Envelope,
    Rejection,
    check_envelope,
    id_problem,
)
from lineup_runtime_lite.validation.pool import DEFAULT_BUDGET_S
from lineup_sdk.context import Snapshot
from lineup_sdk.errors import LineupError
from lineup_sdk.sandbox import DEFAULT_PROCESSES, sweep_leftovers

#: The Surface page of a MiniApp, bundle-relative (SPEC 14).
SURFACE_PAGE = "surface/index.html"

__all__ = [
    "DEFAULT_ISOLATION",
    "ISOLATIONS",
    "MAX_FETCH",
    "AsyncOutbox",
    "AsyncRuntime",
    "AsyncSurface",
    "check_isolation",
]

#: `Runtime.open(isolation=...)`: a worker per app version, or per App session (SPEC 13.3).
ISOLATIONS = ("app", "session")
DEFAULT_ISOLATION = "app"


def check_isolation(isolation: object) -> str:
    """Return `isolation` if it is one of `ISOLATIONS`.

    Raises:
        LineupError: `usage_invalid` for anything else.
    """
    if isolation not in ISOLATIONS:
        raise LineupError(
            "usage_invalid",
            f"isolation must be one of {', '.join(ISOLATIONS)}, not {isolation!r}",
            hint="session runs a worker per App session; app one per app version",
        )
    return str(isolation)


def _seconds(name: str, value: object, *, most: float = 10**9) -> None:
    """A `Runtime.open` option that is a number of seconds in (0, most]."""
    if isinstance(value, bool) or not (isinstance(value, int | float) and 0 < value <= most):
        raise LineupError(
            "usage_invalid", f"{name} must be a number of seconds in (0, {most:g}], not {value!r}"
        )


def _integer(name: str, value: object, least: int, most: int) -> None:
    """A `Runtime.open` option that is an integer from `least` to `most`."""
    if type(value) is not int or not least <= value <= most:
        raise LineupError(
            "usage_invalid", f"{name} must be an integer from {least} to {most}, not {value!r}"
        )


#: The bounds of `worker_processes` (a worker needs its launcher, loop and threads).
MIN_PROCESSES, MAX_PROCESSES = 16, 32768

#: The most messages one `outbox.fetch` returns.
MAX_FETCH = 1000
#: How often `install` decides again after another node's install of the same version
#: got there first (SPEC 16.1: the two converge, `installed` and `unchanged`).
_INSTALL_TRIES = 3

Prepared = tuple[Envelope, RegistryEntry | None, Checked | None]
#: What `mark_call` takes as a mark.
_MARK = re.compile(r"[a-z][a-z0-9_]{0,39}")


class AsyncRuntime:
    """The reference runtime on the caller's event loop. Create it with
    `await AsyncRuntime.open(...)`; every method runs on that loop."""

    trust: Any
    clock: Clock
    #: The Host simulator's event entry point (`await art.host.event(...)`).
    host: _AsyncHostPort
    #: The Agent channel (`await art.outbox.fetch(...)`, `await art.outbox.ack(...)`).
    outbox: AsyncOutbox
    _engine: Engine

    def __init__(self) -> None:  # use AsyncRuntime.open
        self._timer: asyncio.TimerHandle | None = None
        self._tmp: Path | None = None
        self._trust_path: Path | None = None
        self._trust_stamp: tuple[int, int, int] | None = None
        #: Recorded bundles this process verified, by (manifest sha256, trust stamp).
        self._verified: dict[tuple[str, str], RecordedBundle] = {}
        #: ... and those it refused (a bad signature, an untrusted key, no bundle).
        self._refused: dict[tuple[str, str], LineupError] = {}
        self._sandbox_mode = "best_effort"
        self._max_params_bytes = DEFAULT_MAX_PARAMS_BYTES
        self._bundle_limits = Limits()
        self._closed = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread_id = 0
        self._fired_ms = -1  # the runtime-clock time the last `tick()` fired at
        self._make_engine: Callable[[], Engine]
        #: The node's life (SPEC 15): its news to the engine, a rejoin after a lost lease.
        self._nodes: NodeLife

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
        """Open (or create) the runtime database at `path` (`:memory:` for tests).

        Args:
            path: SQLite file (one runtime per file: `runtime_locked`), `:memory:`, or
                a PostgreSQL database, `postgresql://user@host:port/db` (the `postgres`
                extra; any number of runtime nodes, each with its own `node_id`; a
                password in the URL is redacted everywhere and warned about).
            trust: A trust store path or `TrustStore`.
            clock: `RealClock()` (default) or a `VirtualClock`, whose time persists here.
            host: The Host simulator (default: `HostSimulator(policy="auto")`).
            apps_dir: Where installed apps are unpacked (default: next to the database
                file; for PostgreSQL, `$XDG_CACHE_HOME/lineup/apps/<manifest sha256>`).
                It belongs to the runtime's user (SPEC 16.1): made 0700, folders others
                may write tightened, anything of another uid or a symlink refused, every
                folder above it root's or the user's. One cache per uid: runtimes of one
                user may share it, another user's runtime needs its own.
            db_schema: PostgreSQL only: keep the tables in this schema (created when
                missing, dropped at close): `lineup run`/`test`/`dev`'s private schema.
            node_id: PostgreSQL only: this runtime's id among the nodes of the database
                (default `LINEUP_NODE_ID`, else the hostname and the apps folder); a
                second node with the same id and a live lease is `runtime_locked`.
            node_lease_s: PostgreSQL only: the node's lease, judged by the database's
                clock and renewed four times a lease; once it lapses, another node takes
                this one's App sessions over (SPEC 15).
            activation_timeout_s: Runtime-clock seconds before a starting activation fails.
            max_params_bytes: The largest Agent params accepted, in bytes of canonical
                JSON (`params_too_large` above it).
            sandbox: `best_effort` (contain workers as far as the platform allows, and
                report it in `sandbox`), `required` (refuse to start a worker without
                file, network and process-tree containment: `sandbox_unavailable`) or
                `off` (debugging only).
            worker_memory_mb: Memory cap of each worker: over its whole process tree
                where the runtime can create a memory cgroup, else per process (`sandbox`
                says which).
            worker_processes: Cap on the tasks (processes and threads) of each worker's
                tree: a pids cgroup, else the fallbacks `sandbox` names (16 to 32768).
            worker_heartbeat_s: A worker whose loop does not answer a heartbeat this long
                is recycled (real time).
            worker_cpu_s: CPU-seconds a worker's whole process tree may use between
                recycles; past it the worker is recycled and what it was running ends
                `delivery_interrupted` with `details.reason = "cpu_limit"`.
            worker_log_max_bytes: Each worker log is truncated, with a note, past this size.
            worker_env: Extra environment variables for every worker (configuration an
                operator chooses to give MiniApps; nothing of this process's environment
                reaches a worker otherwise). Names are upper-case identifiers, never
                `LINEUP_*` or `PYTHON*`.
            validation_budget_s: Real time one value (params or a result) may take in a
                validator process when its schema is not plain; over it the call answers
                `invalid_params` / `handler_result_invalid` with `details.reason =
                "validation_budget"` (SPEC 13.3).
            isolation: `app` (one worker serves every conversation of an app version) or
                `session` (a worker per App session: code serving one conversation never
                shares a process with another's; SPEC 13.3).
            session_idle_s: Under `session`, a session's worker idle this long (real
                time) is recycled; its next delivery starts a new one.
            workers_memory_mb: Under `session`, one memory cap over all workers of this
                runtime together, where a memory cgroup can be made (`sandbox` says).
            bundle_limits: The limits `install` verifies bundles within (default
                `Limits()`: manifest 4 MiB, 10,000 files, 256 MiB of files), e.g.
                `Limits(max_manifest_bytes=8 << 20)` for an app of many tools.

        Raises:
            LineupError: `usage_invalid` for a bad option, `trust_store_invalid`,
                `runtime_locked`, `store_corrupt`, `store_unavailable`,
                `store_schema_unsupported`, `install_tampered` (the apps folder, or a
                folder above it, is another user's or others may write it).
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
        _seconds("activation_timeout_s", activation_timeout_s)
        check_mode(sandbox)
        _seconds("worker_cpu_s", worker_cpu_s)
        if worker_memory_mb < 64 or worker_heartbeat_s <= 0 or worker_log_max_bytes < 0:
            raise LineupError(
                "usage_invalid",
                "worker_memory_mb must be at least 64, worker_heartbeat_s positive and "
                "worker_log_max_bytes not negative",
            )
        _integer("worker_processes", worker_processes, MIN_PROCESSES, MAX_PROCESSES)
        if bundle_limits is not None and not isinstance(bundle_limits, Limits):
            raise LineupError(
                "usage_invalid",
                f"bundle_limits must be a lineup_build.Limits, not {bundle_limits!r}",
            )
        _seconds("validation_budget_s", validation_budget_s, most=3600)
        check_isolation(isolation)
        _seconds("session_idle_s", session_idle_s)
        _integer("workers_memory_mb", workers_memory_mb, worker_memory_mb, 1 << 30)
        extra_env = _worker_env(worker_env)
        # every path is resolved against the working folder once, here (SPEC 13.1): no
        # worker, sandbox or later chdir resolves a relative one again
        postgres = is_postgres_url(path)
        in_memory = str(path) == ":memory:"
        db_path: str | Path = path if in_memory or postgres else _absolute(path)
        if db_schema is not None and not postgres:
            raise LineupError("usage_invalid", "db_schema is for a postgresql:// database")
        if node_id is None:
            node_id = os.environ.get("LINEUP_NODE_ID") or None
        if node_id is not None:
            check_node_id(node_id)
        lease_s = check_lease_s(node_lease_s)
        rt = cls()
        rt._loop = asyncio.get_running_loop()
        rt._thread_id = threading.get_ident()
        rt._max_params_bytes = max_params_bytes
        rt._bundle_limits = bundle_limits or Limits()
        if isinstance(trust, TrustStore):
            rt.trust = trust
        else:
            rt._trust_path = _absolute(trust)
            rt._trust_stamp = _stamp(rt._trust_path)
            rt.trust = TrustStore.load(rt._trust_path)
        rt._sandbox_mode = sandbox
        rt.clock = clock or RealClock()
        sweep_leftovers()  # cgroups and sandbox folders of runtimes killed before they closed
        if in_memory and apps_dir is None:
            rt._tmp = Path(tempfile.mkdtemp(prefix="lineup-rt-"))
            apps = rt._tmp
        elif apps_dir:
            apps = _absolute(apps_dir)
        elif postgres:
            apps = _cache_apps()
        else:
            apps = Path(str(db_path) + ".apps")
        try:
            store = open_database(
                db_path, schema=db_schema, node_id=node_id or default_node_id(apps), lease_s=lease_s
            )
        except BaseException:
            if rt._tmp is not None:
                shutil.rmtree(rt._tmp, ignore_errors=True)
            raise
        try:
            if not (in_memory or postgres):  # its rows name the code to run (SPEC 16.1)
                check_database_file(Path(db_path))
            try:  # 0700, the runtime user's own, its ancestors safe (SPEC 16.1)
                prepare_apps_dir(apps)
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
            rt.host = _AsyncHostPort(rt, sim)
            rt.outbox = AsyncOutbox(rt)
            options = WorkerOptions(
                sandbox=sandbox,
                memory_mb=worker_memory_mb,
                processes=worker_processes,
                heartbeat_s=worker_heartbeat_s,
                cpu_s=float(worker_cpu_s),
                log_max_bytes=worker_log_max_bytes,
                env=extra_env,
                isolation=isolation,
                session_idle_s=float(session_idle_s),
            )

            def engine() -> Engine:
                made = Engine(
                    store,
                    rt.clock,
                    apps,
                    apps / "_logs",
                    activation_timeout_s=activation_timeout_s,
                    host_intent=sim.on_intent,
                    check_app=rt._check_app,
                    check_trust=rt._check_trust,
                    worker_options=options,
                    validation_budget_s=float(validation_budget_s),
                    workers_memory_mb=workers_memory_mb if isolation == "session" else None,
                    model_of=rt._model_of if store.keeps_bundles else None,
                    verify_ahead=rt._verify_ahead,
                )
                sim.bind(made.host_event)
                return made

            rt._make_engine = engine
            rt._engine = engine()
            await rt._engine.refresh_registry()
            await rt._engine.recover()
            await rt.settle()
            rt._nodes = NodeLife(
                store.coordination,
                rt._loop,
                engine=lambda: rt._engine,
                restart=rt._restart,
                rejoined=rt._arm,
                shown=store.path,
            ).join()
            rt.clock.on_advance(rt._advanced)
        except BaseException:
            try:
                if hasattr(rt, "_engine"):
                    await rt._engine.close()
            finally:  # the lock goes whatever stopping the workers did
                store.close()
                if rt._tmp is not None:
                    shutil.rmtree(rt._tmp, ignore_errors=True)
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
        """Arm the real-clock timer for the next deadline (on the loop)."""
        if self.clock.virtual or self._closed:
            return
        if self._timer is not None:
            self._timer.cancel()
        due = self._engine.next_deadline()
        if due is None:
            return
        delay = max(0.0, (due - self.clock.now_ms()) / 1000)
        assert self._loop is not None
        self._timer = self._loop.call_later(delay, lambda: self._engine.spawn(self._fire()))

    async def _fire(self) -> None:
        try:
            await self._engine.tick()
        finally:  # a failed tick leaves its facts due; the next timer fires them
            self._arm()

    async def _advance_to(self, now_ms: int) -> None:
        """The virtual clock moved: persist its time, then fire what fell due."""
        self._engine.store.set_meta("virtual_now_ms", str(now_ms))
        await self._engine.tick()

    def _advanced(self, now_ms: int) -> None:
        """The virtual clock moved (`advance()` on this loop, or from another thread):
        schedule the tick; `await settle()` waits for it."""
        loop = self._loop
        assert loop is not None
        if self._closed or now_ms <= self._fired_ms:  # closed, or `tick()` fired it already
            return
        if threading.get_ident() == self._thread_id:
            self._engine.spawn(self._advance_to(now_ms))
        else:
            loop.call_soon_threadsafe(lambda: self._engine.spawn(self._advance_to(now_ms)))

    def _current_trust(self) -> Any:
        """The trust store, re-read when its file changed since it was last read."""
        if self._trust_path is not None:
            stamp = _stamp(self._trust_path)
            if stamp != self._trust_stamp:
                from lineup_build.trust import TrustStore

                self.trust = TrustStore.load(self._trust_path)
                self._trust_stamp = stamp
        return self.trust

    def _trust_key(self) -> tuple[Any, str]:
        """The trust store now and its fingerprint (a store given as an object may have
        changed in place)."""
        trust = self._current_trust()
        return trust, _trust_fingerprint(trust)

    def _recorded(
        self, scope: str, version: str, trust: Any, fingerprint: str, *, unpack: bool
    ) -> tuple[InstalledApp | None, Callable[[], RecordedBundle]]:
        """An installed version of a store that keeps bundles (PostgreSQL) as this node
        verified it: the app when this process verified its recorded bundle with this
        trust store already (the row compared again; with `unpack`, not when its folder
        was removed since), else None and the blocking verification to run.

        Raises:
            LineupError: the cached refusal of its bundle; `UntrustedRecord` when the row
                disagrees with the verified bundle.
        """
        engine = self._engine
        row = installed_row(engine.store, scope, version)
        key = (str(row["manifest_sha256"]), fingerprint)
        refused = self._refused.get(key)
        if refused is not None:
            raise refused
        bundle = self._verified.get(key)
        if bundle is not None:  # verified in this process: the row must still agree
            app = recorded_app(engine.apps_dir, bundle, row, scope, version)
            if not unpack or os.path.lexists(app.root):
                return app, lambda: bundle
        data = engine.store.load_bundle(key[0])  # the bytes read here, by the store's reader

        def verify() -> RecordedBundle:
            def keep(done: RecordedBundle) -> None:
                self._verified[(done.digest, fingerprint)] = done

            try:
                return verify_recorded(
                    data,
                    engine.apps_dir,
                    trust,
                    row,
                    scope,
                    version,
                    keep,
                    limits=self._bundle_limits,
                )
            except LineupError as exc:
                if exc.code != "install_tampered":  # the bundle's own verdict, kept
                    self._refused[key] = exc  # until it is installed again
                raise

        return None, verify

    def _model_of(self, scope: str, version: str) -> Manifest:
        """The manifest an installed version's tools come from on a store that keeps
        bundles: the one verified from its recorded bundle (SPEC 16.1), never the row's.
        Verified ahead off the loop (`_verify_ahead`); a version that was not (one a
        session pins, no longer current) is verified here once, in the caller's thread.

        Raises:
            LineupError: the record is not what the signer signed.
        """
        trust, fingerprint = self._trust_key()
        app, verify = self._recorded(scope, version, trust, fingerprint, unpack=False)
        if app is not None:
            return app.model
        bundle = verify()
        return recorded_app(
            self._engine.apps_dir,
            bundle,
            installed_row(self._engine.store, scope, version),
            scope,
            version,
        ).model

    async def _verify_ahead(self, versions: list[tuple[str, str]]) -> None:
        """Verify, off the loop, the recorded bundles of `versions` this process has not
        (a store that keeps bundles); a refusal is kept for the Registry to report."""
        if not self._engine.store.keeps_bundles:
            return
        trust, fingerprint = self._trust_key()
        for scope, version in versions:
            try:
                app, verify = self._recorded(scope, version, trust, fingerprint, unpack=False)
                if app is None:
                    await asyncio.to_thread(verify)
            except (LineupError, KeyError):
                continue  # `load_registry` meets it again and lists the version untrusted

    async def _installed(self, scope: str, version: str) -> tuple[InstalledApp, Any]:
        """An installed version as this node may run it, and the trust store it was
        checked with. On a store that keeps bundles (PostgreSQL) the database is untrusted
        input (SPEC 16.1): the recorded bundle is verified with this node's trust store —
        once per process per (manifest sha256, trust-store stamp), off the event loop —
        and the row must agree with it; the folder is `<apps_dir>/<manifest sha256>`.
        The one place that names an installed version's folder, on either store.

        Raises:
            LineupError: the verification's code, `UntrustedRecord`, or the key's
                (`key_revoked`, `untrusted_key`, `scope_not_allowed`, ...).
        """
        engine = self._engine
        store = engine.store
        if not store.keeps_bundles:
            trust = self._current_trust()
            app = local_app(store, engine.apps_dir, scope, version)
        else:
            trust, fingerprint = self._trust_key()
            found, verify = self._recorded(scope, version, trust, fingerprint, unpack=True)
            if found is None:  # checked off the loop
                bundle = await asyncio.to_thread(verify)
                row = installed_row(store, scope, version)
                found = recorded_app(engine.apps_dir, bundle, row, scope, version)
            app = found
        check_trusted(app, trust)
        return app, trust

    async def _check_app(self, scope: str, version: str) -> InstalledApp:
        """Before a worker starts: the app as `_installed` gives it, its folder holding
        exactly the manifest's files (hashes too), the runtime user's own."""
        app, _ = await self._installed(scope, version)
        check_folder(app, self._engine.apps_dir)
        return app

    async def _check_trust(self, scope: str, version: str) -> None:
        """At every activation: the key still trusted for the app, nothing planted."""
        app, _ = await self._installed(scope, version)
        check_folder(app, self._engine.apps_dir, hashes=False)

    def worker_log(self, scope: str, version: str) -> Path:
        """The worker log of an installed app version (where its stdout, stderr and the
        traceback of a failed start go; it exists once a worker has started).

        Raises:
            LineupError: `usage_invalid` when `scope` has no installed `version`.
        """
        _usable_id("scope", scope)
        self._check_open()
        if not isinstance(version, str) or self._engine.facts.version_row(scope, version) is None:
            raise LineupError(
                "usage_invalid",
                f"{scope!r} has no installed version {version!r}",
                hint="rt.apps() lists the installed scopes and versions",
            )
        return self._engine.pool.log_path(scope, version)

    @property
    def sandbox(self) -> dict[str, Any]:
        """What the sandbox enforces for workers here: `files`, `network`, `privileges`,
        `process_tree`, `memory`, `tmp` (each a description, or None when not enforced),
        `mode`, and `refused` (why `required` would refuse to start a worker, or None)."""
        from lineup_sdk.sandbox import probe

        report = self._engine.sandbox_report
        return dict(report) if report is not None else probe(self._sandbox_mode)

    @property
    def logs_dir(self) -> Path:
        """Where the worker logs are written (one file per app version)."""
        return self._engine.logs_dir

    # -- apps ----------------------------------------------------------------------------
    def _install_verified(self, verified: Any, dev_build: bool) -> InstallResult:
        self._check_open()
        for attempt in range(_INSTALL_TRIES):
            try:
                result = install_verified(
                    self._engine.store,
                    self._engine.apps_dir,
                    verified,
                    self.clock.now_ms(),
                    dev_build=dev_build,
                )
                break
            except StoreRace:  # another node installed it first: decide again on its facts
                if attempt == _INSTALL_TRIES - 1:
                    raise
        self._refused.clear()  # what was refused may be recorded again, verified
        return result

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
        from lineup_build.verify import verify_bundle

        self._check_open()
        trust = self._current_trust()
        limits = self._bundle_limits
        verified = await asyncio.get_running_loop().run_in_executor(
            None, lambda: verify_bundle(Path(bundle), trust, limits=limits)
        )
        result = self._install_verified(verified, dev_build)
        await self._engine.refresh_registry()
        return result

    async def apps(self) -> list[dict[str, Any]]:
        """Installed apps: scope, current version, key id, manifest hash, permissions, and
        `trusted`. On a store that keeps bundles (PostgreSQL) these come from the bundle
        this node verified (SPEC 16.1); a version whose record is not what its signer
        signed is `trusted: False` with the `problem` (`code`, `message`) and lists no
        tools."""
        self._check_open()
        engine = self._engine
        await engine.refresh_registry()  # what is not verified yet, off this loop
        out = []
        for app in engine.facts.app_rows():
            del app["manifest"]
            try:
                manifest = engine.model_of(app["scope"], app["version"])
            except LineupError as exc:
                app["permissions"] = []
                app["trusted"] = False
                app["problem"] = {"code": exc.code, "message": exc.message}
                out.append(app)
                continue
            except KeyError:  # uninstalled meanwhile
                continue
            app["permissions"] = list(manifest.app.permissions)
            app["trusted"] = True
            out.append(app)
        return out

    async def surface_document(self, scope: str, version: str) -> bytes | None:
        """The Surface document of an installed version, as signed: the one self-contained
        document `lineup build` wrote (the manifest's `surface` object), checked against its
        sha256 (so what a host renders is what the signer signed); None when that version
        has no Surface (SPEC 18.1, 18.2).

        Raises:
            LineupError: `install_tampered` when the file differs from its manifest entry;
                the trust codes of `_installed`.
        """
        _usable_id("scope", scope)
        self._check_open()
        app, _ = await self._installed(scope, version)
        surface = app.model.surface
        if surface is None:
            return None
        try:
            data = await asyncio.to_thread((app.root / surface.document).read_bytes)
        except OSError:
            data = b""
        if hashlib.sha256(data).hexdigest() != surface.sha256 or len(data) != surface.size:
            raise LineupError(
                "install_tampered",
                f"{scope} {version}: {surface.document} differs from its signed manifest entry",
                hint="install the bundle again",
            )
        return data

    async def surface_csp(self, scope: str, version: str) -> dict[str, list[str]] | None:
        """The `csp` an installed version's manifest declares for its Surface document, as
        MCP Apps' `_meta.ui.csp` spells it (`connectDomains`, `resourceDomains`; `{}` when
        `[app.surface]` declares none); None without a Surface (SPEC 18.2).

        Raises:
            LineupError: the trust codes of `_installed`.
        """
        _usable_id("scope", scope)
        self._check_open()
        app, _ = await self._installed(scope, version)
        surface = app.model.surface
        return surface.csp_json() if surface is not None else None

    async def uninstall(self, scope: str) -> None:
        """Remove a scope from the Registry (its sessions' history stays in the database)."""
        _usable_id("scope", scope)
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
            _usable_id("scope", scope)
        self._check_open()
        facts = self._engine.facts
        out = []
        for s in facts.sessions_of(scope):
            act = facts.current_activation(s.app_session_id)
            out.append(
                {
                    "app_session_id": s.app_session_id,
                    "conversation_id": s.conversation_id,
                    "scope": s.scope,
                    "version": s.version,
                    "instance": act.activation_id if act is not None else None,
                    "state": act.state if act is not None else None,
                    "waiting_for": _waiting_for(act),
                }
            )
        return out

    async def kill_workers(self, scope: str) -> int:
        """A fault, for simulations and tests (the `crash_worker` scenario step): kill the
        running workers of an app scope now, as a crash would — what they were running ends
        `delivery_interrupted`, the next delivery starts a new worker. Returns how many."""
        _usable_id("scope", scope)
        self._check_open()
        engine = self._engine
        doomed = [w for key, w in list(engine.workers.items()) if key[0] == scope]
        for worker in doomed:
            await worker.kill()
        return len(doomed)

    async def move_dev_sessions(self, scope: str) -> int:
        """Move every session pinned to an older dev build of `scope` to its current
        version, when that is a dev build too (`lineup dev` after a rebuild, SPEC 14; the
        one exception to SPEC 5.2's pinning). Calls delivered to the old build end
        `delivery_interrupted`, session data is kept, and the next call runs the new code.
        Returns how many sessions moved.

        Raises:
            LineupError: `usage_invalid` for a bad scope or one that is not installed.
        """
        _usable_id("scope", scope)
        self._check_open()
        engine = self._engine
        current = engine.facts.app_version(scope)
        if current is None:
            raise LineupError("usage_invalid", f"{scope!r} is not installed")
        dev = engine.facts.dev_builds(scope)
        if current not in dev:
            return 0
        now = engine.now()

        def step(tx: Any) -> Any:
            sessions = tx.sessions_of(scope)
            # a call or a UI Action delivered to the old build ends `delivery_interrupted`
            delivered = {s.app_session_id: tx.delivered_in(s.app_session_id) for s in sessions}
            return move_dev_sessions(sessions, delivered, tx.dev_builds(scope), current, now)

        old = {s.version for s in engine.facts.sessions_of(scope)} - {current}
        decision = await engine.decide(step)
        if decision is None:
            return 0
        for version in old & dev:  # its in-flight deliveries already ended: stop it
            worker = engine.workers.get((scope, version))
            if worker is not None:
                await worker.kill()
        await self.settle()
        return sum(1 for c in decision.changes if isinstance(c, MoveSession))

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
        _usable_id("scope", scope)
        self._check_open()
        try:
            app, _ = await self._installed(scope, version)
        except KeyError:
            return None
        entry = next((e for e in app.model.files if e.path == path), None)
        if entry is None:
            return None
        return await asyncio.to_thread(
            read_listed, app.label, app.root, entry.path, entry.size, entry.sha256
        )

    async def inventory(self) -> list[dict[str, Any]]:
        """The Agent Inventory: every installed tool without delivery internals."""
        self._check_open()
        return [t.inventory() for t in sorted(self._engine.registry.values(), key=_method)]

    # -- calls ---------------------------------------------------------------------------
    def _prepare(
        self, call_id: Any, conversation_id: Any, method: Any, params: Any, pooled: bool = True
    ) -> dict[str, Any] | Prepared:
        """The pure part of a call (any thread): the envelope and the input schema.
        Returns the rejection to answer, or what the engine needs to go on. With `pooled`
        False, an input schema that is not plain is left unchecked (problems None) for the
        caller to await from the validator pool."""
        self._check_open()
        checked = check_envelope(
            call_id, conversation_id, method, params, max_bytes=self._max_params_bytes
        )
        registry = self._engine.registry  # swapped whole, never edited in place
        if isinstance(checked, Rejection):
            tool = registry.get(method) if type(method) is str else None
            scope = tool.scope if tool else method.split(".")[0] if type(method) is str else ""
            body = error_body(checked.code, checked.message, details=checked.details)
            return reject(checked.call_id, scope, self.clock.now_ms(), body)
        tool = registry.get(checked.method)
        problems = (
            input_problems(tool, checked.params, self._engine.validators)
            if tool is not None and (pooled or validator_for(tool.input_schema).plain)
            else None
        )
        return checked, tool, problems

    def _inline(self, method: Any, params: Any) -> bool:
        """Whether a call may be checked on the caller's loop: plainly small params and an
        input schema that is plain (any other waits for a validator process)."""
        if not _small(params):
            return False
        tool = self._engine.registry.get(method) if type(method) is str else None
        return tool is None or validator_for(tool.input_schema).plain

    async def _accept(self, prepared: Prepared) -> dict[str, Any]:
        self._check_open()
        msg = await self._engine.call(*prepared)
        if msg["kind"] == "receipt":  # only a call that starts or waits can add a deadline
            self._arm()
        return msg

    async def call(
        self, call_id: Any, conversation_id: Any, method: Any, params: Any
    ) -> dict[str, Any]:
        """Send one Agent call; returns the AgentMessage for this step (SPEC 5.0).

        Small params (a bounded walk says so) against a plain input schema are checked
        right here; larger ones, and any schema that is not plain, in the default executor,
        so neither a huge call nor an expensive schema blocks this loop.

        Raises:
            LineupError: `store_unavailable` or `store_corrupt` (nothing was persisted or
                sent; the same call may be retried), `usage_invalid` once closed. Every
                problem with the call itself is an `error` message, not an exception.
        """
        if self._inline(method, params):
            prepared = self._prepare(call_id, conversation_id, method, params)
        else:
            # the envelope (and a plain schema) off this loop; a schema that is not plain
            # waits its app's turn in the validator pool, holding no thread (SPEC 16.4)
            prepared = await asyncio.get_running_loop().run_in_executor(
                None, self._prepare, call_id, conversation_id, method, params, False
            )
            if isinstance(prepared, tuple) and prepared[1] is not None and prepared[2] is None:
                env, tool, _ = prepared
                assert tool is not None
                problems = await ainput_problems(tool, env.params, self._engine.validators)
                prepared = (env, tool, problems)
        if not isinstance(prepared, tuple):
            return prepared
        return await self._accept(prepared)

    async def _accept_many(self, prepared: list[dict[str, Any] | Prepared]) -> list[dict[str, Any]]:
        self._check_open()
        # gather schedules the calls as tasks ahead of anything they spawn (FIFO loop), and
        # their acceptances share one group commit, in the order given
        accepted = [self._engine.call(*p) for p in prepared if isinstance(p, tuple)]
        answers = iter(await asyncio.gather(*accepted))
        msgs = [next(answers) if isinstance(p, tuple) else p for p in prepared]
        if any(m["kind"] == "receipt" for m in msgs):
            self._arm()
        return msgs

    async def call_many(self, calls: Sequence[tuple[str, str, str, Any]]) -> list[dict[str, Any]]:
        """Accept several Agent calls `(call_id, conversation_id, method, params)` in one
        runtime turn: each is routed, in the order given, before anything they start can
        progress (so the first that starts an activation answers `starting` and the rest
        `queued`); returns their messages in that order."""
        if all(self._inline(c[2], c[3]) for c in calls):
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
        facts = self._engine.facts
        found = facts.call_summary(call_id)
        if found is None:
            return None
        return {
            "call_id": call_id,
            "method": found[0],
            "conversation_id": found[1],
            "messages": facts.messages(call_id),
        }

    async def mark_call(self, call_id: str, mark: str) -> None:
        """Keep `mark` with an accepted call, in the state beside it (an embedder's note
        that survives restarts: `lineup serve` marks the calls that created MCP tasks).

        Raises:
            LineupError: `usage_invalid` for a mark that is not a short snake_case name or a
                call_id the runtime never accepted.
        """
        self._check_open()
        if not _MARK.fullmatch(mark):
            raise LineupError("usage_invalid", f"a call mark must match {_MARK.pattern}")
        if self._engine.facts.call_summary(call_id) is None:
            raise LineupError("usage_invalid", f"no accepted call {call_id!r} to mark")
        with self._engine.store.transaction():
            self._engine.facts.set_meta(f"call_mark:{mark}:{call_id}", "1")

    async def call_marked(self, call_id: str, mark: str) -> bool:
        """Whether `mark_call(call_id, mark)` was done (in this or an earlier process)."""
        self._check_open()
        return self._engine.facts.meta_value(f"call_mark:{mark}:{call_id}") is not None

    async def marked_calls(self, mark: str) -> list[str]:
        """The call_ids `mark_call` marked with `mark`, in no particular order."""
        self._check_open()
        return self._engine.facts.meta_keys(f"call_mark:{mark}:")

    async def app_session(self, conversation_id: str, scope: str) -> dict[str, Any] | None:
        """A conversation's App session for an app scope (`app_session_id`, `version` it is
        pinned to), or None before any call of that conversation reached the app."""
        _usable_id("conversation_id", conversation_id)
        _usable_id("scope", scope)
        self._check_open()
        session, _ = self._engine.facts.session_and_activation(conversation_id, scope)
        if session is None:
            return None
        return {"app_session_id": session.app_session_id, "version": session.version}

    async def surface_view_key(self) -> bytes:
        """The 32 random bytes `lineup serve` signs Surface `view` capabilities with (SPEC
        18.2): kept in the store's meta table, created at first use by whichever node asks
        first (an insert that never overwrites, then a read), the same on every node."""
        self._check_open()
        facts = self._engine.facts
        value = facts.meta_value(_VIEW_KEY)
        if value is None:
            with self._engine.store.transaction():
                facts.add_meta(_VIEW_KEY, os.urandom(32).hex())
            value = facts.meta_value(_VIEW_KEY)
        assert value is not None
        return bytes.fromhex(value)

    async def settle(self) -> None:
        """Wait until background work (activations, deliveries) and Surface listeners
        have settled (a listener may start more work)."""
        self._check_open()
        loop = asyncio.get_running_loop()
        await asyncio.sleep(0)  # what other threads scheduled on this loop starts first
        while True:
            await self._engine.idle()
            pending = self._engine.subs.pending()
            if not pending:
                break
            for sub in pending:
                await loop.run_in_executor(None, sub.wait)
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
            self._fired_ms = max(self._fired_ms, now)
        finally:  # a failed tick leaves its facts due; the next timer fires them
            self._arm()

    # -- the Host, the Agent channel, the Surface ------------------------------------------
    def _instance_for(self, conversation: str, scope: str) -> str:
        inst = self.host.simulator.instance_for(conversation, scope)
        if inst is not None:
            return inst
        _, act = self._engine.facts.session_and_activation(conversation, scope)
        if act is None:
            raise LineupError(
                "usage_invalid",
                f"no instance to address: conversation {conversation!r} has started no "
                f"instance of {scope!r}",
                hint="send the Host event after a call that starts the app (its answer "
                "is `accepted` with `activation: starting`), or pass instance=",
            )
        return act.activation_id

    def surface(self, conversation_id: str, scope: str) -> AsyncSurface:
        """The Surface's read-only view for a conversation and app scope.

        Raises:
            LineupError: `usage_invalid` unless both are strings of 1–200 characters
                without control characters.
        """
        _usable_id("conversation_id", conversation_id)
        _usable_id("scope", scope)
        return AsyncSurface(self, conversation_id, scope)

    def _subscribe(
        self, conversation_id: str, scope: str, listener: Callable[[str, Snapshot], None]
    ) -> tuple[int, Any]:
        self._check_open()
        engine = self._engine
        key = (scope, conversation_id)
        token = engine.subs.add(key, listener, engine.surface_get(conversation_id, scope))
        return token, engine.subs.subscription(key, token)

    def _unsubscribe(self, conversation_id: str, scope: str, token: int) -> None:
        if not self._closed:  # a closed runtime holds no listeners any more
            self._engine.subs.remove((scope, conversation_id), token)

    # -- deprecated spellings (one release): SPEC 5.0's shape is `outbox`, `host`, `surface`
    @property
    def simulator(self) -> HostSimulator:
        """Deprecated: `host.simulator`."""
        _deprecated("simulator", "host.simulator")
        return self.host.simulator

    def host_event(
        self, event: str, *, conversation: str, scope: str, instance: str | None = None
    ) -> Coroutine[Any, Any, bool]:
        """Deprecated: `await host.event(...)`."""
        _deprecated("host_event(...)", "host.event(...)")
        return self.host.event(event, conversation=conversation, scope=scope, instance=instance)

    def outbox_fetch(self, limit: int = 100) -> Coroutine[Any, Any, list[dict[str, Any]]]:
        """Deprecated: `await outbox.fetch(limit)`."""
        _deprecated("outbox_fetch(limit)", "outbox.fetch(limit)")
        return self.outbox.fetch(limit)

    def outbox_ack(self, ids: list[str]) -> Coroutine[Any, Any, None]:
        """Deprecated: `await outbox.ack(ids)`."""
        _deprecated("outbox_ack(ids)", "outbox.ack(ids)")
        return self.outbox.ack(ids)

    def outbox_all(self) -> Coroutine[Any, Any, list[dict[str, Any]]]:
        """Deprecated: `await outbox.all()`."""
        _deprecated("outbox_all()", "outbox.all()")
        return self.outbox.all()

    def surface_get(self, conversation_id: str, scope: str) -> Coroutine[Any, Any, Snapshot]:
        """Deprecated: `await surface(conversation_id, scope).get()`."""
        _deprecated("surface_get(conversation_id, scope)", "surface(conversation_id, scope).get()")
        return self.surface(conversation_id, scope).get()

    def subscribe(
        self, conversation_id: str, scope: str, listener: Callable[[str, Snapshot], None]
    ) -> Coroutine[Any, Any, Callable[[], None]]:
        """Deprecated: `await surface(conversation_id, scope).subscribe(listener)`."""
        _deprecated(
            "subscribe(conversation_id, scope, listener)",
            "surface(conversation_id, scope).subscribe(listener)",
        )
        return self.surface(conversation_id, scope).subscribe(listener)

    def operations(
        self, conversation_id: str, scope: str
    ) -> Coroutine[Any, Any, list[dict[str, Any]]]:
        """Deprecated: `await surface(conversation_id, scope).operations()`."""
        _deprecated(
            "operations(conversation_id, scope)", "surface(conversation_id, scope).operations()"
        )
        return self.surface(conversation_id, scope).operations()

    async def im_records(self, conversation_id: str) -> list[dict[str, Any]]:
        """The immutable IM records written for a conversation, oldest first."""
        _usable_id("conversation_id", conversation_id)
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
            if self._timer is not None:
                self._timer.cancel()
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


class AsyncOutbox:
    """`art.outbox`: the Agent channel, at least once (unacked items are fetched again)."""

    def __init__(self, rt: AsyncRuntime) -> None:
        self._rt = rt

    async def fetch(self, limit: int = 100) -> list[dict[str, Any]]:
        """Up to `limit` (1–1000) unacknowledged messages, oldest first.

        Raises:
            LineupError: `usage_invalid` for a limit outside 1–1000.
        """
        _check_limit(limit)
        self._rt._check_open()
        faults.hit("outbox.fetch")
        return self._rt._engine.facts.outbox_pending(limit)

    async def ack(self, ids: list[str]) -> None:
        """Mark messages (by their `id`) as received.

        Raises:
            LineupError: `usage_invalid` unless `ids` is a list of strings.
        """
        _check_ids(ids)
        self._rt._check_open()
        faults.hit("outbox.ack")
        engine = self._rt._engine
        with engine.store.transaction(fault_points=False):
            engine.facts.ack(list(ids))

    async def all(self) -> list[dict[str, Any]]:
        """Every message ever written, acked or not (timelines and tests)."""
        self._rt._check_open()
        return self._rt._engine.facts.outbox_all()


class _AsyncHostPort:
    """`art.host`: the Host simulator's event entry point."""

    def __init__(self, rt: AsyncRuntime, sim: HostSimulator) -> None:
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
        _usable_id("conversation", conversation)
        _usable_id("scope", scope)
        if event not in EVENTS:
            raise LineupError(
                "usage_invalid",
                f"unknown Host event {str(event)[:60]!r}",
                hint=f"one of: {', '.join(EVENTS)}",
            )
        if instance is not None:
            _usable_id("instance", instance)
        inst = instance or rt._instance_for(conversation, scope)
        applied = await self.simulator.send(event, inst, conversation, scope)
        await rt.settle()
        return applied


class AsyncSurface:
    """`art.surface(conversation_id, scope)`: the Surface's read-only view of one
    conversation's App session for a scope."""

    conversation_id: str
    scope: str

    def __init__(self, rt: AsyncRuntime, conversation_id: str, scope: str) -> None:
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
        token, sub = rt._subscribe(conv, scope, listener)
        await asyncio.get_running_loop().run_in_executor(None, sub.wait)
        return lambda: rt._unsubscribe(conv, scope, token)

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
    ) -> dict[str, Any]:
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
        return await rt._engine.act(ev, value, timeout=timeout)

    async def submit(
        self,
        name: Any,
        params: Any,
        *,
        client_id: Any,
        seq: Any,
        timeout: float | None = None,
    ) -> tuple[dict[str, Any], asyncio.Future[dict[str, Any]]]:
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
            rt._engine.act(ev, value, timeout=timeout, accepted=on_accepted)
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


#: The meta key of the Surface view signing key (SPEC 18.2).
_VIEW_KEY = "surface_view_key"
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


def _deprecated(old: str, new: str) -> None:
    warnings.warn(
        f"AsyncRuntime.{old} is deprecated and goes in the next release; use {new}",
        DeprecationWarning,
        stacklevel=3,
    )


def _method(tool: RegistryEntry) -> str:
    return tool.method


def _check_limit(limit: Any) -> None:
    if type(limit) is not int or not 1 <= limit <= MAX_FETCH:
        raise LineupError(
            "usage_invalid",
            f"outbox.fetch(limit) takes an integer from 1 to {MAX_FETCH}, not {limit!r}",
        )


def _check_ids(ids: Any) -> None:
    if not isinstance(ids, list | tuple) or not all(type(i) is str for i in ids):
        raise LineupError("usage_invalid", "outbox.ack(ids) takes a list of message ids")


def _cache_apps() -> Path:
    """The apps cache of a PostgreSQL store on this machine: `$XDG_CACHE_HOME/lineup/apps`
    (`~/.cache/lineup/apps`), one folder per manifest hash, shared by every database."""
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    cache = Path(xdg) if os.path.isabs(xdg) else Path.home() / ".cache"
    return cache / "lineup" / "apps"


def _absolute(path: str | os.PathLike[str]) -> Path:
    """`path` against today's working folder, normalised (`..` folded, links kept)."""
    return Path(os.path.abspath(path))


def _trust_fingerprint(trust: Any) -> str:
    """What changes when a trust store's keys, scopes, permissions or revocations do."""
    return hashlib.sha256(trust.dumps().encode("utf-8")).hexdigest()


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


def _waiting_for(act: Any) -> str | None:
    """What a starting activation still waits for: the Host's foreground, or its worker."""
    if act is None or act.state != "starting":
        return None
    if act.requires_foreground and not act.foreground:
        return "foreground"
    return None if act.worker_ready else "worker"
