"""The `view` capability of an MCP Apps View (SPEC 18.2): an opaque token that names one App
session — scope, App session, conversation, the version the session is pinned to — and its
expiry, signed with HMAC-SHA256 under a 32-byte key kept in the store (the same on every
node). Only the View holds it: it is in the `_meta` of a linked tool's answer, never in
`content` or `structuredContent`, and never an id the Agent could target."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from dataclasses import dataclass
from typing import Any

__all__ = ["VIEW_TTL_MS", "View", "mint", "verify"]

#: How long a view stays valid; every `lineup-surface-sync` answer carries a fresh one.
VIEW_TTL_MS = 24 * 3600 * 1000
#: Bounds what a request may make the server decode.
_MAX_TOKEN = 2048


@dataclass(frozen=True)
class View:
    """What a valid view names."""

    scope: str
    app_session_id: str
    conversation_id: str
    version: str
    expires_ms: int


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _mac(key: bytes, body: str) -> str:
    return _b64(hmac.new(key, b"lineup-view-v1\0" + body.encode("ascii"), hashlib.sha256).digest())


def mint(key: bytes, view: View) -> str:
    """The token of `view` under `key`."""
    payload = [view.scope, view.app_session_id, view.conversation_id, view.version]
    body = _b64(json.dumps([*payload, view.expires_ms], separators=(",", ":")).encode())
    return f"{body}.{_mac(key, body)}"


def verify(key: bytes, token: Any, now_ms: int) -> View | None:
    """The view a token names when it is well formed, signed under `key` and not expired at
    `now_ms`; None for anything else (missing, forged, altered, expired)."""
    if not isinstance(token, str) or not 0 < len(token) <= _MAX_TOKEN or token.count(".") != 1:
        return None
    body, mac = token.split(".")
    try:
        expected = _mac(key, body)
    except UnicodeEncodeError:
        return None
    if not hmac.compare_digest(expected.encode(), mac.encode("utf-8", "replace")):
        return None
    try:
        fields = json.loads(_unb64(body))
    except (ValueError, UnicodeDecodeError):
        return None
    if (
        not isinstance(fields, list)
        or len(fields) != 5
        or not all(isinstance(f, str) for f in fields[:4])
        or type(fields[4]) is not int
    ):
        return None
    scope, session, conversation, version, expires = fields
    if now_ms >= expires:
        return None
    return View(scope, session, conversation, version, expires)
