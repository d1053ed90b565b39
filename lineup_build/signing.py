"""Ed25519 keys and the domain-separated manifest signature (SPEC 4)."""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lineup_build.fsutil import no_duplicate_keys, reject_constant
from lineup_sdk.errors import LineupError

__all__ = [
    "ALGORITHM",
    "SIGNATURE_DOMAIN",
    "SigningKey",
    "b64decode_canonical",
    "b64encode",
    "generate_key",
    "is_weak_public_key",
    "key_id_of",
    "load_signing_key",
    "parse_signature",
    "sign_manifest",
    "verify_manifest_signature",
    "write_keypair",
]

ALGORITHM = "ed25519"
SIGNATURE_DOMAIN = b"lineup-manifest-v1\n"
PASSPHRASE_ENV = "LINEUP_SIGNING_KEY_PASSPHRASE"
KEY_ENV = "LINEUP_SIGNING_KEY"

# Small-order points of edwards25519 in their canonical and common non-canonical
# encodings: with such a public key a forged signature verifies on any message.
_P = 2**255 - 19
_SMALL_ORDER_Y = (
    0,
    1,
    _P - 1,
    2707385501144840649318225287225658788936804267575313519463743609750303402022,
    55188659117513257062467267217118295137698188065244968500265048394206261417927,
)


def _encodings() -> frozenset[bytes]:
    out = set()
    for y in _SMALL_ORDER_Y:
        for yy in (y, y + _P) if y + _P < 2**255 else (y,):
            for sign in (0, 1):
                out.add((yy | (sign << 255)).to_bytes(32, "little"))
    return frozenset(out)


_WEAK = _encodings()


def is_weak_public_key(raw: bytes) -> bool:
    """Whether a raw 32-byte Ed25519 public key is a small-order (weak) point."""
    return len(raw) != 32 or raw in _WEAK


def b64encode(data: bytes) -> str:
    """Standard RFC 4648 base64 with padding."""
    return base64.b64encode(data).decode("ascii")


def b64decode_canonical(text: Any) -> bytes | None:
    """Decode strict, canonical base64 (re-encoding must give the same text), else None."""
    if not isinstance(text, str) or not text.isascii():
        return None
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None
    return raw if b64encode(raw) == text else None


def key_id_of(public_raw: bytes) -> str:
    """Hex of the first 16 bytes of SHA-256 over the raw 32-byte public key."""
    return hashlib.sha256(public_raw).digest()[:16].hex()


@dataclass(frozen=True)
class SigningKey:
    """A loaded Ed25519 private key with its public half."""

    private: Any  # cryptography Ed25519PrivateKey, kept untyped to keep imports lazy
    public_raw: bytes

    @property
    def key_id(self) -> str:
        return key_id_of(self.public_raw)


def _raw_public(private: Any) -> bytes:
    from cryptography.hazmat.primitives import serialization

    raw: bytes = private.public_key().public_bytes(
        serialization.Encoding.Raw, serialization.PublicFormat.Raw
    )
    return raw


def generate_key() -> SigningKey:
    """A fresh Ed25519 key."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    private = Ed25519PrivateKey.generate()
    return SigningKey(private, _raw_public(private))


def key_from_seed(seed: bytes) -> SigningKey:
    """A deterministic key from a 32-byte seed (golden files and tests)."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    private = Ed25519PrivateKey.from_private_bytes(seed)
    return SigningKey(private, _raw_public(private))


def private_pem(key: SigningKey, passphrase: bytes | None = None) -> bytes:
    """PKCS#8 PEM of the private key, encrypted when a passphrase is given."""
    from cryptography.hazmat.primitives import serialization

    enc: Any = (
        serialization.BestAvailableEncryption(passphrase)
        if passphrase
        else serialization.NoEncryption()
    )
    pem: bytes = key.private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, enc
    )
    return pem


def public_pem(key: SigningKey) -> bytes:
    """SubjectPublicKeyInfo PEM of the public key."""
    from cryptography.hazmat.primitives import serialization

    pem: bytes = key.private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return pem


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.chmod(path, 0o600)


