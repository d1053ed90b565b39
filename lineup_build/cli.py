"""The `lineup` console script: a fast path for `--version`, then the typer app.

This is the composition root and the one exit path: a `LineupError` from any command is
rendered once here (code, message, hint; JSON with `--json`) and sets the exit status.
"""

from __future__ import annotations

import sys

__all__ = ["main"]


def main(argv: list[str] | None = None) -> None:
    """Run the CLI with `argv` (default: the process arguments) and exit."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args in (["--version"], ["-V"]):
        from lineup_sdk._version import __version__

        sys.stdout.write(f"lineup {__version__}\n")
        sys.exit(0)
    from lineup_build._cli_app import app
    from lineup_sdk.errors import LineupError

    want_json = "--json" in args
    verbose = "--verbose" in args or "-v" in args
    try:
        app(args=args, prog_name="lineup")
    except LineupError as exc:
        from lineup_build import _render

        _render.error(exc, as_json=want_json)
        if verbose:
            raise
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        sys.exit(130)
