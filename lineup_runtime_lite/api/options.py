"""`RuntimeOptions`: every option of `Runtime.open` / `AsyncRuntime.open`, its default, its
check and its documentation, in one place.

`AsyncRuntime.open` takes exactly these fields as keywords (a test compares names, order,
defaults and annotations) and builds one of these first, so a bad option is refused before
anything is opened; `api.assemble` builds the runtime's parts from it. The options reference
page (`docs/reference/runtime-options.md`) is generated from the field docs below.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from lineup_build.reader import Limits
from lineup_runtime_lite.api.clock import Clock
from lineup_runtime_lite.host.simulator import HostSimulator
from lineup_runtime_lite.store.nodes import DEFAULT_LEASE_S, check_lease_s, check_node_id
from lineup_runtime_lite.store.postgres import is_postgres_url
from lineup_runtime_lite.validation.params import DEFAULT_MAX_PARAMS_BYTES
from lineup_runtime_lite.validation.pool import DEFAULT_BUDGET_S
from lineup_sdk.errors import LineupError
from lineup_sdk.sandbox import DEFAULT_PROCESSES

__all__ = [
    "DEFAULT_ISOLATION",
    "ISOLATIONS",
    "MAX_PROCESSES",
    "MIN_PROCESSES",
    "RuntimeOptions",
    "check_isolation",
    "option_names",
]

#: `Runtime.open(isolation=...)`: a worker per app version, or per App session (SPEC 13.3).
ISOLATIONS = ("app", "session")
DEFAULT_ISOLATION = "app"
#: The bounds of `worker_processes` (a worker needs its launcher, loop and threads).
MIN_PROCESSES, MAX_PROCESSES = 16, 32768


@dataclass(frozen=True)
class RuntimeOptions:
    """The options of one runtime, checked when made (`usage_invalid` for a bad one)."""

    path: str | Path
    """SQLite file (one runtime per file: `runtime_locked`), `:memory:`, or a PostgreSQL
    database, `postgresql://user@host:port/db` (the `postgres` extra; any number of runtime
    nodes, each with its own `node_id`; a password in the URL is redacted everywhere and
    warned about). A relative path is resolved against the working folder once, at open."""
    trust: Any
    """The trust store: a file path (re-read when the file changes) or a `TrustStore`."""
    clock: Clock | None = None
    """`RealClock()` (the default) or a `VirtualClock`, whose time persists in the database."""
    host: HostSimulator | None = None
    """The Host that receives intents (default: `HostSimulator(policy="auto")`);
    `rt.host.event(...)` sends its events."""
    apps_dir: str | Path | None = None
    """Where installed apps are unpacked (default: next to the database file,
    `<file>.apps`; for PostgreSQL `$XDG_CACHE_HOME/lineup/apps/<manifest sha256>`; for
    `:memory:` a temporary folder removed at close). It belongs to the runtime's user (SPEC
    16.1): made 0700, folders others may write tightened, anything of another uid or a
    symlink refused, every folder above it root's or the user's. One cache per uid."""
    activation_timeout_s: float = 60.0
    """Runtime-clock seconds before a starting activation fails."""
    max_params_bytes: int = DEFAULT_MAX_PARAMS_BYTES
    """The largest Agent params accepted, in bytes of canonical JSON (`params_too_large`
    above it); 1 MiB by default."""
    sandbox: str = "best_effort"
    """`best_effort` (contain workers as far as the platform allows, and report it in
    `rt.sandbox`), `required` (refuse to start a worker without file, network and
    process-tree containment: `sandbox_unavailable`) or `off` (debugging only)."""
    worker_memory_mb: int = 1024
    """Memory cap of each worker (at least 64): over its whole process tree where the
    runtime can create a memory cgroup, else per process (`rt.sandbox` says which)."""
    worker_processes: int = DEFAULT_PROCESSES
    """Cap on the tasks (processes and threads) of each worker's tree: a pids cgroup, else
    the fallbacks `rt.sandbox` names (16 to 32768)."""
    worker_heartbeat_s: float = 5.0
    """A worker whose loop does not answer a heartbeat this long is recycled (real time)."""
    worker_cpu_s: float = 600.0
    """CPU-seconds a worker's whole process tree may use between recycles; past it the
    worker is recycled and what it was running ends `delivery_interrupted` with
    `details.reason = "cpu_limit"`."""
    worker_log_max_bytes: int = 10 * 1024 * 1024
    """Each worker log is truncated, with a note, past this size (10 MiB by default)."""
    worker_env: Mapping[str, str] | None = None
    """Extra environment variables for every worker (configuration an operator chooses to
    give MiniApps; nothing of this process's environment reaches a worker otherwise besides
    `PATH`, `LANG`, `LC_*`, `TZ`, `HOME`, `TMPDIR`). Names are upper-case identifiers, never
    `LINEUP_*` or `PYTHON*`."""
    validation_budget_s: float = DEFAULT_BUDGET_S
    """Real time one value (params or a result) may take in a validator process when its
    schema is not plain (at most 3600); over it the call answers `invalid_params` /
    `handler_result_invalid` with `details.reason = "validation_budget"` (SPEC 13.3)."""
    isolation: str = DEFAULT_ISOLATION
    """`app` (one worker serves every conversation of an app version) or `session` (a
    worker per App session: code serving one conversation never shares a process with
    another's; SPEC 13.3)."""
    session_idle_s: float = 300.0
    """Under `session`, a session's worker idle this long (real time) is recycled; its next
    delivery starts a new one."""
    workers_memory_mb: int = 4096
    """Under `session`, one memory cap over all workers of this runtime together, where a
    memory cgroup can be made (`rt.sandbox` says); at least `worker_memory_mb`."""
    db_schema: str | None = None
    """PostgreSQL only: keep the tables in this schema (created when missing, dropped at
    close): `lineup run`/`test`/`dev`'s private schema."""
    node_id: str | None = None
    """PostgreSQL only: this runtime's id among the nodes of the database (default
    `LINEUP_NODE_ID`, else the hostname and the apps folder); a second node with the same id
    and a live lease is `runtime_locked`."""
    node_lease_s: float = DEFAULT_LEASE_S
    """PostgreSQL only: the node's lease in seconds (0.2 to 3600), judged by the database's
    clock and renewed four times a lease; once it lapses, another node takes this one's App
    sessions over (SPEC 15)."""
    bundle_limits: Limits | None = None
    """The limits `install` verifies bundles within (default `Limits()`: manifest 4 MiB,
    10,000 files, 256 MiB of files), e.g. `Limits(max_manifest_bytes=8 << 20)` for an app
    of many tools."""
    #: `worker_env` checked, as the `(name, value)` pairs every worker gets, sorted.
    worker_env_pairs: tuple[tuple[str, str], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        """Check every option, in the order `open` always did (the first problem raises)."""
        from lineup_build.trust import TrustStore
        from lineup_sdk.sandbox import check_mode

        max_params_bytes = self.max_params_bytes
        if type(max_params_bytes) is not int or max_params_bytes < 1:
            raise LineupError(
                "usage_invalid",
                f"max_params_bytes must be a positive integer, not {max_params_bytes!r}",
            )
        if not isinstance(self.path, str | os.PathLike) or str(self.path) == "":
            raise LineupError("usage_invalid", f"path must be a file path, not {self.path!r}")
        if not isinstance(self.trust, TrustStore | str | os.PathLike):
            raise LineupError(
                "usage_invalid", f"trust must be a TrustStore or a file path, not {self.trust!r}"
            )
        _seconds("activation_timeout_s", self.activation_timeout_s)
        check_mode(self.sandbox)
        _seconds("worker_cpu_s", self.worker_cpu_s)
        if (
            self.worker_memory_mb < 64
            or self.worker_heartbeat_s <= 0
            or self.worker_log_max_bytes < 0
        ):
            raise LineupError(
                "usage_invalid",
                "worker_memory_mb must be at least 64, worker_heartbeat_s positive and "
                "worker_log_max_bytes not negative",
            )
        _integer("worker_processes", self.worker_processes, MIN_PROCESSES, MAX_PROCESSES)
        if self.bundle_limits is not None and not isinstance(self.bundle_limits, Limits):
            raise LineupError(
                "usage_invalid",
                f"bundle_limits must be a lineup_build.Limits, not {self.bundle_limits!r}",
            )
        _seconds("validation_budget_s", self.validation_budget_s, most=3600)
        check_isolation(self.isolation)
        _seconds("session_idle_s", self.session_idle_s)
        _integer("workers_memory_mb", self.workers_memory_mb, self.worker_memory_mb, 1 << 30)
        object.__setattr__(self, "worker_env_pairs", _worker_env(self.worker_env))
        if self.db_schema is not None and not self.postgres:
            raise LineupError("usage_invalid", "db_schema is for a postgresql:// database")
        if self.node_id is None:  # the documented default, read once
            object.__setattr__(self, "node_id", os.environ.get("LINEUP_NODE_ID") or None)
        if self.node_id is not None:
            check_node_id(self.node_id)
        check_lease_s(self.node_lease_s)

    @property
    def postgres(self) -> bool:
        """Whether `path` is a `postgresql://` URL."""
        return is_postgres_url(self.path)

    @property
    def in_memory(self) -> bool:
        """Whether `path` is `:memory:`."""
        return str(self.path) == ":memory:"


def option_names() -> tuple[str, ...]:
    """The keywords of `open`, in order: the fields a caller sets."""
    return tuple(f.name for f in fields(RuntimeOptions) if f.init)


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
    """An option that is a number of seconds in (0, most]."""
    if isinstance(value, bool) or not (isinstance(value, int | float) and 0 < value <= most):
        raise LineupError(
            "usage_invalid", f"{name} must be a number of seconds in (0, {most:g}], not {value!r}"
        )


def _integer(name: str, value: object, least: int, most: int) -> None:
    """An option that is an integer from `least` to `most`."""
    if type(value) is not int or not least <= value <= most:
        raise LineupError(
            "usage_invalid", f"{name} must be an integer from {least} to {most}, not {value!r}"
        )


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
