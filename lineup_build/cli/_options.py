"""Option and argument types several `lineup` commands share (typer annotations)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

__all__ = ["JsonOpt", "PathArg", "SandboxOpt"]

JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document instead.")]
SandboxOpt = Annotated[
    str,
    typer.Option(
        "--sandbox",
        help="How to contain the entry's import: best_effort, required (refuse without "
        "containment) or off (debugging).",
    ),
]
PathArg = Annotated[
    Path | None,
    typer.Argument(
        help="The MiniApp project folder (default: the one holding lineup.toml, found "
        "upward from the working folder)."
    ),
]
