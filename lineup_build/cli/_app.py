"""The typer app: each command parses arguments, calls one library function, renders."""

from __future__ import annotations

from typing import Annotated

import typer

from lineup_build.cli._common import output
from lineup_build.cli._fast import GLOBAL_FLAGS
from lineup_sdk import __version__

app = typer.Typer(
    name="lineup",
    help="LineUp SDK toolchain: declare MiniApp tools, build signed bundles, verify, run.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"lineup {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", "-V", callback=_version, is_eager=True, help="Show the version."),
    ] = False,
    verbose: Annotated[
        bool,
        typer.Option(*GLOBAL_FLAGS["verbose"].decls, help=GLOBAL_FLAGS["verbose"].help),
    ] = False,
    quiet: Annotated[
        bool, typer.Option(*GLOBAL_FLAGS["quiet"].decls, help=GLOBAL_FLAGS["quiet"].help)
    ] = False,
) -> None:
    """LineUp SDK toolchain."""
    if verbose and quiet:
        from lineup_sdk.errors import LineupError

        raise LineupError(
            "usage_invalid", "--verbose and --quiet contradict each other", exit_code=2
        )
    output.verbose = verbose
    output.quiet = quiet


#: The command modules, in the order `lineup --help` lists them; each has `register(app)`.
COMMANDS = (
    "init",
    "check",
    "build",
    "keygen",
    "verify",
    "inspect",
    "trust",
    "run",
    "serve",
    "diff",
    "docs",
    "test",
    "schema",
)


def _register() -> None:
    """Add every command; a module that is not shipped (a trimmed install) is skipped."""
    import importlib

    for command in COMMANDS:
        name = f"lineup_build.cli.{command}"
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue
        module.register(app)


_register()
