"""`lineup docs`: a Markdown reference of a MiniApp's tools (over `docs` and `sources`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from lineup_build.cli.diff import InputArg

__all__ = ["register"]


def docs(
    path: InputArg,
    out: Annotated[
        Path | None, typer.Option("--out", help="Write the Markdown to FILE (default: stdout).")
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON document instead.")
    ] = False,
) -> None:
    """Write a Markdown reference of a MiniApp's tools, generated from its manifest."""
    import sys

    from lineup_build.docs import docs_markdown, write_docs
    from lineup_build.sources import load_manifest

    text = docs_markdown(load_manifest(path).manifest)
    if out is not None:
        write_docs(out, text)
    if as_json:
        from lineup_build.cli import _render
        from lineup_build.cli._common import envelope

        _render.emit_json(envelope(True, out=str(out) if out else None, markdown=text))
    elif out is None:
        sys.stdout.write(text)


def register(app: typer.Typer) -> None:
    """Add `lineup docs` to the app."""
    app.command()(docs)
