"""`lineup docs`: a Markdown (or HTML) reference of a MiniApp's tools (over `docs` and
`sources`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from lineup_build.cli.diff import InputArg

__all__ = ["register"]


def docs(
    path: InputArg,
    out: Annotated[
        Path | None, typer.Option("--out", help="Write the page to FILE (default: stdout).")
    ] = None,
    page_format: Annotated[
        str,
        typer.Option(
            "--format", help="markdown, or html for one self-contained page to open or publish."
        ),
    ] = "markdown",
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON document instead.")
    ] = False,
) -> None:
    """Write a reference of a MiniApp's tools: how to call each, over MCP too, and what
    can go wrong; from its manifest (a folder or a bundle)."""
    import sys

    from lineup_build.docs import docs_html, docs_markdown, write_docs
    from lineup_build.sources import load_manifest
    from lineup_sdk.errors import LineupError

    if page_format not in ("markdown", "html"):
        raise LineupError(
            "usage_invalid",
            f"--format {page_format!r} must be markdown or html",
            hint="pass --format markdown (the default) or --format html",
            exit_code=2,
        )
    manifest = load_manifest(path).manifest
    text = docs_html(manifest) if page_format == "html" else docs_markdown(manifest)
    if out is not None:
        write_docs(out, text)
    if as_json:
        from lineup_build.cli import _render
        from lineup_build.cli._common import envelope

        facts: dict[str, Any] = {"out": str(out) if out else None, "format": page_format}
        facts[page_format] = text  # `markdown` (as before) or `html`
        _render.emit_json(envelope(True, **facts))
    elif out is None:
        sys.stdout.write(text)


def register(app: typer.Typer) -> None:
    """Add `lineup docs` to the app."""
    app.command()(docs)
