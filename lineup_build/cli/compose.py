"""What `lineup run`, `lineup test` and `lineup serve` put together: a project folder built
with its dev key (or a bundle verified against a trust store) installed into an embedded
runtime. The CLI is the composition root; the runtime below it never builds a project.

The runtime is imported lazily, inside the functions, so the CLI's other commands (and
`lineup --version`) never load it.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lineup_build.dev import DevBuild, build_with_dev_key
from lineup_build.trust import TrustStore
from lineup_sdk.errors import LineupError

if TYPE_CHECKING:
    from lineup_runtime_lite.scenario import Scenario
    from lineup_runtime_lite.sim import Simulation
    from lineup_runtime_lite.suite import Case, SuiteReport

__all__ = [
    "Prepared",
    "open_simulation",
    "prepare_targets",
    "report_worker_failures",
    "run_suite",
    "serve_state",
    "start_dev",
]


class _WorkerFailures(logging.Handler):
    """The runtime's report of a worker that failed to start, on stderr once per app
    version: its cause and the path of its log (never part of an Agent message)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.seen: set[tuple[str, str]] = set()

    def emit(self, record: logging.LogRecord) -> None:
        key = (str(getattr(record, "scope", "")), str(getattr(record, "version", "")))
        if key in self.seen:
            return
        self.seen.add(key)
        sys.stderr.write(f"lineup: {record.getMessage()}\n")
        sys.stderr.flush()


def report_worker_failures() -> None:
    """Have `run`, `test`, `serve` and `dev` print a worker that failed to start, its cause
    and its log's path on stderr (SPEC 13.1), once per app version for this process."""
    logger = logging.getLogger("lineup.runtime.workers")
    for handler in logger.handlers:
        if isinstance(handler, _WorkerFailures):
            handler.seen.clear()  # a new command: its apps are reported afresh
            return
    logger.addHandler(_WorkerFailures())


def open_simulation(
    target: Path,
    *,
    db: str | Path | None,
    shared: bool = False,
    trust: Path | None,
    policy: str | None,
    scenario: Scenario | None,
    sandbox: str = "best_effort",
    isolation: str | None = None,
) -> Simulation:
    """`lineup run`: a started simulation of a project folder (built with its dev key, which
    alone is trusted) or of a bundle (checked against the trust store `trust`).

    Raises:
        LineupError: a build problem (with its diagnostics), a usage error for a bundle
            without `--trust`, or the bundle's first verification problem.
    """
    from lineup_build.verify import check_bundle
    from lineup_runtime_lite import DEFAULT_ISOLATION
    from lineup_runtime_lite.databases import private_schema_for
    from lineup_runtime_lite.sim import Simulation

    report_worker_failures()
    effective_policy = policy or (scenario.host_policy if scenario else None) or "auto"
    tmp = Path(tempfile.mkdtemp(prefix="lineup-run-"))
    try:
        if target.is_dir():
            built = build_with_dev_key(target, sandbox=sandbox)
            bundle, trust_obj, scope = built.bundle, built.trust, built.scope
        else:
            if trust is None:
                raise LineupError(
                    "usage_invalid",
                    f"{target} is a bundle; pass --trust FILE to say whose keys you trust",
                    hint="lineup run BUNDLE --trust trust.toml",
                    exit_code=2,
                )
            trust_obj = TrustStore.load(trust)
            report = check_bundle(target, trust_obj)
            if not report.ok:
                raise report.problems[0]
            bundle = target
            assert report.model is not None
            scope = report.model.app.scope
        sim = Simulation(
            db or tmp / "runtime.db",
            trust_obj,
            bundle,
            scope,
            effective_policy,
            sandbox,
            isolation or DEFAULT_ISOLATION,
            private_schema_for(db, "run", shared=shared),
            scratch=tmp,
        )
        sim.start()
        return sim
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def run_suite(
    cases: list[Case],
    *,
    sandbox: str = "best_effort",
    isolation: str | None = None,
    db: str | Path | None = None,
    shared: bool = False,
) -> SuiteReport:
    """`lineup test`: play each case in a fresh runtime, each project built once with its
    dev key (`lineup_runtime_lite.suite.play_suite` with this CLI's builder)."""
    from lineup_runtime_lite import DEFAULT_ISOLATION
    from lineup_runtime_lite.databases import private_schema_for
    from lineup_runtime_lite.suite import play_suite

    report_worker_failures()

    def build(project: Path) -> DevBuild:
        return build_with_dev_key(project, sandbox=sandbox)

    if db is not None and private_schema_for(db, "test", shared=shared) is None:
        raise LineupError(
            "usage_invalid",
            "lineup test plays each scenario in a fresh runtime: --db takes a "
            "postgresql:// database (each scenario gets a private schema there)",
            exit_code=2,
        )
    return play_suite(
        cases,
        build,
        sandbox=sandbox,
        isolation=isolation or DEFAULT_ISOLATION,
        database=str(db) if db is not None else None,
    )


