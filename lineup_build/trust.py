"""The trust store: which Ed25519 keys may sign bundles for which app scopes.

The store itself is data (parse, render, look up; no IO). Files are read and written only
by `TrustStore.load` and `TrustStore.save`, the edges. A TOML file:

    revoked = ["<key id>", ...]

    [[keys]]
    key_id = "<hex of the first 16 bytes of SHA-256 over the raw key>"
    public_key = "<base64 of the raw 32 bytes>"
    scopes = ["todo"]          # ["*"] for any scope
    label = "release key"      # optional
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lineup_build.fsutil import TomlTooDeep, atomic_write, parse_toml, read_regular
from lineup_build.signing import b64decode_canonical, b64encode, is_weak_public_key, key_id_of
from lineup_sdk.errors import LineupError

if TYPE_CHECKING:
    from lineup_build.model import Manifest

__all__ = [
    "PERMISSIONS",
    "TrustStore",
    "TrustedKey",
    "dev_trust",
    "load_or_new",
    "parse_public_key",
    "read_public_key",
    "trust_add",
    "trust_revoke",
]

_SCOPE = re.compile(r"(?:\*|[a-z][a-z0-9_]*)\Z")
#: The largest trust store read (SPEC 12).
MAX_TRUST_STORE_BYTES = 4 * 1024 * 1024
_KEY_ID = re.compile(r"[0-9a-f]{32}\Z")
_KEY_FIELDS = {"key_id", "public_key", "scopes", "label", "allow"}
#: Permissions a MiniApp may ask for in `[app.permissions]` (SPEC 8).
PERMISSIONS = ("network",)
_HEADER = "# LineUp trust store: keys allowed to sign bundles (edit with `lineup trust`).\n"


def _usage(message: str) -> LineupError:
    return LineupError("trust_argument_invalid", message, exit_code=2)


def _weak(key_id: str) -> LineupError:
    return LineupError(
        "weak_key", f"key {key_id} is a weak (small-order) Ed25519 key and is never trusted"
    )


@dataclass(frozen=True)
class TrustedKey:
    """One trusted public key.

    Attributes:
        key_id: `key_id_of(public_raw)`.
        public_raw: The raw 32-byte Ed25519 public key.
        scopes: App scopes the key may sign for; `"*"` means any.
        label: A human note (who holds the key).
    """

    key_id: str
    public_raw: bytes
    scopes: tuple[str, ...]
    label: str | None = None
    allow: tuple[str, ...] = ()

    def allows(self, scope: str) -> bool:
        """Whether this key may sign bundles for `scope`."""
        return "*" in self.scopes or scope in self.scopes

    def check_manifest(self, manifest: Manifest) -> None:
        """The key may sign this manifest: its scope and every permission it asks for.

        Raises:
            LineupError: `scope_not_allowed` or `permission_not_allowed`.
        """
        scope = manifest.app.scope
        if not self.allows(scope):
            raise LineupError(
                "scope_not_allowed",
                f"key {self.key_id} may not sign for scope {scope!r} "
                f"(allowed: {', '.join(self.scopes)})",
            )
        refused = [p for p in manifest.app.permissions if p not in self.allow]
        if refused:
            raise LineupError(
                "permission_not_allowed",
                f"{scope} asks for {', '.join(refused)}, which the trust store does not allow "
                f"key {self.key_id} to grant",
                hint=f"if you trust the app with it: lineup trust add KEY --scope {scope} "
                + " ".join(f"--allow {p}" for p in refused),
            )


def _check_key(key: TrustedKey) -> None:
    if is_weak_public_key(key.public_raw):
        raise _weak(key_id_of(key.public_raw))
    if key.key_id != key_id_of(key.public_raw):
        raise LineupError(
            "trust_store_invalid", f"key {key.key_id}: key_id does not match its public key"
        )
    if not key.scopes or any(not isinstance(s, str) or not _SCOPE.match(s) for s in key.scopes):
        raise LineupError(
            "trust_store_invalid", f"key {key.key_id}: scopes must be app scopes or '*'"
        )
    if any(p not in PERMISSIONS for p in key.allow):
        raise LineupError(
            "trust_store_invalid",
            f"key {key.key_id}: allow may hold only {', '.join(PERMISSIONS)}",
        )


def _check_allow(allow: list[str]) -> tuple[str, ...]:
    for p in allow:
        if p not in PERMISSIONS:
            raise _usage(f"--allow {p!r}: a permission is one of {', '.join(PERMISSIONS)}")
    return tuple(sorted(set(allow)))


def _check_scopes(scopes: list[str]) -> tuple[str, ...]:
    if not scopes:
        raise _usage("give at least one --scope (an app scope, or '*' for any)")
    for s in scopes:
        if not _SCOPE.match(s):
            raise _usage(f"scope {s!r} must be an app scope like 'todo', or '*'")
    return tuple(dict.fromkeys(scopes))


class TrustStore:
    """Trusted keys by key id, plus revoked key ids (revocation always wins)."""

    def __init__(self) -> None:
        self.keys: dict[str, TrustedKey] = {}
        self.revoked: set[str] = set()

    @classmethod
    def from_keys(cls, keys: list[TrustedKey], revoked: Iterable[str] = ()) -> TrustStore:
        """A store of `keys`.

        Raises:
            LineupError: `weak_key`, or `trust_store_invalid` for a wrong key id or scope.
        """
        store = cls()
        for key in keys:
            _check_key(key)
            store.keys[key.key_id] = key
        for kid in revoked:
            if not isinstance(kid, str) or not _KEY_ID.match(kid):
                raise LineupError("trust_store_invalid", f"revoked: {kid!r} is not a key id")
            store.revoked.add(kid)
        return store

    @classmethod
    def parse(cls, text: str, *, source: str = "trust store") -> TrustStore:
        """Parse trust store TOML (no IO).

        Raises:
            LineupError: `trust_store_invalid` naming the entry, or `weak_key`.
        """

        def bad(msg: str) -> LineupError:
            return LineupError("trust_store_invalid", f"{source}: {msg}")

        try:
            doc = parse_toml(text)
        except TomlTooDeep as exc:
            raise bad(str(exc)) from None
        except tomllib.TOMLDecodeError as exc:
            raise bad(f"not valid TOML ({exc})") from None
        unknown = set(doc) - {"keys", "revoked"}
        if unknown:
            raise bad(f"unknown top-level key(s) {sorted(unknown)}")
        raw_keys, revoked = doc.get("keys", []), doc.get("revoked", [])
        if not isinstance(raw_keys, list) or not isinstance(revoked, list):
            raise bad("`keys` must be an array of tables and `revoked` an array")
        keys: list[TrustedKey] = []
        for i, entry in enumerate(raw_keys):
            keys.append(_parse_key(entry, f"keys[{i}]", bad))
        if len({k.key_id for k in keys}) != len(keys):
            raise bad("the same key_id is listed twice")
        return cls.from_keys(keys, revoked)

    @classmethod
    def load(cls, path: Path) -> TrustStore:
        """Read and parse a trust store file.

        Raises:
            LineupError: `trust_store_invalid` (unreadable or malformed) or `weak_key`.
        """
        raw = read_regular(
            path,
            limit=MAX_TRUST_STORE_BYTES,
            code="trust_store_invalid",
            what="trust store",
            missing_hint=f"create it with `lineup trust add PUBKEY --scope SCOPE --trust {path}`"
            ", or pass --trust FILE naming an existing trust store",
        )
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise LineupError("trust_store_invalid", f"cannot read {path}: not UTF-8") from None
        return cls.parse(text, source=str(path))

    def dumps(self) -> str:
        """The store as TOML text (keys sorted by key id)."""
        lines = [_HEADER, f"revoked = [{', '.join(_toml_str(k) for k in sorted(self.revoked))}]\n"]
        for key in sorted(self.keys.values(), key=lambda k: k.key_id):
            lines.append("\n[[keys]]\n")
            lines.append(f"key_id = {_toml_str(key.key_id)}\n")
            lines.append(f"public_key = {_toml_str(b64encode(key.public_raw))}\n")
            lines.append(f"scopes = [{', '.join(_toml_str(s) for s in key.scopes)}]\n")
            if key.label is not None:
                lines.append(f"label = {_toml_str(key.label)}\n")
            if key.allow:
                lines.append(f"allow = [{', '.join(_toml_str(p) for p in key.allow)}]\n")
        return "".join(lines)

    def save(self, path: Path) -> None:
        """Write the store atomically (a temporary file in the same folder, then rename)."""
        atomic_write(path, [self.dumps().encode("utf-8")])

    def add(
        self,
        public_raw: bytes,
        scopes: list[str],
        label: str | None = None,
        allow: list[str] | None = None,
    ) -> TrustedKey:
        """Trust `public_raw` for `scopes`, granting the permissions in `allow`
        (replacing the key's earlier scopes, label and permissions).

        Raises:
            LineupError: `weak_key`, `key_revoked`, or `trust_argument_invalid`.
        """
        if len(public_raw) != 32:
            raise _usage(f"an Ed25519 public key is 32 bytes, not {len(public_raw)}")
        kid = key_id_of(public_raw)
        if is_weak_public_key(public_raw):
            raise _weak(kid)
        if kid in self.revoked:
            raise LineupError(
                "key_revoked",
                f"key {kid} is revoked in this trust store",
                hint="remove it from `revoked` by hand first if revoking it was a mistake",
            )
        key = TrustedKey(kid, public_raw, _check_scopes(scopes), label, _check_allow(allow or []))
        self.keys[kid] = key
        return key

    def revoke(self, key_id: str) -> None:
        """Revoke `key_id` (known or not: a key can be revoked before it is ever seen).

        Raises:
            LineupError: `trust_argument_invalid` for a malformed key id.
        """
        if not _KEY_ID.match(key_id):
            raise _usage(f"{key_id!r} is not a key id (32 lowercase hex characters)")
        self.revoked.add(key_id)

    def lookup(self, key_id: str) -> TrustedKey:
        """The trusted, unrevoked key named `key_id`.

        Raises:
            LineupError: `key_revoked` or `untrusted_key`.
        """
        if key_id in self.revoked:
            raise LineupError("key_revoked", f"the signing key {key_id} is revoked")
        key = self.keys.get(key_id)
        if key is None:
            raise LineupError("untrusted_key", f"the signing key {key_id} is not trusted")
        return key


def _parse_key(entry: Any, where: str, bad: Any) -> TrustedKey:
    if not isinstance(entry, dict):
        raise bad(f"{where} must be a table")
    if set(entry) - _KEY_FIELDS or not {"key_id", "public_key", "scopes"} <= set(entry):
        raise bad(f"{where} must have key_id, public_key, scopes and optionally label")
    raw = b64decode_canonical(entry["public_key"])
    if raw is None or len(raw) != 32:
        raise bad(f"{where}.public_key is not canonical base64 of 32 bytes")
    if is_weak_public_key(raw):
        raise _weak(key_id_of(raw))
    kid, scopes, label = entry["key_id"], entry["scopes"], entry.get("label")
    if not isinstance(kid, str) or kid != key_id_of(raw):
        raise bad(f"{where}.key_id does not match its public key (expected {key_id_of(raw)})")
    if not isinstance(scopes, list) or not scopes:
        raise bad(f"{where}.scopes must be a non-empty array")
    if any(not isinstance(s, str) or not _SCOPE.match(s) for s in scopes):
        raise bad(f"{where}.scopes must hold app scopes or '*'")
    if label is not None and not isinstance(label, str):
        raise bad(f"{where}.label must be a string")
    allow = entry.get("allow", [])
    if not isinstance(allow, list) or any(p not in PERMISSIONS for p in allow):
        raise bad(f"{where}.allow must be an array of permissions ({', '.join(PERMISSIONS)})")
    return TrustedKey(kid, raw, tuple(scopes), label, tuple(sorted(set(allow))))


def _toml_str(text: str) -> str:
    """A TOML basic string (escapes quotes, backslashes and every control character)."""
    out = ['"']
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def parse_public_key(text: str) -> bytes:
    """Raw 32 bytes from an Ed25519 public key given as PEM or canonical base64.

    Raises:
        LineupError: `trust_argument_invalid`.
    """
    stripped = text.strip()
    if stripped.startswith("-----BEGIN"):
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

        try:
            key = serialization.load_pem_public_key(stripped.encode("utf-8"))
        except (ValueError, TypeError) as exc:
            raise _usage(f"not a readable PEM public key: {exc}") from None
        if not isinstance(key, Ed25519PublicKey):
            raise _usage("the PEM public key is not an Ed25519 key")
        raw: bytes = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        return raw
    raw_b64 = b64decode_canonical(stripped)
    if raw_b64 is None or len(raw_b64) != 32:
        raise _usage("not a PEM public key nor canonical base64 of 32 raw bytes")
    return raw_b64


def read_public_key(arg: str) -> bytes:
    """`parse_public_key` of a file's text when `arg` names a file, else of `arg` itself.

    Raises:
        LineupError: `trust_argument_invalid`.
    """
    path = Path(arg)
    try:
        named = path.exists() or path.is_symlink()
    except OSError:  # e.g. a key's text too long to be a file name
        named = False
    try:
        if named:
            raw = read_regular(
                path, limit=64 * 1024, code="trust_argument_invalid", what="public key file"
            )
            return parse_public_key(raw.decode("utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise _usage(f"cannot read {arg}: {exc}") from None
    return parse_public_key(arg)


def dev_trust(public_raw: bytes, manifest: Manifest) -> TrustStore:
    """The trust `lineup run`/`test`/`serve` give a project folder's own dev key: its app's
    scope, and the permissions the project asks for (SPEC 8)."""
    store = TrustStore()
    store.add(public_raw, [manifest.app.scope], "project dev key", list(manifest.app.permissions))
    return store


def load_or_new(path: Path) -> TrustStore:
    """The store at `path`, or an empty one when the file does not exist yet.

    Raises:
        LineupError: `trust_store_invalid` or `weak_key` for an existing, bad file.
    """
    return TrustStore.load(path) if path.exists() else TrustStore()


def trust_add(
    path: Path,
    pubkey: str,
    scopes: list[str],
    label: str | None = None,
    allow: list[str] | None = None,
) -> TrustedKey:
    """`lineup trust add`: trust a key (PEM file, PEM text or base64) for `scopes`, granting
    the permissions in `allow`, and save the store.

    Raises:
        LineupError: `trust_argument_invalid`, `weak_key`, `key_revoked`,
            `trust_store_invalid`.
    """
    store = load_or_new(path)
    key = store.add(read_public_key(pubkey), scopes, label, allow)
    store.save(path)
    return key


def trust_revoke(path: Path, key_id: str) -> bool:
    """`lineup trust revoke`: add `key_id` to `revoked`; True if the store trusted it.

    Raises:
        LineupError: `trust_argument_invalid` or `trust_store_invalid`.
    """
    store = load_or_new(path)
    store.revoke(key_id)
    store.save(path)
    return key_id in store.keys
