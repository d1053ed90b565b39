"""`lineup inspect`: a bundle's app, key id, tools and files, without trusting or running it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from lineup_build.cli._common import trust_store_path
from lineup_build.cli._options import JsonOpt

__all__ = ["register"]

BundleArg = Annotated[Path, typer.Argument(help="The .lineup bundle file.")]


def inspect(
    bundle: BundleArg,
    trust: Annotated[
        Path | None,
        typer.Option(
            "--trust",
            help="Also check the signature against this store (optional; default: "
            "$LINEUP_TRUST_STORE, else ./trust.toml if it exists).",
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Show a bundle's app, key id, tools and files without trusting or running it."""
    from lineup_build.cli import _render
    from lineup_build.trust import TrustStore
    from lineup_build.verify import check_bundle

    store = trust_store_path(trust, required=False)
    report = check_bundle(bundle, TrustStore.load(store) if store else None)
    if as_json:  # `ok`: the bundle could be inspected; `verified`: it also verified
        _render.emit_json({**report.to_dict(), "ok": not report.problems, "verified": report.ok})
    else:
        _render.inspect_report(report)
    raise typer.Exit(1 if report.problems else 0)


def register(app: typer.Typer) -> None:
    """Add `lineup inspect` to the app."""
    app.command()(inspect)