@dataclass(frozen=True)
class Prepared:
    """A bundle ready to install, and whether it is a local dev build."""

    bundle: Path
    scope: str
    dev_build: bool


def _build(folder: Path, trust: TrustStore, sandbox: str) -> Prepared:
    built = build_with_dev_key(
        folder, out_dir=folder.resolve() / ".lineup" / "serve", sandbox=sandbox
    )
    app, key = built.model.app, built.key
    # the project's own dev key: trusted for its scope and what it asks for; a --trust
    # file may already trust that key, so its scopes and grants are only widened
    known = trust.keys.get(key.key_id)
    trust.add(
        key.public_raw,
        sorted({*(known.scopes if known else ()), app.scope}),
        known.label if known else "lineup serve dev key",
        sorted({*(known.allow if known else ()), *app.permissions}),
    )
    return Prepared(built.bundle, app.scope, True)


def serve_state(targets: list[Path], env: Mapping[str, str]) -> Path:
    """`lineup serve`'s state without `--db` (SPEC 13.1): `<first project folder>/.lineup/
    serve.db`, or, when only bundles are named, `$XDG_STATE_HOME/lineup/serve.db` (default
    `~/.local/state/lineup/serve.db`); absolute, so the working folder never matters (Claude
    Desktop starts servers in `/`). Its folder is created.

    Raises:
        LineupError: `store_unavailable` when that folder cannot be created.
    """
    folders = [t for t in targets if t.is_dir()]
    if folders:
        base = Path(os.path.abspath(folders[0])) / ".lineup"
    else:
        xdg = env.get("XDG_STATE_HOME", "")
        # the XDG spec: a relative value is invalid and ignored
        state = Path(xdg) if os.path.isabs(xdg) else Path.home() / ".local" / "state"
        base = state / "lineup"
    try:
        base.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise LineupError(
            "store_unavailable",
            f"cannot create {base} for lineup serve's state: {exc.strerror}",
            hint="pass --db FILE to keep the state elsewhere",
        ) from None
    return base / "serve.db"


def prepare_targets(
    targets: list[Path], trust_file: Path | None, *, sandbox: str = "best_effort"
) -> tuple[TrustStore, list[Prepared]]:
    """`lineup serve`: `(trust store, bundles)`; folders are built (their entry imported
    under `sandbox`) and their dev keys trusted, in memory only; bundles need `trust_file`.

    Raises:
        LineupError: a build problem, `usage_invalid` for a bundle without a trust store or
            a missing target, or whatever verification of a bundle reports.
    """
    from lineup_build.verify import check_bundle

    if not targets:
        raise LineupError(
            "usage_invalid", "name at least one MiniApp folder or bundle", exit_code=2
        )
    trust = TrustStore.load(trust_file) if trust_file is not None else TrustStore()
    prepared: list[Prepared] = []
    for target in targets:
        if target.is_dir():
            prepared.append(_build(target, trust, sandbox))
        elif target.is_file():
            if trust_file is None:
                raise LineupError(
                    "usage_invalid",
                    f"{target} is a bundle; pass --trust FILE to say whose keys you trust",
                    hint="lineup serve BUNDLE --trust trust.toml",
                    exit_code=2,
                )
            report = check_bundle(target, trust)
            if not report.ok or report.model is None:
                raise report.problems[0]
            prepared.append(Prepared(target, report.model.app.scope, False))
        else:
            raise LineupError(
                "usage_invalid", f"{target} is neither a MiniApp folder nor a bundle", exit_code=2
            )
    scopes = [p.scope for p in prepared]
    twice = sorted({s for s in scopes if scopes.count(s) > 1})
    if twice:
        raise LineupError(
            "usage_invalid", f"scope(s) named more than once: {', '.join(twice)}", exit_code=2
        )
    return trust, prepared


def start_dev(target: Path, **options: Any) -> Any:
    """`lineup dev`: `lineup_runtime_lite.web.open_dev` (build with the dev key, install,
    the dev Host and its watcher) with this command's report of worker failures."""
    from lineup_runtime_lite import web  # usage_invalid without the extra

    report_worker_failures()
    return web.open_dev(target, **options)
