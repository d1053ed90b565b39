"""The SQLite store: its schema version check, WAL and full sync, virtual time, the manifest
cache (one runtime per database and a failed transaction changing nothing run on both
engines in test_postgres_store.py)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from lineup_build.trust import TrustStore
from lineup_runtime_lite import Runtime, VirtualClock
from lineup_runtime_lite.store import Store
from lineup_sdk.errors import LineupError


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "rt.db"
    Store(db).close()
    con = sqlite3.connect(db)
    con.execute("UPDATE meta SET value='99' WHERE key='schema_version'")
    con.commit()
    con.close()
    with pytest.raises(LineupError) as exc:
        Store(db)
    assert exc.value.code == "store_schema_unsupported"


def test_wal_and_full_sync(tmp_path: Path) -> None:
    store = Store(tmp_path / "rt.db")
    try:
        assert store.one("PRAGMA journal_mode")[0] == "wal"  # type: ignore[index]
        assert store.one("PRAGMA synchronous")[0] == 2  # type: ignore[index]
    finally:
        store.close()


def test_virtual_time_persists_with_the_database(tmp_path: Path, trust: TrustStore) -> None:
    db = tmp_path / "rt.db"
    clock = VirtualClock()
    with Runtime.open(db, trust=trust, clock=clock):
        clock.advance(90_000)
    later = VirtualClock()
    with Runtime.open(db, trust=trust, clock=later):
        assert later.now_ms() == clock.now_ms()


def _manifest_bytes(version: str) -> bytes:
    doc = {
        "manifest_version": 1,
        "app": {"scope": "demo", "name": "Demo", "version": version, "entry": "demo_app"},
        "sdk": {"version": "0.1.0"},
        "tools": [],
        "files": [],
    }
    return json.dumps(doc).encode()


def test_a_stored_manifest_is_parsed_once_per_load() -> None:
    store = Store(":memory:")
    with store.transaction(fault_points=False):
        store.facts.add_version("demo", "1.0.0", _manifest_bytes("1.0.0"), "sha-a", "k", "d", 0)
    first = store.facts.manifest("demo", "1.0.0")
    assert first is not None and first.app.version == "1.0.0"
    assert store.facts.manifest("demo", "1.0.0") is first
    assert store.facts.manifest("demo", "2.0.0") is None
    with store.transaction(fault_points=False):  # other bytes under the same version
        store.db.execute("DELETE FROM app_versions")
        store.facts.add_version("demo", "1.0.0", _manifest_bytes("1.0.1"), "sha-b", "k", "d", 0)
    again = store.facts.manifest("demo", "1.0.0")
    assert again is not None and again.app.version == "1.0.1"
    store.close()
