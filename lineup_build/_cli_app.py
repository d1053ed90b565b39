"""The typer app: each command parses arguments, calls one library function, renders."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from lineup_build._cli_common import envelope, find_project, output, projects_for
from lineup_build._cli_fast import GLOBAL_FLAGS
from lineup_sdk import __version__

app = typer.Typer(
    name="lineup",
    help="LineUp SDK toolchain: declare MiniApp tools, build signed bundles, verify, run.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

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


def _version(value: bool) -> None:
    if value:
        typer.echo(f"lineup {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", "-V", callback=_version, is_eager=True, help="Show the version."),
    ] = False,
    verbose: Annotated[
        bool,
        typer.Option(*GLOBAL_FLAGS["verbose"].decls, help=GLOBAL_FLAGS["verbose"].help),
    ] = False,
    quiet: Annotated[
        bool, typer.Option(*GLOBAL_FLAGS["quiet"].decls, help=GLOBAL_FLAGS["quiet"].help)
    ] = False,
) -> None:
    """LineUp SDK toolchain."""
    if verbose and quiet:
        from lineup_sdk.errors import LineupError

        raise LineupError(
            "usage_invalid", "--verbose and --quiet contradict each other", exit_code=2
        )
    output.verbose = verbose
    output.quiet = quiet


@app.command()
def init(
    name: Annotated[Path, typer.Argument(help="Folder to create.")],
    template: Annotated[
        str, typer.Option("--template", "-t", help="blank, todo or pomodoro.")
    ] = "blank",
    scope: Annotated[str | None, typer.Option(help="App scope (default: from NAME).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Create a MiniApp project from a template."""
    from lineup_build import _render
    from lineup_build.init import init_project

    result = init_project(name, template=template, scope=scope)
    if as_json:
        _render.emit_json(envelope(True, **result.to_dict()))
        return
    _render.line(
        f"created [bold]{result.root}[/] from template [bold]{template}[/] "
        f"(scope [bold]{result.scope}[/], {len(result.files)} files)"
    )
    _render.line(f"next: lineup check {name}  ·  lineup build {name} --dev-key")


@app.command()
def check(
    paths: Annotated[
        list[Path] | None,
        typer.Argument(
            metavar="[PATH]...",
            help="Project folders, or files inside projects (each project is checked once; "
            "default: the project holding the working folder, found upward).",
        ),
    ] = None,
    strict: Annotated[bool, typer.Option(help="Fail on warnings too.")] = False,
    sandbox: SandboxOpt = "best_effort",
    as_json: JsonOpt = False,
) -> None:
    """Check declarations without building (fast; for editors and pre-commit)."""
    from lineup_build import _render
    from lineup_build.build import check_project
    from lineup_sdk.sandbox import check_mode

    mode = check_mode(sandbox)
    roots = projects_for(paths) if paths else [find_project()]
    results = [(root, check_project(root, sandbox=mode)) for root in roots]
    ok = all(result.ok(strict=strict) for _, result in results)
    if as_json:
        diags = [d.to_dict() for _, result in results for d in result.diagnostics]
        tools = [t["method"] for _, result in results for t in result.tools]
        projects = [
            {"path": str(root), "ok": result.ok(strict=strict), "tools": len(result.tools)}
            for root, result in results
        ]
        _render.emit_json(envelope(ok, diags, tools=tools, projects=projects))
    else:
        for root, result in results:
            _render.diagnostics(result.diagnostics)
            where = f"{root}: " if len(results) > 1 else ""
            if result.ok(strict=strict):
                _render.line(
                    f"{where}[green]ok[/]: {len(result.tools)} tools, {len(result.files)} files"
                )
            else:
                errors = sum(1 for d in result.diagnostics if d.severity == "error" or strict)
                _render.line(f"{where}[red]rejected[/]: {errors} problem(s)")
    raise typer.Exit(0 if ok else 1)


@app.command()
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
) -> None:
    """Build the signed, deterministic bundle `dist/<scope>-<version>.lineup`."""
    from lineup_build import _render
    from lineup_build.build import build_project
    from lineup_sdk.sandbox import check_mode

    result = build_project(
        path if path is not None else find_project(),
        key_file=key,
        dev_key=dev_key,
        out_dir=out,
        strict=strict,
        sandbox=check_mode(sandbox),
    )
    if as_json:
        _render.emit_json(envelope(**result.to_dict()))
    else:
        _render.diagnostics(result.diagnostics)
        if result.ok and result.model is not None:
            app_info = result.model.app
            _render.tools_table(result.model.tools, f"{app_info.scope} {app_info.version}")
            _render.line(f"[green]built[/] {result.bundle}")
            _render.line(f"manifest sha256 {result.manifest_sha256} · key {result.key_id}")
        else:
            _render.line("[red]rejected[/]: no bundle written")
    raise typer.Exit(0 if result.ok else 1)


@app.command()
def keygen(
    out: Annotated[Path, typer.Option(help="Folder for lineup-signing.pem and .pub.pem.")] = Path(
        "."
    ),
    as_json: JsonOpt = False,
) -> None:
    """Generate an Ed25519 signing key (passphrase from LINEUP_SIGNING_KEY_PASSPHRASE)."""
    from lineup_build import _render
    from lineup_build.signing import b64encode, write_keypair

    priv, pub, key = write_keypair(out)
    doc = envelope(
        True,
        private_key=str(priv),
        public_key=str(pub),
        key_id=key.key_id,
        public_key_b64=b64encode(key.public_raw),
    )
    if as_json:
        _render.emit_json(doc)
        return
    _render.kv_table(
        [
            ("private key", f"{priv} (mode 0600; keep it secret)"),
            ("public key", str(pub)),
            ("key id", key.key_id),
            ("trust it", f"lineup trust add {pub} --scope <scope>"),
        ]
    )


def _register_optional() -> None:
    """Commands that live in their own modules (verify/trust/inspect, run, serve, diff/docs,
    test/schema)."""
    import importlib

    for name in (
        "lineup_build._cli_verify",
        "lineup_build._cli_run",
        "lineup_build._cli_serve",
        "lineup_build._cli_diff",
        "lineup_build._cli_test",
    ):
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue
        module.register(app)


_register_optional()
