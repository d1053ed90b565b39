"""The runtime's composition root: from checked `RuntimeOptions` to its parts — the trust
store and installed apps, the clock, the apps folder, the store (with its node role on
PostgreSQL), the Host simulator and the `Engine` (STYLE 25).

`AsyncRuntime.open` (so `Runtime.open`, the CLI and `testing`) goes through `assemble` and
nothing else builds an `Engine` for a runtime.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from lineup_build.reader import Limits
from lineup_runtime_lite.api.clock import Clock, RealClock, VirtualClock
from lineup_runtime_lite.api.engine import Engine
from lineup_runtime_lite.api.options import RuntimeOptions
from lineup_runtime_lite.api.trusted_apps import TrustedApps, absolute, file_stamp
from lineup_runtime_lite.coordination.nodes import default_node_id
from lineup_runtime_lite.drivers.appcache import check_database_file, prepare_apps_dir
from lineup_runtime_lite.host.simulator import HostSimulator
from lineup_runtime_lite.processes.worker import WorkerOptions
from lineup_runtime_lite.store.database import Database, open_database
from lineup_sdk.errors import LineupError
from lineup_sdk.sandbox import sweep_leftovers

__all__ = ["Assembly", "assemble"]


@dataclass
class Assembly:
    """What `assemble` built: the parts a runtime holds, and how to make its engine again
    (a node that lost its lease registers again with a new one)."""

    options: RuntimeOptions
    clock: Clock
    store: Database
    apps: TrustedApps
    host: HostSimulator
    make_engine: Callable[[], Engine]
    #: The temporary apps folder of an in-memory runtime (removed at close).
    tmp: Path | None

    def release(self) -> None:
        """Close the store (its lock goes) and remove the temporary folder."""
        try:
            self.store.close()
        finally:
            if self.tmp is not None:
                shutil.rmtree(self.tmp, ignore_errors=True)


def assemble(options: RuntimeOptions) -> Assembly:
    """Build a runtime's parts from its options: nothing is left open when it raises.

    Raises:
        LineupError: `trust_store_invalid`, `runtime_locked`, `store_corrupt`,
            `store_unavailable`, `store_schema_unsupported`, `install_tampered`.
    """
    from lineup_build.trust import TrustStore

    # every path is resolved against the working folder once, here (SPEC 13.1): no
    # worker, sandbox or later chdir resolves a relative one again
    postgres, in_memory = options.postgres, options.in_memory
    path = options.path
    db_path: str | Path = path if in_memory or postgres else absolute(path)
    trust_path = None if isinstance(options.trust, TrustStore) else absolute(options.trust)
    stamp = file_stamp(trust_path) if trust_path is not None else None
    trust = options.trust if trust_path is None else TrustStore.load(trust_path)
    clock = options.clock or RealClock()
    sweep_leftovers()  # cgroups and sandbox folders of runtimes killed before they closed
    tmp: Path | None = None
    if in_memory and options.apps_dir is None:
        tmp = Path(tempfile.mkdtemp(prefix="lineup-rt-"))
        apps_dir = tmp
    elif options.apps_dir:
        apps_dir = absolute(options.apps_dir)
    elif postgres:
        apps_dir = _cache_apps()
    else:
        apps_dir = Path(str(db_path) + ".apps")
    try:
        store = open_database(
            db_path,
            schema=options.db_schema,
            node_id=options.node_id or default_node_id(apps_dir),
            lease_s=float(options.node_lease_s),
        )
    except BaseException:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        raise
    try:
        if not (in_memory or postgres):  # its rows name the code to run (SPEC 16.1)
            check_database_file(Path(db_path))
        try:  # 0700, the runtime user's own, its ancestors safe (SPEC 16.1)
            prepare_apps_dir(apps_dir)
        except OSError as exc:
            raise LineupError(
                "store_unavailable", f"cannot create the apps folder {apps_dir}: {exc.strerror}"
            ) from None
        if isinstance(clock, VirtualClock):
            saved = store.meta("virtual_now_ms")
            if saved is not None:
                if not saved.isdigit():
                    raise LineupError("store_corrupt", f"{path}: a damaged virtual time")
                clock.set(int(saved))
        limits = options.bundle_limits or Limits()
        apps = TrustedApps(store, apps_dir, limits, trust, trust_path, stamp)
        sim = options.host or HostSimulator(policy="auto")
        make_engine = _engine_factory(options, clock, store, apps, sim)
    except BaseException:
        store.close()  # the lock goes
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        raise
    return Assembly(options, clock, store, apps, sim, make_engine, tmp)


def _engine_factory(
    options: RuntimeOptions,
    clock: Clock,
    store: Database,
    apps: TrustedApps,
    sim: HostSimulator,
) -> Callable[[], Engine]:
    worker_options = WorkerOptions(
        sandbox=options.sandbox,
        memory_mb=options.worker_memory_mb,
        processes=options.worker_processes,
        heartbeat_s=options.worker_heartbeat_s,
        cpu_s=float(options.worker_cpu_s),
        log_max_bytes=options.worker_log_max_bytes,
        env=options.worker_env_pairs,
        isolation=options.isolation,
        session_idle_s=float(options.session_idle_s),
    )
    session = options.isolation == "session"

    def engine() -> Engine:
        made = Engine(
            store,
            clock,
            apps.apps_dir,
            apps.apps_dir / "_logs",
            activation_timeout_s=options.activation_timeout_s,
            host_intent=sim.on_intent,
            check_app=apps.check_app,
            check_trust=apps.check_trust,
            worker_options=worker_options,
            validation_budget_s=float(options.validation_budget_s),
            workers_memory_mb=options.workers_memory_mb if session else None,
            model_of=apps.model_of if store.keeps_bundles else None,
            verify_ahead=apps.verify_ahead,
            trust_stamp=apps.trust_stamp,
        )
        sim.bind(made.host_event)
        return made

    return engine


def _cache_apps() -> Path:
    """The apps cache of a PostgreSQL store on this machine: `$XDG_CACHE_HOME/lineup/apps`
    (`~/.cache/lineup/apps`), one folder per manifest hash, shared by every database."""
    import os

    xdg = os.environ.get("XDG_CACHE_HOME", "")
    cache = Path(xdg) if os.path.isabs(xdg) else Path.home() / ".cache"
    return cache / "lineup" / "apps"
