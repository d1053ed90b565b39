"""`lineup dev`'s parts put together: a project folder built with its dev key, installed
into an embedded runtime, the dev Host over it and the watcher that rebuilds on edit. The
pytest fixture for authors uses it as the CLI does."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lineup_build.dev import build_with_dev_key
from lineup_runtime_lite.api.async_runtime import DEFAULT_ISOLATION
from lineup_runtime_lite.store.postgres import (
    check_no_live_runtime,
    drop_schema,
    is_postgres_url,
    private_schema,
    redact_url,
)
from lineup_runtime_lite.web._devhost import DevHost, faults_enabled
from lineup_runtime_lite.web._watch import Watcher
from lineup_sdk.errors import LineupError

__all__ = ["DevSession", "dev_db", "mcp_app", "open_dev"]


@dataclass
class DevSession:
    """`lineup dev`'s parts: the runtime, the dev Host over it, the watcher, the MCP app.

    `close()` stops the watcher and closes the runtime (workers included)."""

    rt: Any
    host: Any
    watcher: Any
    project: Path
    #: The state: an SQLite file, or a PostgreSQL database (its URL, password redacted).
    db: Path | str
    #: On PostgreSQL: `(url, schema)` of the private schema dropped at close.
    private: tuple[str, str] | None = None

    def close(self) -> None:
        if self.watcher is not None:
            self.watcher.stop()
        try:
            self.rt.close()
        finally:
            if self.private is not None:
                url, schema = self.private
                self.private = None
                drop_schema(url, schema)


def dev_db(project: Path) -> Path:
    """`lineup dev`'s default state: `<project>/.lineup/dev.db` (its folder created).

    Raises:
        LineupError: `store_unavailable` when that folder cannot be created.
    """
    base = project / ".lineup"
    try:
        base.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise LineupError(
            "store_unavailable",
            f"cannot create {base} for lineup dev's state: {exc.strerror}",
            hint="pass --db FILE to keep the state elsewhere",
        ) from None
    return base / "dev.db"


def open_dev(
    target: Path,
    *,
    db: str | Path | None = None,
    shared: bool = False,
    policy: str = "manual",
    sandbox: str = "best_effort",
    isolation: str = DEFAULT_ISOLATION,
    clock: Any = None,
    watch: bool = True,
    faults: bool | None = None,
    on_build: Any = None,
) -> DevSession:
    """`lineup dev`: build the project folder with its dev key, install it into an
    embedded runtime (`isolation` as `Runtime.open`'s; the real clock unless `clock` is
    given: the test seam; `db` an SQLite file or a `postgresql://` database, where the
    tables live in a private schema dropped at close, a database a runtime is serving
    refused unless `shared`) and put the
    dev Host over it; with `watch`, an edit rebuilds and moves the dev sessions to the new
    build. `on_build(entry)` hears each rebuild (the CLI prints it).

    Raises:
        LineupError: `usage_invalid` without the `web` extra or for a target that is not a
            project folder; a build problem; `runtime_locked`.
    """
    if not target.is_dir():
        raise LineupError(
            "usage_invalid",
            f"{target} is not a MiniApp folder",
            hint="lineup dev PATH names a project folder (with lineup.toml)",
            exit_code=2,
        )
    project = Path(os.path.abspath(target))
    out_dir = project / ".lineup" / "dev"

    def build() -> Path:
        return build_with_dev_key(project, out_dir=out_dir, sandbox=sandbox).bundle

    first = build_with_dev_key(project, out_dir=out_dir, sandbox=sandbox)
    from lineup_runtime_lite import HostSimulator, Runtime

    private: tuple[str, str] | None = None
    state: Path | str
    if is_postgres_url(db):
        url = str(db)
        if not shared:
            check_no_live_runtime(url)
        private = (url, private_schema("dev"))
        state = redact_url(url)
        apps_dir = project / ".lineup" / "dev-apps" / private[1]
    else:
        state = Path(os.path.abspath(db)) if db is not None else dev_db(project)
        apps_dir = state.parent / f"{state.name}.apps"
    rt = Runtime.open(
        private[0] if private else state,
        db_schema=private[1] if private else None,
        trust=first.trust,
        clock=clock,
        host=HostSimulator("manual"),  # the dev Host sends the events (its policy below)
        apps_dir=apps_dir,
        sandbox=sandbox,
        isolation=isolation,
    )
    try:
        installed = rt.install(first.bundle, dev_build=True)
        host = DevHost(
            rt,
            first.scope,
            apps_dir,
            policy=policy,
            rebuild=build,
            faults=faults_enabled() if faults is None else faults,
            version=installed.version,
        )
        watcher = None
        if watch:

            def changed() -> None:
                try:
                    entry = host.rebuilt()
                except LineupError as exc:
                    entry = host.build_failed(exc)
                if on_build is not None:
                    on_build(entry)

            watcher = Watcher(project, changed)
            watcher.start()
        return DevSession(rt, host, watcher, project, state, private)
    except BaseException:
        rt.close()
        if private is not None:
            drop_schema(*private)
        raise


def mcp_app(
    rt: Any,
    conversation: str = "mcp",
    scopes: Iterable[str] | None = None,
    observe: Any = None,
) -> Any:
    """`/mcp` of `lineup dev`: `lineup serve --http`'s bridge and app over the same runtime,
    as `token -> ASGI app` (usage_invalid without the MCP SDK). `scopes`: the apps it
    serves (`lineup dev` serves only its project, SPEC 16.5); None: every installed one.
    `observe(answer, conversation, method)` hears each call's first answer (the dev Host's
    `answered`, so a call refused before acceptance reaches the timeline)."""
    from lineup_runtime_lite import serve as mcp_serve

    bridge = mcp_serve.Bridge(rt, mcp_serve.ServeOptions(conversation=conversation), scopes=scopes)
    bridge.on_answer = observe

    def make(token: str) -> Any:
        return mcp_serve.http_app(bridge, "127.0.0.1", token)

    return make
