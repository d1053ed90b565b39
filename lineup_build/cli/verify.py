"""`lineup verify`: the typer form of the command (`_fast` runs the plain spellings without
typer, from the same option table, and holds the command's body)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from lineup_build.cli._fast import VERIFY_OPTIONS, run_verify

__all__ = ["register"]

BundleArg = Annotated[Path, typer.Argument(help="The .lineup bundle file.")]


def _opt(name: str) -> Any:
    spec = VERIFY_OPTIONS[name]
    return typer.Option(*spec.decls, help=spec.help)


def verify(
    bundle: BundleArg,
    trust: Annotated[Path | None, _opt("trust")] = None,
    source: Annotated[Path | None, _opt("source")] = None,
    sandbox: Annotated[str, _opt("sandbox")] = "best_effort",
    as_json: Annotated[bool, _opt("as_json")] = False,
    max_manifest_bytes: Annotated[int | None, _opt("max_manifest_bytes")] = None,
    max_files: Annotated[int | None, _opt("max_files")] = None,
    max_total_bytes: Annotated[int | None, _opt("max_total_bytes")] = None,
) -> None:
    """Verify a bundle: archive, signature, trust, manifest, files (runs no bundle code)."""
    raise typer.Exit(
        run_verify(
            bundle,
            trust,
            source,
            sandbox,
            as_json,
            max_manifest_bytes,
            max_files,
            max_total_bytes,
        )
    )


def register(app: typer.Typer) -> None:
    """Add `lineup verify` to the app."""
    app.command()(verify)
