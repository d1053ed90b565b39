"""`lineup check`: steps 1–3 of the build for one or more projects (fast; editors, pre-commit)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from lineup_build.cli._common import envelope, find_project, projects_for
from lineup_build.cli._options import JsonOpt, SandboxOpt

__all__ = ["register"]


def check(
    paths: Annotated[
        list[Path] | None,
        typer.Argument(
            metavar="[PATH]...",
            help="Project folders, or files inside projects (each project is checked once; "
            "default: the project holding the working folder, found upward).",
        ),
    ] = None,
    strict: Annotated[bool, typer.Option(help="Fail on warnings too.")] = False,
    sandbox: SandboxOpt = "best_effort",
    as_json: JsonOpt = False,
) -> None:
    """Check declarations without building (fast; for editors and pre-commit)."""
    from lineup_build.build import check_project
    from lineup_build.cli import _render
    from lineup_sdk.sandbox import check_mode

    mode = check_mode(sandbox)
    roots = projects_for(paths) if paths else [find_project()]
    results = [(root, check_project(root, sandbox=mode)) for root in roots]
    ok = all(result.ok(strict=strict) for _, result in results)
    if as_json:
        diags = [d.to_dict() for _, result in results for d in result.diagnostics]
        tools = [t["method"] for _, result in results for t in result.tools]
        actions = [a["method"] for _, result in results for a in result.actions]
        projects = [
            {
                "path": str(root),
                "ok": result.ok(strict=strict),
                "tools": len(result.tools),
                "ui_actions": len(result.actions),
            }
            for root, result in results
        ]
        _render.emit_json(envelope(ok, diags, tools=tools, ui_actions=actions, projects=projects))
    else:
        for root, result in results:
            _render.diagnostics(result.diagnostics)
            where = f"{root}: " if len(results) > 1 else ""
            if result.ok(strict=strict):
                _render.line(
                    "{}[green]ok[/]: {}",
                    where,
                    _render.counts(len(result.tools), len(result.files), len(result.actions)),
                )
            else:
                errors = sum(1 for d in result.diagnostics if d.severity == "error" or strict)
                _render.line("{}[red]rejected[/]: {} problem(s)", where, errors)
    raise typer.Exit(0 if ok else 1)


def register(app: typer.Typer) -> None:
    """Add `lineup check` to the app."""
    app.command()(check)
