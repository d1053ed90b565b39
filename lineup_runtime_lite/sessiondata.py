"""Session data: per `scope + app_session_id` JSON objects with revision CAS, and the
Surface's subscriptions (snapshot first, then strictly increasing revisions)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from typing import Any

from lineup_build.schemas import canonical_json
from lineup_sdk.context import Snapshot
from lineup_sdk.errors import LineupError

__all__ = ["MAX_SESSION_DATA", "Listener", "SubscriptionHub", "read", "replace"]

MAX_SESSION_DATA = 1024 * 1024
Listener = Callable[[str, Snapshot], None]


def read(db: sqlite3.Connection, scope: str, app_session_id: str) -> Snapshot:
    """The current snapshot; nothing stored is `Snapshot(None, 0)`."""
    row = db.execute(
        "SELECT revision, data FROM session_data WHERE scope=? AND app_session_id=?",
        (scope, app_session_id),
    ).fetchone()
    if row is None:
        return Snapshot(None, 0)
    return Snapshot(json.loads(row[1]), int(row[0]))


def replace(
    db: sqlite3.Connection, scope: str, app_session_id: str, data: Any, expected_revision: Any
) -> Snapshot:
    """CAS-replace inside the caller's transaction.

    Raises:
        LineupError: `session_data_invalid`, `session_data_too_large`,
            `session_data_revision_conflict`.
    """
    if not isinstance(data, dict):
        raise LineupError("session_data_invalid", "session data must be a JSON object")
    if not isinstance(expected_revision, int) or isinstance(expected_revision, bool):
        raise LineupError("session_data_invalid", "expected_revision must be an integer")
    try:
        blob = canonical_json(data)
    except (TypeError, ValueError) as exc:
        raise LineupError("session_data_invalid", f"session data is not JSON: {exc}") from None
    if len(blob) > MAX_SESSION_DATA:
        raise LineupError(
            "session_data_too_large", f"session data is {len(blob)} bytes; the limit is 1 MiB"
        )
    current = read(db, scope, app_session_id)
    if current.revision != expected_revision:
        raise LineupError(
            "session_data_revision_conflict",
            f"session data is at revision {current.revision}, not {expected_revision}",
        )
    new_rev = current.revision + 1
    db.execute(
        "INSERT INTO session_data (scope, app_session_id, revision, data) VALUES (?,?,?,?) "
        "ON CONFLICT(scope, app_session_id) DO UPDATE SET revision=excluded.revision, "
        "data=excluded.data",
        (scope, app_session_id, new_rev, blob.decode("utf-8")),
    )
    return Snapshot(json.loads(blob), new_rev)


class SubscriptionHub:
    """Surface listeners per `(scope, conversation_id)`; all calls happen on the loop thread,
    so registration and change frames share the session's serial order."""

    def __init__(self) -> None:
        self._subs: dict[tuple[str, str], dict[int, Listener]] = {}
        self._next = 0

    def add(self, key: tuple[str, str], listener: Listener, first: Snapshot) -> int:
        """Register and deliver the current snapshot as the first frame."""
        self._next += 1
        self._subs.setdefault(key, {})[self._next] = listener
        listener("session_data.snapshot", first)
        return self._next

    def remove(self, key: tuple[str, str], token: int) -> None:
        self._subs.get(key, {}).pop(token, None)

    def changed(self, key: tuple[str, str], snap: Snapshot) -> None:
        """Deliver a committed revision to every listener of `key`."""
        for listener in list(self._subs.get(key, {}).values()):
            try:
                listener("session_data.changed", snap)
            except Exception:  # a Surface listener never breaks the runtime
                continue
