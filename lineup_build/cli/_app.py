"""The typer app: each command parses arguments, calls one library function, renders."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from lineup_build.cli._common import output
from lineup_build.cli._fast import GLOBAL_FLAGS
from lineup_build.cli._help import WholeSummaries
from lineup_sdk import __version__


def _set_level(ctx: typer.Context, param: typer.CallbackParam, value: bool) -> None:
    """A `-q`/`-v` given after the command: the same as before it (the root's flags)."""
    if not value or ctx.resilient_parsing:
        return
    setattr(output, str(param.name), True)
    if output.verbose and output.quiet:
        from lineup_sdk.errors import LineupError

        raise LineupError(
            "usage_invalid", "--verbose and --quiet contradict each other", exit_code=2
        )


def _levels(
    verbose: Annotated[
        bool,
        typer.Option(
            *GLOBAL_FLAGS["verbose"].decls, expose_value=False, callback=_set_level, hidden=True
        ),
    ] = False,
    quiet: Annotated[
        bool,
        typer.Option(
            *GLOBAL_FLAGS["quiet"].decls, expose_value=False, callback=_set_level, hidden=True
        ),
    ] = False,
) -> None:
    """A template command: typer builds the global flags as options a command can carry."""


def _level_options() -> list[Any]:
    """`-v/--verbose` and `-q/--quiet` as options of a command, parsed as the root's are."""
    template = typer.Typer(add_completion=False)
    template.command()(_levels)
    return list(typer.main.get_command(template).params)


def _add_level_flags(command: Any, options: list[Any]) -> None:
    """Give `command` (and each command of a group) the global `-q/-v` flags, except a
    spelling it defines itself (`run -v` already means `lineup -v run`)."""
    if isinstance(command, TyperGroup):
        for sub in command.commands.values():
            _add_level_flags(sub, options)
        return
    taken = {decl for param in command.params for decl in getattr(param, "opts", ())}
    command.params.extend(p for p in options if not set(p.opts) & taken)


class _Root(WholeSummaries):
    """The root group: every command also accepts the global flags after its name."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        options = _level_options()
        for command in self.commands.values():
            _add_level_flags(command, options)


app = typer.Typer(
    name="lineup",
    cls=_Root,
    help="LineUp SDK toolchain: declare MiniApp tools, build signed bundles, verify, run.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
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
    "dev",
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