def write_keypair(
    out_dir: Path, *, name: str = "lineup-signing", force: bool = False
) -> tuple[Path, Path, SigningKey]:
    """Generate a key and write `NAME.pem` (0600) and `NAME.pub.pem` into `out_dir`.

    The private key is encrypted with `LINEUP_SIGNING_KEY_PASSPHRASE` when it is set.

    Raises:
        LineupError: `usage_invalid` when `out_dir` names a file; `key_exists` when it
            already holds a key of that name.
    """
    from lineup_build.fsutil import check_out_dir

    check_out_dir(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    priv_path, pub_path = out_dir / f"{name}.pem", out_dir / f"{name}.pub.pem"
    for p in (priv_path, pub_path):
        if p.exists() and not force:
            raise LineupError(
                "key_exists",
                f"{p} already exists",
                hint="choose another --out folder; keys are never overwritten",
                exit_code=2,
            )
        if p.exists():
            p.unlink()
    key = generate_key()
    passphrase = os.environ.get(PASSPHRASE_ENV)
    _write_private(priv_path, private_pem(key, passphrase.encode() if passphrase else None))
    pub_path.write_bytes(public_pem(key))
    return priv_path, pub_path, key


def load_signing_key(pem: bytes, *, source: str) -> SigningKey:
    """Load a PKCS#8 Ed25519 private key (passphrase from `LINEUP_SIGNING_KEY_PASSPHRASE`).

    Raises:
        LineupError: `signing_key_invalid` naming `source`.
    """
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    passphrase = os.environ.get(PASSPHRASE_ENV)
    try:
        private = serialization.load_pem_private_key(
            pem, password=passphrase.encode() if passphrase else None
        )
    except TypeError as exc:
        hint = (
            f"set {PASSPHRASE_ENV} to the key's passphrase"
            if "encrypted" in str(exc) or "password" in str(exc).lower()
            else None
        )
        raise LineupError("signing_key_invalid", f"{source}: {exc}", hint=hint) from None
    except ValueError as exc:
        raise LineupError(
            "signing_key_invalid",
            f"{source} is not a readable PEM private key (or the passphrase is wrong): {exc}",
        ) from None
    if not isinstance(private, Ed25519PrivateKey):
        raise LineupError(
            "signing_key_invalid",
            f"{source} is not an Ed25519 key",
            hint="generate one with `lineup keygen`",
        )
    return SigningKey(private, _raw_public(private))


def sign_manifest(key: SigningKey, manifest_bytes: bytes) -> bytes:
    """`manifest.sig` bytes over the domain-separated manifest bytes."""
    sig = key.private.sign(SIGNATURE_DOMAIN + manifest_bytes)
    doc = {"algorithm": ALGORITHM, "key_id": key.key_id, "signature": b64encode(sig)}
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode("ascii")


@dataclass(frozen=True)
class ParsedSignature:
    """The fields of a well-formed `manifest.sig`."""

    key_id: str
    signature: bytes


def parse_signature(sig_bytes: bytes) -> ParsedSignature:
    """Parse `manifest.sig` strictly.

    Raises:
        LineupError: `signature_invalid` for any malformed field.
    """

    def bad(msg: str) -> LineupError:
        return LineupError("signature_invalid", f"manifest.sig: {msg}")

    if len(sig_bytes) > 4096:
        raise bad("too large")
    try:
        doc = json.loads(
            sig_bytes.decode("utf-8"),
            object_pairs_hook=no_duplicate_keys,
            parse_constant=reject_constant,
        )
    except (UnicodeDecodeError, ValueError) as exc:
        raise bad(f"not strict JSON ({exc})") from None
    if not isinstance(doc, dict) or set(doc) != {"algorithm", "key_id", "signature"}:
        raise bad("must be an object with exactly algorithm, key_id, signature")
    if doc["algorithm"] != ALGORITHM:
        raise bad(f"algorithm {doc['algorithm']!r} is not {ALGORITHM!r}")
    kid = doc["key_id"]
    if not isinstance(kid, str) or len(kid) != 32 or any(c not in "0123456789abcdef" for c in kid):
        raise bad("key_id must be 32 lowercase hex characters")
    raw = b64decode_canonical(doc["signature"])
    if raw is None:
        raise bad("signature is not canonical base64")
    if len(raw) != 64:
        raise bad(f"signature is {len(raw)} bytes, not 64")
    return ParsedSignature(kid, raw)


def verify_manifest_signature(public_raw: bytes, signature: bytes, manifest_bytes: bytes) -> bool:
    """Whether `signature` is valid for the domain-separated manifest bytes."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    try:
        Ed25519PublicKey.from_public_bytes(public_raw).verify(
            signature, SIGNATURE_DOMAIN + manifest_bytes
        )
    except (InvalidSignature, ValueError):
        return False
    return True
