"""`lineup dev`: the MiniApp in the author's browser — a web dev Host over an embedded
runtime (SPEC 14). Thin: `compose.start_dev` puts it together, `web.serve_dev` serves it."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from lineup_build.cli._options import (
    CodeSandboxOpt,
    DbOpt,
    IsolationOpt,
    SharedOpt,
    checked_isolation,
    db_target,
)
from lineup_sdk.errors import LineupError


def _say(text: str) -> None:
    sys.stderr.write(f"lineup dev: {text}\n")
    sys.stderr.flush()


def should_open(flag: bool | None, env: dict[str, str], tty: bool) -> bool:
    """`--open`/`--no-open`, else a browser only on a terminal with a display."""
    if flag is not None:
        return flag
    return tty and bool(env.get("DISPLAY") or env.get("WAYLAND_DISPLAY"))


def register(app: typer.Typer) -> None:
    """Add `lineup dev` to the CLI."""

    @app.command()
    def dev(
        target: Annotated[
            Path | None,
            typer.Argument(
                metavar="PATH",
                help="The MiniApp folder (default: the project holding the working folder).",
            ),
        ] = None,
        port: Annotated[
            int,
            typer.Option(
                help="Host page port on 127.0.0.1 (the next free one if taken); the Surface "
                "origin takes the next free port after it.",
                min=0,
                max=65535,
            ),
        ] = 8765,
        db: DbOpt = None,
        shared: SharedOpt = False,
        host: Annotated[
            str,
            typer.Option(
                help="manual: you confirm foreground in the Host panel; auto: a Surface's "
                "sdk.host.ready() is confirmed at once."
            ),
        ] = "manual",
        isolation: IsolationOpt = None,
        open_browser: Annotated[
            bool | None,
            typer.Option(
                "--open/--no-open",
                help="Open the Host page in a browser (default: only on a terminal with a "
                "display).",
            ),
        ] = None,
        sandbox: CodeSandboxOpt = "best_effort",
    ) -> None:
        """See and try the whole MiniApp in a browser: its Surface, the Host panel, an Agent
        console, the timeline, and /mcp for a real MCP client; edits rebuild."""
        from lineup_build.cli._common import find_project

        if host not in ("auto", "manual"):
            raise LineupError(
                "usage_invalid", f"--host {host!r} must be auto or manual", exit_code=2
            )
        isolation = checked_isolation(isolation)
        from lineup_sdk.sandbox import check_mode

        check_mode(sandbox)
        from lineup_build.cli.compose import start_dev

        project = target if target is not None else find_project()

        def built(entry: dict[str, Any]) -> None:
            if entry["action"] == "failed":
                _say(f"rebuild failed: {entry['code']}: {entry['message']}")
            else:
                _say(
                    f"rebuilt {entry['version']} ({entry['action']}); moved {entry['moved_sessions']} session(s)"
                )

        session = start_dev(
            project,
            db=db_target(db, "dev"),
            shared=shared,
            policy=host,
            sandbox=sandbox,
            isolation=isolation,
            on_build=built,
        )
        _say(f"state in {session.db}")
        want_open = should_open(open_browser, dict(os.environ), sys.stdout.isatty())
        from lineup_runtime_lite import web

        def ready(urls: Any) -> None:
            _say(f"Host page: {urls.open_url}")
            _say(f"MCP: {urls.mcp_url}  (Authorization: Bearer {session.host.host_token})")
            _say(f"Surfaces on {urls.surface_origin}; watching {session.project} for edits")
            if want_open:
                import webbrowser

                webbrowser.open(urls.open_url)

        try:
            web.serve_dev(
                session.host,
                port,
                mcp_app=web.mcp_app(
                    session.rt, scopes=[session.host.scope], observe=session.host.answered
                ),
                on_ready=ready,
            )
        finally:
            session.close()
