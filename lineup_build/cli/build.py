"""`lineup build`: the signed, deterministic bundle of a project."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from lineup_build.cli._common import envelope, find_project
from lineup_build.cli._options import JsonOpt, PathArg, SandboxOpt

__all__ = ["register"]


def build(
    path: PathArg = None,
    key: Annotated[Path | None, typer.Option(help="PKCS#8 PEM private key file.")] = None,
    dev_key: Annotated[
        bool,
        typer.Option(
            "--dev-key", help="Sign with the project's .lineup/ key (created on first use)."
        ),
    ] = False,
    out: Annotated[Path | None, typer.Option(help="Output folder (default: PATH/dist).")] = None,
    strict: Annotated[bool, typer.Option(help="Fail on warnings too.")] = False,
    sandbox: SandboxOpt = "best_effort",
    as_json: JsonOpt = False,
    max_manifest_bytes: Annotated[
        int | None,
        typer.Option(help="Allow a manifest.json up to N bytes (default 4 MiB, or [limits])."),
    ] = None,
    max_files: Annotated[
        int | None, typer.Option(help="Allow up to N files (default 10,000, or [limits]).")
    ] = None,
    max_total_bytes: Annotated[
        int | None,
        typer.Option(help="Allow up to N bytes of files in all (default 256 MiB, or [limits])."),
    ] = None,
) -> None:
    """Build the signed, deterministic bundle `dist/<scope>-<version>.lineup`."""
    from lineup_build.build import build_project
    from lineup_build.cli import _render
    from lineup_build.cli._fast import limit_values
    from lineup_sdk.sandbox import check_mode

    result = build_project(
        path if path is not None else find_project(),
        key_file=key,
        dev_key=dev_key,
        out_dir=out,
        strict=strict,
        sandbox=check_mode(sandbox),
        limits=limit_values(
            max_manifest_bytes=max_manifest_bytes,
            max_files=max_files,
            max_total_bytes=max_total_bytes,
        ),
    )
    if as_json:
        _render.emit_json(envelope(**result.to_dict()))
    else:
        _render.diagnostics(result.diagnostics)
        if result.ok and result.model is not None:
            app_info = result.model.app
            _render.tools_table(result.model.tools, f"{app_info.scope} {app_info.version}")
            if result.model.ui_actions:
                _render.actions_table(result.model.ui_actions, "UI Actions")
            _render.line("[green]built[/] {}", result.bundle)
            _render.line("manifest sha256 {} · key {}", result.manifest_sha256, result.key_id)
        else:
            _render.line("[red]rejected[/]: no bundle written")
    raise typer.Exit(0 if result.ok else 1)


def register(app: typer.Typer) -> None:
    """Add `lineup build` to the app."""
    app.command()(build)
