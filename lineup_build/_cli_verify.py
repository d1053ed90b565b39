"""`lineup verify`, `lineup inspect` and `lineup trust ...`: thin commands over the library."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

__all__ = ["register"]

JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document instead.")]
BundleArg = Annotated[Path, typer.Argument(help="The .lineup bundle file.")]
StoreOpt = Annotated[
    Path,
    typer.Option(
        "--store", envvar="LINEUP_TRUST_STORE", help="Trust store file (TOML).", show_default=True
    ),
]
DEFAULT_STORE = Path("trust.toml")
SandboxOpt = Annotated[
    str,
    typer.Option(
        "--sandbox",
        help="How to contain the source's import for --source: best_effort, required or off.",
    ),
]


def verify(
    bundle: BundleArg,
    trust: Annotated[Path, typer.Option("--trust", help="Trust store file (TOML).")],
    source: Annotated[
        Path | None,
        typer.Option("--source", help="Also fail unless a fresh build of DIR gives this manifest."),
    ] = None,
    sandbox: SandboxOpt = "best_effort",
    as_json: JsonOpt = False,
) -> None:
    """Verify a bundle: archive, signature, trust, manifest, files (runs no bundle code)."""
    from lineup_build import _render
    from lineup_build.trust import TrustStore
    from lineup_build.verify import check_bundle
    from lineup_sdk.sandbox import check_mode

    report = check_bundle(
        bundle, TrustStore.load(trust), source=source, sandbox=check_mode(sandbox)
    )
    if as_json:
        _render.emit_json(report.to_dict())
    else:
        _render.verify_report(report)
    raise typer.Exit(0 if report.ok else 1)


def inspect(
    bundle: BundleArg,
    trust: Annotated[
        Path | None, typer.Option("--trust", help="Also check the signature against this store.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Show a bundle's app, key id, tools and files without trusting or running it."""
    from lineup_build import _render
    from lineup_build.trust import TrustStore
    from lineup_build.verify import check_bundle

    report = check_bundle(bundle, TrustStore.load(trust) if trust else None)
    if as_json:
        _render.emit_json(report.to_dict())
    else:
        _render.inspect_report(report)
    raise typer.Exit(1 if report.problems else 0)


trust_app = typer.Typer(
    help="Edit and show the trust store of keys allowed to sign bundles.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


@trust_app.command("add")
def trust_add(
    pubkey: Annotated[str, typer.Argument(help="Public key: a PEM file, PEM text or base64.")],
    scope: Annotated[
        list[str], typer.Option("--scope", help="App scope the key may sign for ('*' = any).")
    ],
    label: Annotated[str | None, typer.Option(help="Who holds the key.")] = None,
    allow: Annotated[
        list[str] | None,
        typer.Option("--allow", help="A permission apps signed by the key may have (network)."),
    ] = None,
    store: StoreOpt = DEFAULT_STORE,
    as_json: JsonOpt = False,
) -> None:
    """Trust an Ed25519 public key for one or more app scopes (and, with --allow, the
    permissions its apps may ask for)."""
    from lineup_build import _render
    from lineup_build.trust import trust_add as add

    key = add(store, pubkey, scope, label, allow or [])
    doc = {"ok": True, "store": str(store), **_key_doc(key, "trusted")}
    if as_json:
        _render.emit_json(doc)
        return
    granted = f", allowing {', '.join(key.allow)}" if key.allow else ""
    _render.line(f"trusted [bold]{key.key_id}[/] for {', '.join(key.scopes)}{granted} in {store}")


@trust_app.command("revoke")
def trust_revoke(
    key_id: Annotated[str, typer.Argument(help="The key id to revoke (32 hex characters).")],
    store: StoreOpt = DEFAULT_STORE,
    as_json: JsonOpt = False,
) -> None:
    """Revoke a key id: bundles it signed stop verifying."""
    from lineup_build import _render
    from lineup_build.trust import trust_revoke as revoke

    known = revoke(store, key_id)
    if as_json:
        _render.emit_json({"ok": True, "store": str(store), "key_id": key_id, "known": known})
        return
    note = "" if known else " (not a trusted key in this store; revoked anyway)"
    _render.line(f"revoked [bold]{key_id}[/] in {store}{note}")


@trust_app.command("list")
def trust_list(store: StoreOpt = DEFAULT_STORE, as_json: JsonOpt = False) -> None:
    """List trusted and revoked keys."""
    from lineup_build import _render
    from lineup_build.trust import TrustStore

    ts = TrustStore.load(store)
    keys = sorted(ts.keys.values(), key=lambda k: k.key_id)
    doc = {
        "store": str(store),
        "keys": [_key_doc(k, "revoked" if k.key_id in ts.revoked else "trusted") for k in keys],
        "revoked": sorted(ts.revoked),
        "revoked_unknown": sorted(ts.revoked - set(ts.keys)),
    }
    if as_json:
        _render.emit_json(doc)
    else:
        _render.trust_keys(doc)


def _key_doc(key: Any, status: str) -> dict[str, Any]:
    from lineup_build.signing import b64encode

    return {
        "key_id": key.key_id,
        "public_key": b64encode(key.public_raw),
        "scopes": list(key.scopes),
        "allow": list(key.allow),
        "label": key.label,
        "status": status,
    }


def register(app: typer.Typer) -> None:
    """Add `verify`, `inspect` and the `trust` group to the `lineup` app."""
    app.command()(verify)
    app.command()(inspect)
    app.add_typer(trust_app, name="trust")
