"""`lineup init`: create a MiniApp project from a template."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from lineup_build.cli._common import envelope
from lineup_build.cli._options import JsonOpt

__all__ = ["register"]


def init(
    name: Annotated[Path, typer.Argument(help="Folder to create.")],
    template: Annotated[
        str, typer.Option("--template", "-t", help="blank, todo or pomodoro.")
    ] = "blank",
    scope: Annotated[str | None, typer.Option(help="App scope (default: from NAME).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Create a MiniApp project from a template."""
    from lineup_build.cli import _render
    from lineup_build.init import init_project

    result = init_project(name, template=template, scope=scope)
    if as_json:
        _render.emit_json(envelope(True, **result.to_dict()))
        return
    _render.line(
        "created [bold]{}[/] from template [bold]{}[/] (scope [bold]{}[/], {} files)",
        result.root,
        template,
        result.scope,
        len(result.files),
    )
    _render.line("next: lineup check {}  ·  lineup build {} --dev-key", name, name)


def register(app: typer.Typer) -> None:
    """Add `lineup init` to the app."""
    app.command()(init)
