"""`lineup trust add|revoke|list`: edit and show the trust store."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from lineup_build.cli._common import TRUST_HELP, envelope, trust_for_writing, trust_store_path
from lineup_build.cli._help import WholeSummaries
from lineup_build.cli._options import JsonOpt

__all__ = ["register"]

TrustOpt = Annotated[Path | None, typer.Option("--trust", help=TRUST_HELP)]
#: The old spelling on `trust add/revoke/list`, kept working but no longer shown.
StoreAlias = Annotated[Path | None, typer.Option("--store", hidden=True)]


trust_app = typer.Typer(
    help="Edit and show the trust store of keys allowed to sign bundles.",
    no_args_is_help=True,
    rich_markup_mode=None,
    cls=WholeSummaries,
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
    from lineup_build.cli import _render
    from lineup_build.trust import trust_add as add

    store = trust_for_writing(trust or store_alias)
    key = add(store, pubkey, scope, label, allow or [])
    doc = envelope(True, store=str(store), **_key_doc(key, "trusted"))
    if as_json:
        _render.emit_json(doc)
        return
    granted = f", allowing {', '.join(key.allow)}" if key.allow else ""
    _render.line(
        "trusted [bold]{}[/] for {}{} in {}", key.key_id, ", ".join(key.scopes), granted, store
    )


@trust_app.command("revoke")
def trust_revoke(
    key_id: Annotated[str, typer.Argument(help="The key id to revoke (32 hex characters).")],
    trust: TrustOpt = None,
    store_alias: StoreAlias = None,
    as_json: JsonOpt = False,
) -> None:
    """Revoke a key id: bundles it signed stop verifying."""
    from lineup_build.cli import _render
    from lineup_build.trust import trust_revoke as revoke

    store = trust_for_writing(trust or store_alias)
    known = revoke(store, key_id)
    if as_json:
        _render.emit_json(envelope(True, store=str(store), key_id=key_id, known=known))
        return
    note = "" if known else " (not a trusted key in this store; revoked anyway)"
    _render.line("revoked [bold]{}[/] in {}{}", key_id, store, note)


@trust_app.command("list")
def trust_list(
    trust: TrustOpt = None, store_alias: StoreAlias = None, as_json: JsonOpt = False
) -> None:
    """List trusted and revoked keys."""
    from lineup_build.cli import _render
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
    """Add the `lineup trust` group to the app."""
    app.add_typer(trust_app, name="trust")
