"""The `lineup` console script: a fast path for `--version`, then the typer app.

This is the composition root and the one exit path: a `LineupError` from any command is
rendered once here (code, message, hint; JSON with `--json`) and sets the exit status.
"""

from __future__ import annotations

import itertools
import sys

__all__ = ["main"]


def main(argv: list[str] | None = None) -> None:
    """Run the CLI with `argv` (default: the process arguments) and exit."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args in (["--version"], ["-V"]):
        from lineup_sdk import __version__

        sys.stdout.write(f"lineup {__version__}\n")
        sys.exit(0)
    from lineup_build.cli._common import output
    from lineup_build.cli._fast import parse_verify
    from lineup_sdk.errors import LineupError

    want_json = "--json" in args or "--format=json" in args or _pair(args, "--format", "json")
    verbose = "--verbose" in args or "-v" in args
    output.verbose = output.quiet = False
    fast = parse_verify(args)
    try:
        if fast is not None:  # `verify` without building the typer app (a CI hot path)
            flags, values = fast
            output.verbose, output.quiet = flags["verbose"], flags["quiet"]
            from lineup_build.cli._fast import run_verify

            sys.exit(run_verify(**values))
        from lineup_build.cli._app import app

        app(args=args, prog_name="lineup")
    except LineupError as exc:
        from lineup_build.cli import _render

        _render.error(exc, as_json=want_json)
        if verbose or output.verbose:
            raise
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        sys.exit(130)


def _pair(args: list[str], option: str, value: str) -> bool:
    return any(a == option and b == value for a, b in itertools.pairwise(args))
