"""`lineup verify`, `lineup inspect` and `lineup trust ...`: thin commands over the library."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

__all__ = ["register"]

from lineup_build._cli_common import TRUST_HELP, envelope, trust_for_writing, trust_store_path
from lineup_build._cli_fast import VERIFY_OPTIONS, run_verify

JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document instead.")]
BundleArg = Annotated[Path, typer.Argument(help="The .lineup bundle file.")]
TrustOpt = Annotated[Path | None, typer.Option("--trust", help=TRUST_HELP)]
#: The old spelling on `trust add/revoke/list`, kept working but no longer shown.
StoreAlias = Annotated[Path | None, typer.Option("--store", hidden=True)]


def _opt(name: str) -> Any:
    spec = VERIFY_OPTIONS[name]
    return typer.Option(*spec.decls, help=spec.help)


def verify(
    bundle: BundleArg,
    trust: Annotated[Path | None, _opt("trust")] = None,
    source: Annotated[Path | None, _opt("source")] = None,
    sandbox: Annotated[str, _opt("sandbox")] = "best_effort",
    as_json: Annotated[bool, _opt("as_json")] = False,
) -> None:
    """Verify a bundle: archive, signature, trust, manifest, files (runs no bundle code)."""
    raise typer.Exit(run_verify(bundle, trust, source, sandbox, as_json))


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
    from lineup_build import _render
    from lineup_build.trust import TrustStore
    from lineup_build.verify import check_bundle

    store = trust_store_path(trust, required=False)
    report = check_bundle(bundle, TrustStore.load(store) if store else None)
    if as_json:  # `ok`: the bundle could be inspected; `verified`: it also verified
        _render.emit_json({**report.to_dict(), "ok": not report.problems, "verified": report.ok})
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
    trust: TrustOpt = None,
    store_alias: StoreAlias = None,
    as_json: JsonOpt = False,
) -> None:
    """Trust an Ed25519 public key for one or more app scopes (and, with --allow, the
    permissions its apps may ask for)."""
    from lineup_build import _render
    from lineup_build.trust import trust_add as add

    store = trust_for_writing(trust or store_alias)
    key = add(store, pubkey, scope, label, allow or [])
    doc = envelope(True, store=str(store), **_key_doc(key, "trusted"))
    if as_json:
        _render.emit_json(doc)
        return
    granted = f", allowing {', '.join(key.allow)}" if key.allow else ""
    _render.line(f"trusted [bold]{key.key_id}[/] for {', '.join(key.scopes)}{granted} in {store}")


@trust_app.command("revoke")
def trust_revoke(
    key_id: Annotated[str, typer.Argument(help="The key id to revoke (32 hex characters).")],
    trust: TrustOpt = None,
    store_alias: StoreAlias = None,
    as_json: JsonOpt = False,
) -> None:
    """Revoke a key id: bundles it signed stop verifying."""
    from lineup_build import _render
    from lineup_build.trust import trust_revoke as revoke

    store = trust_for_writing(trust or store_alias)
    known = revoke(store, key_id)
    if as_json:
        _render.emit_json(envelope(True, store=str(store), key_id=key_id, known=known))
        return
    note = "" if known else " (not a trusted key in this store; revoked anyway)"
    _render.line(f"revoked [bold]{key_id}[/] in {store}{note}")


@trust_app.command("list")
def trust_list(
    trust: TrustOpt = None, store_alias: StoreAlias = None, as_json: JsonOpt = False
) -> None:
    """List trusted and revoked keys."""
    from lineup_build import _render
    from lineup_build.trust import TrustStore

    store = trust_store_path(trust or store_alias, required=True, why="list")
    assert store is not None
    ts = TrustStore.load(store)
    keys = sorted(ts.keys.values(), key=lambda k: k.key_id)
    doc = envelope(
        True,
        store=str(store),
        keys=[_key_doc(k, "revoked" if k.key_id in ts.revoked else "trusted") for k in keys],
        revoked=sorted(ts.revoked),
        revoked_unknown=sorted(ts.revoked - set(ts.keys)),
    )
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
