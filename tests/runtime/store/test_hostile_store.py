"""A hostile or broken store (issue 10, SPEC 5 and 12): aliases cannot open a second
runtime, damaged files are `store_corrupt`, failing disks are `store_unavailable` with
nothing changed, and a retry converges."""

from __future__ import annotations

import hashlib
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from lineup_build.trust import TrustStore
from lineup_runtime_lite import Runtime, VirtualClock
from lineup_runtime_lite.internals import engine_of
from lineup_runtime_lite.store import faults
from lineup_sdk.errors import LineupError


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def open_code(db: Path, trust: TrustStore) -> str:
    with pytest.raises(LineupError) as exc:
        Runtime.open(db, trust=trust, clock=VirtualClock()).close()
    return exc.value.code


@pytest.fixture()
def used_db(tmp_path: Path, trust: TrustStore, probe_bundle: Path) -> Path:
    """A database with an installed app and some answered calls, closed."""
    db = tmp_path / "rt.db"
    with Runtime.open(db, trust=trust, clock=VirtualClock()) as rt:
        rt.install(probe_bundle)
        for i in range(30):
            rt.call(f"c{i}", f"conv{i}", "probe.peek", {})
    return db


# -- the lock belongs to the database file ----------------------------------------------
def test_a_symlink_alias_cannot_open_a_second_runtime(tmp_path: Path, trust: TrustStore) -> None:
    db = tmp_path / "rt.db"
    alias = tmp_path / "alias.db"
    with Runtime.open(db, trust=trust, clock=VirtualClock()):
        alias.symlink_to(db)
        assert open_code(alias, trust) == "runtime_locked"
    Runtime.open(alias, trust=trust, clock=VirtualClock()).close()  # released on close


def test_a_hard_link_alias_cannot_open_a_second_runtime(tmp_path: Path, trust: TrustStore) -> None:
    db = tmp_path / "rt.db"
    alias = tmp_path / "other-name.db"
    with Runtime.open(db, trust=trust, clock=VirtualClock()):
        os.link(db, alias)
        assert open_code(alias, trust) == "runtime_locked"
    with Runtime.open(alias, trust=trust, clock=VirtualClock()):
        assert open_code(db, trust) == "runtime_locked"


