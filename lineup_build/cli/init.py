"""`lineup init`: create a MiniApp project from a template."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from lineup_build.cli._common import envelope, output
from lineup_build.cli._options import JsonOpt

__all__ = ["register"]


def complete_template(incomplete: str) -> list[str]:
    """Shell completion for `--template`: the template names starting with `incomplete`."""
    from lineup_build.init import template_names

    return [name for name in template_names() if name.startswith(incomplete)]


def init(
    name: Annotated[Path, typer.Argument(help="Folder to create.")],
    template: Annotated[
        str,
        typer.Option(
            "--template", "-t", help="blank, todo or pomodoro.", autocompletion=complete_template
        ),
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
    if not result.written:  # the same command run again over its own output
        if not output.quiet:
            sys.stderr.write(f"{name}: already initialised, nothing written\n")
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
