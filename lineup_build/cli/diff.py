"""`lineup diff`: two releases compared as Agents meet them (over `diff` and `sources`)."""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Annotated, Any

import typer

from lineup_build.cli._common import TRUST_HELP, trust_store_path

__all__ = ["register"]


class Format(enum.StrEnum):
    """Output formats of `lineup diff`."""

    text = "text"
    github = "github"


InputArg = Annotated[Path, typer.Argument(help="A .lineup bundle or a MiniApp project folder.")]


def diff(
    old: Annotated[
        Path, typer.Argument(help="The previous release: a .lineup bundle or a project folder.")
    ],
    new: Annotated[
        Path, typer.Argument(help="The candidate: a .lineup bundle or a project folder.")
    ],
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON document instead.")
    ] = False,
    fmt: Annotated[
        Format, typer.Option("--format", help="text, or github for workflow annotations.")
    ] = Format.text,
    trust: Annotated[
        Path | None,
        typer.Option("--trust", help=f"{TRUST_HELP} Bundles are verified against it first."),
    ] = None,
) -> None:
    """Compare two releases as Agents meet them; exit 1 on a breaking change without a
    major version bump."""
    from lineup_build.diff import diff_manifests
    from lineup_build.sources import load_manifest

    store_path = trust_store_path(trust.absolute() if trust else None, required=False)
    store = None
    if store_path is not None:
        from lineup_build.trust import TrustStore

        store = TrustStore.load(store_path)
    before = load_manifest(old, role="OLD", trust=store)
    after = load_manifest(new, role="NEW", trust=store)
    report = diff_manifests(
        before.manifest, after.manifest, old_source=str(old), new_source=str(new)
    )
    if as_json:
        from lineup_build.cli import _render
        from lineup_build.cli._common import envelope

        facts = report.to_dict()
        _render.emit_json(envelope(facts.pop("ok"), facts.pop("diagnostics", []), **facts))
    else:
        from lineup_build.cli import _diff_render

        if fmt is Format.github:

            def locate(change: Any) -> tuple[str, int]:
                """The changed tool's or UI Action's declaration in NEW (in OLD for a
                removed one) when that side is a project folder; else NEW's bundle or
                config file, line 1 (a manifest records no source locations)."""
                name = getattr(change, "subject", None)
                in_new = name is not None and (
                    after.manifest.tool(name) is not None
                    or after.manifest.ui_action(name) is not None
                )
                return (after if in_new else before).where(name) or (after.home, 1)

            _diff_render.github(report, locate=locate)
        else:
            _diff_render.text(report)
    raise typer.Exit(0 if report.ok else 1)


def register(app: typer.Typer) -> None:
    """Add `lineup diff` to the app."""
    app.command()(diff)