def test_a_relative_path_is_the_same_file(
    tmp_path: Path, trust: TrustStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    with Runtime.open(tmp_path / "rt.db", trust=trust, clock=VirtualClock()):
        assert open_code(Path("sub/../rt.db"), trust) == "runtime_locked"


# -- damaged files ------------------------------------------------------------------------
def test_garbage_is_store_corrupt_and_left_alone(tmp_path: Path, trust: TrustStore) -> None:
    db = tmp_path / "rt.db"
    db.write_bytes(os.urandom(3) + b"not a database at all" * 500)
    before = sha(db)
    assert open_code(db, trust) == "store_corrupt"
    assert sha(db) == before


def test_a_zeroed_file_is_store_corrupt(tmp_path: Path, trust: TrustStore) -> None:
    db = tmp_path / "rt.db"
    db.write_bytes(bytes(64 * 1024))
    assert open_code(db, trust) == "store_corrupt"
    assert db.read_bytes() == bytes(64 * 1024)


def test_a_truncated_database_is_store_corrupt(used_db: Path, trust: TrustStore) -> None:
    size = used_db.stat().st_size
    with open(used_db, "r+b") as fh:
        fh.truncate(size // 2)
    before = sha(used_db)
    assert open_code(used_db, trust) == "store_corrupt"
    assert sha(used_db) == before


def test_a_damaged_page_is_store_corrupt(used_db: Path, trust: TrustStore) -> None:
    data = bytearray(used_db.read_bytes())
    page = 4096
    for i in range(2 * page, min(len(data), 6 * page)):
        data[i] = 0xA5
    used_db.write_bytes(bytes(data))
    assert open_code(used_db, trust) == "store_corrupt"


def open_message(db: Path, trust: TrustStore) -> str:
    with pytest.raises(LineupError) as exc:
        Runtime.open(db, trust=trust, clock=VirtualClock()).close()
    assert exc.value.code == "store_corrupt"
    return exc.value.message


def marker(db: Path) -> list[tuple[str, str]]:
    con = sqlite3.connect(db)
    try:
        return list(con.execute("SELECT key, value FROM meta WHERE key='closed_clean'"))
    finally:
        con.close()


def test_a_clean_close_is_marked_and_an_open_clears_the_mark(
    used_db: Path, trust: TrustStore
) -> None:
    assert marker(used_db) == [("closed_clean", "1")]
    with Runtime.open(used_db, trust=trust, clock=VirtualClock()):
        assert marker(used_db) == []  # a crash from here on is an unclean close
    assert marker(used_db) == [("closed_clean", "1")]


def test_an_open_waits_for_no_fsync_and_commits_fully_afterwards(
    used_db: Path, trust: TrustStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Clearing the clean-close mark is the open's one write: it is not synced (the open
    never waits on the disk); every commit after it is FULL again."""
    said: list[str] = []
    real = sqlite3.connect

    def traced(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        con: sqlite3.Connection = real(*args, **kwargs)
        con.set_trace_callback(said.append)
        return con

    monkeypatch.setattr(sqlite3, "connect", traced)
    with Runtime.open(used_db, trust=trust, clock=VirtualClock()) as rt:
        cleared = next(i for i, s in enumerate(said) if s.startswith("DELETE FROM meta"))
        pragmas = [s for s in said[:cleared] if s.startswith("PRAGMA synchronous")]
        assert pragmas[-1] == "PRAGMA synchronous=NORMAL", said
        assert "PRAGMA synchronous=FULL" in said[cleared:], said
        (level,) = engine_of(rt).store.db.execute("PRAGMA synchronous").fetchone()
        assert level == 2  # FULL
    assert marker(used_db) == [("closed_clean", "1")]


@pytest.mark.parametrize("clean", [True, False], ids=["clean-close", "unclean-close"])
def test_which_check_finds_a_damaged_page(used_db: Path, trust: TrustStore, clean: bool) -> None:
    """After a clean close the bounded check reads the root pages (here one no read at open
    touches); after an unclean one the whole-file `quick_check` runs."""
    con = sqlite3.connect(used_db)
    (root,) = con.execute("SELECT rootpage FROM sqlite_master WHERE name='host_events'").fetchone()
    if not clean:
        con.execute("DELETE FROM meta WHERE key='closed_clean'")
        con.commit()
    con.close()
    data = bytearray(used_db.read_bytes())
    for i in range((root - 1) * 4096, root * 4096):
        data[i] = 0xA5
    used_db.write_bytes(bytes(data))
    expected = "is not a b-tree page" if clean else "is damaged"
    assert expected in open_message(used_db, trust)


def test_a_truncated_file_is_seen_without_reading_it_whole(
    used_db: Path, trust: TrustStore
) -> None:
    with open(used_db, "r+b") as fh:
        fh.truncate(used_db.stat().st_size - 4096)
    assert "truncated" in open_message(used_db, trust)


def test_another_sqlite_database_is_store_corrupt(tmp_path: Path, trust: TrustStore) -> None:
    db = tmp_path / "theirs.db"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE precious (x)")
    con.execute("INSERT INTO precious VALUES (1)")
    con.commit()
    con.close()
    before = sha(db)
    assert open_code(db, trust) == "store_corrupt"
    assert sha(db) == before


@pytest.mark.parametrize("kind", ["fifo", "folder", "device"])
def test_a_database_path_that_is_not_a_regular_file(
    tmp_path: Path, trust: TrustStore, kind: str
) -> None:
    db = tmp_path / "rt.db"
    if kind == "fifo":
        os.mkfifo(db)
    elif kind == "folder":
        db.mkdir()
    else:
        db.symlink_to("/dev/null")
    assert open_code(db, trust) == "store_corrupt"


# -- failing disks -----------------------------------------------------------------------
def counts(rt: Runtime) -> dict[str, int]:
    return {table: len(rows) for table, rows in rt.store_dump().items()}


@pytest.mark.parametrize("mode", ["full", "ioerror", "readonly"])
@pytest.mark.parametrize("point", ["commit.before", "commit.after_write"])
def test_a_failing_disk_is_store_unavailable_and_a_retry_converges(
    tmp_path: Path, trust: TrustStore, probe_bundle: Path, mode: str, point: str
) -> None:
    with Runtime.open(tmp_path / "rt.db", trust=trust, clock=VirtualClock()) as rt:
        rt.install(probe_bundle)
        before = rt.store_dump()
        faults.arm(point, mode)
        try:
            with pytest.raises(LineupError) as exc:
                rt.call("c1", "conv", "probe.peek", {})
        finally:
            faults.disarm()
        assert exc.value.code == "store_unavailable"
        assert exc.value.hint
        assert rt.store_dump() == before  # rolled back: no call, receipt or outbox row
        assert rt.outbox.fetch(10) == []  # nothing sent
        msg = rt.call("c1", "conv", "probe.peek", {})  # the same call, retried
        assert msg["error"]["code"] == "app_not_running"
        after = counts(rt)
        assert (after["calls"], after["receipts"], after["outbox"]) == (1, 1, 1)
        assert rt.call("c1", "conv", "probe.peek", {}) == msg  # and now idempotent


def test_a_real_full_disk_at_install_changes_nothing(
    tmp_path: Path, trust: TrustStore, probe_bundle: Path
) -> None:
    with Runtime.open(tmp_path / "rt.db", trust=trust, clock=VirtualClock()) as rt:
        db: Any = engine_of(rt).store.db
        rt._call_sync(lambda: db.execute("PRAGMA wal_checkpoint(TRUNCATE)"))
        pages = rt._call_sync(lambda: db.execute("PRAGMA page_count").fetchone()[0])
        rt._call_sync(lambda: db.execute(f"PRAGMA max_page_count={pages}"))
        before = rt.store_dump()
        with pytest.raises(LineupError) as exc:
            rt.install(probe_bundle)
        assert exc.value.code == "store_unavailable"
        assert rt.store_dump() == before
        rt._call_sync(lambda: db.execute("PRAGMA max_page_count=1073741823"))
        rt.install(probe_bundle)
        assert [a["scope"] for a in rt.apps()] == ["probe"]


def test_a_read_only_database_file_is_store_unavailable(
    used_db: Path, trust: TrustStore, probe_bundle: Path
) -> None:
    uri_ro: Any = sqlite3.connect(f"file:{used_db}?mode=ro", uri=True)
    with pytest.raises(sqlite3.OperationalError):
        uri_ro.execute("CREATE TABLE x (y)")  # what a read-only file system answers
    uri_ro.close()
    with Runtime.open(used_db, trust=trust, clock=VirtualClock()) as rt:
        before = rt.store_dump()
        faults.arm("commit.before", "readonly")
        try:
            with pytest.raises(LineupError) as exc:
                rt.uninstall("probe")
        finally:
            faults.disarm()
        assert exc.value.code == "store_unavailable"
        assert rt.store_dump() == before
