"""`lineup keygen`: a new Ed25519 signing key pair."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from lineup_build.cli._common import envelope
from lineup_build.cli._options import JsonOpt

__all__ = ["register"]


def keygen(
    out: Annotated[Path, typer.Option(help="Folder for lineup-signing.pem and .pub.pem.")] = Path(
        "."
    ),
    as_json: JsonOpt = False,
) -> None:
    """Generate an Ed25519 signing key (passphrase from LINEUP_SIGNING_KEY_PASSPHRASE)."""
    from lineup_build.cli import _render
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


def register(app: typer.Typer) -> None:
    """Add `lineup keygen` to the app."""
    app.command()(keygen)
