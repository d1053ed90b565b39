"""`lineup schema`: print the JSON Schema of a file format (for editors)."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from lineup_sdk.errors import LineupError

__all__ = ["register", "schema_text"]

SCHEMAS = ("scenario",)


def schema_text(name: str) -> str:
    """The shipped JSON Schema called `name`.

    Raises:
        LineupError: `usage_invalid` for an unknown name.
    """
    if name not in SCHEMAS:
        raise LineupError(
            "usage_invalid", f"no schema called {name!r}; known: {', '.join(SCHEMAS)}", exit_code=2
        )
    from importlib.resources import files

    return files("lineup_runtime_lite.sim").joinpath(f"{name}.schema.json").read_text("utf-8")


def register(app: typer.Typer) -> None:
    """Add `lineup schema` to the CLI."""

    @app.command("schema")
    def schema(
        name: Annotated[str, typer.Argument(help="The format: scenario.")],
    ) -> None:
        """Print the JSON Schema of a file format (for editors)."""
        sys.stdout.write(schema_text(name))
