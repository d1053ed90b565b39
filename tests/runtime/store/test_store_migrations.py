"""Store migrations: an older LineUp database is moved forward on open, never refused.

`fixtures/e258c37.db` was written by the code of commit `e258c37` (store schema 1) with
`fixtures/make_e258c37_db.py`, whose docstring says what it holds and how to remake it.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from lineup_build.trust import TrustStore
from lineup_runtime_lite import HostSimulator, Runtime, VirtualClock
from lineup_runtime_lite.api.clock import format_ts
from lineup_runtime_lite.internals import engine_of
from lineup_runtime_lite.store import SCHEMA_VERSION, Store
from lineup_runtime_lite.store.schema import MIGRATIONS
from lineup_sdk.errors import LineupError
from tests.faults import invariants
from tests.runtime.conftest import FIXTURES

FIXTURE = FIXTURES / "e258c37.db"
MIN = 60_000
START = VirtualClock().now_ms()  # 2026-01-01T00:00Z, where the generator started too

#: What the generator wrote: every call's method and its stored stages.
CALLS = {
    "t1": ("todo.add", ["accepted", "activation_ready", "result"]),
    "t2": ("todo.add", ["accepted", "result"]),
    "t3": ("todo.add", ["accepted", "result"]),
    "t4": ("todo.list", ["accepted", "result"]),
    "p1": ("pomodoro.start", ["accepted", "started"]),
    "i1": ("pomodoro.interrupt", ["result"]),
    "p2": ("pomodoro.start", ["accepted"]),
}


def _stages(rt: Runtime, call_id: str) -> list[str]:
    record = rt.call_record(call_id)
    assert record is not None, call_id
    return [m["stage"] for m in record["messages"]]


@pytest.fixture()
def old_db(tmp_path: Path) -> Path:
    db = tmp_path / "old.db"
    shutil.copyfile(FIXTURE, db)
    return db


def _schema(con: sqlite3.Connection) -> dict[str, Any]:
    """Every table's columns and every index's columns, as SQLite reports them."""
    out: dict[str, Any] = {}
    names = [
        r[0]
        for r in con.execute(
            "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%' "
            "ORDER BY name"
        )
    ]
    for table in names:
        cols = [tuple(r)[1:] for r in con.execute(f"PRAGMA table_info({table})")]
        indexes = sorted(
            (
                tuple(r)[2:],  # unique, origin, partial
                tuple(tuple(c)[2] for c in con.execute(f"PRAGMA index_info('{r[1]}')")),
            )
            for r in con.execute(f"PRAGMA index_list({table})")
        )
        out[table] = (cols, indexes)
    return out


def _version(db: Path) -> int:
    con = sqlite3.connect(db)
    try:
        return int(con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0])
    finally:
        con.close()


def test_the_fixture_is_schema_1(old_db: Path) -> None:
    assert _version(old_db) == 1 < SCHEMA_VERSION


def test_every_version_has_one_step() -> None:
    assert sorted(MIGRATIONS) == list(range(2, SCHEMA_VERSION + 1))


def test_a_migrated_database_has_exactly_the_schema_of_a_new_one(
    old_db: Path, tmp_path: Path
) -> None:
    Store(old_db).close()
    Store(tmp_path / "new.db").close()
    assert _version(old_db) == SCHEMA_VERSION == _version(tmp_path / "new.db")
    migrated, new = sqlite3.connect(old_db), sqlite3.connect(tmp_path / "new.db")
    try:
        assert _schema(migrated) == _schema(new)
    finally:
        migrated.close()
        new.close()


def test_a_migration_keeps_every_row_and_backfills_host_intents(old_db: Path) -> None:
    con = sqlite3.connect(old_db)
    before = {
        t: con.execute(f"SELECT * FROM {t} ORDER BY rowid").fetchall()
        for t in invariants.TABLES
        if t != "host_intents" and not t.startswith("ui_action")  # schema 5's tables
    }
    intents = con.execute("SELECT id, body, delivered FROM host_intents ORDER BY id").fetchall()
    con.close()
    Store(old_db).close()
    con = sqlite3.connect(old_db)
    try:
        for table, rows in before.items():
            assert con.execute(f"SELECT * FROM {table} ORDER BY rowid").fetchall() == rows, table
        after = con.execute(
            "SELECT id, body, delivered, instance, superseded FROM host_intents ORDER BY id"
        ).fetchall()
    finally:
        con.close()
    assert [(i, b, d) for i, b, d, _, _ in after] == intents
    assert [(inst, sup) for _, b, _, inst, sup in after] == [
        (json.loads(b)["instance"], 0) for _, b, _ in intents
    ]


def test_opening_a_migrated_database_again_changes_nothing(old_db: Path) -> None:
    Store(old_db).close()
    con = sqlite3.connect(old_db)
    first = con.execute("SELECT sql FROM sqlite_master ORDER BY name").fetchall()
    con.close()
    Store(old_db).close()
    con = sqlite3.connect(old_db)
    try:
        assert con.execute("SELECT sql FROM sqlite_master ORDER BY name").fetchall() == first
    finally:
        con.close()
    assert _version(old_db) == SCHEMA_VERSION


@pytest.mark.parametrize("version", ["0", "-1", str(SCHEMA_VERSION + 1), "99"])
def test_an_unknown_or_newer_schema_is_still_refused(old_db: Path, version: str) -> None:
    con = sqlite3.connect(old_db)
    con.execute("UPDATE meta SET value=? WHERE key='schema_version'", (version,))
    con.commit()
    con.close()
    with pytest.raises(LineupError) as exc:
        Store(old_db)
    assert exc.value.code == "store_schema_unsupported"
    assert _version(old_db) == int(version)  # refused before any write


def test_a_failed_migration_step_leaves_the_database_at_its_old_version(
    old_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = {**MIGRATIONS, SCHEMA_VERSION: (*MIGRATIONS[SCHEMA_VERSION], "SELECT nope")}
    monkeypatch.setattr("lineup_runtime_lite.store.sqlite.MIGRATIONS", broken)
    with pytest.raises(LineupError) as exc:
        Store(old_db)
    assert exc.value.code == "store_unavailable"
    monkeypatch.undo()
    assert _version(old_db) == SCHEMA_VERSION - 1
    con = sqlite3.connect(old_db)
    try:
        cols = [r[1] for r in con.execute("PRAGMA table_info(host_intents)")]
        dirs = [r[0] for r in con.execute("SELECT dir FROM app_versions")]
        indexes = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='index'")}
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    finally:
        con.close()
    assert "superseded" in cols  # the steps before the broken one stand
    assert dirs and not any(d.startswith("/") for d in dirs)
    assert "calls_queued" in indexes
    assert "ui_actions" in tables and "ui_actions_queued" in indexes
    assert "call_marks" not in tables  # the broken step (6) rolled back whole
    assert "call_marks_conversation" not in indexes
    Store(old_db).close()  # and the next open migrates it
    assert _version(old_db) == SCHEMA_VERSION


def test_todays_runtime_finds_everything_an_e258c37_runtime_wrote_and_continues(
    old_db: Path, trust: TrustStore, todo_bundle: Path
) -> None:
    clock = VirtualClock()
    host = HostSimulator("auto", fail_next=10**9)  # down at first: read before anything moves
    with Runtime.open(old_db, trust=trust, clock=clock, host=host) as rt:
        rt.settle()
        # every call, with its receipts and answers
        for call_id, (method, stages) in CALLS.items():
            record = rt.call_record(call_id)
            assert record is not None and record["method"] == method, call_id
            assert _stages(rt, call_id) == stages, call_id
        # the outbox, with the acks the old runtime committed
        assert [m["id"] for m in rt.outbox.fetch(2)] == ["t4:accepted", "p1:accepted"]
        # a repeated call_id still returns its stored answer; another use is a conflict
        again = rt.call("t1", "c1", "todo.add", {"title": "milk"})
        assert again["id"] == "t1:result" and again["result"]["count"] == 1
        conflict = rt.call("t1", "c1", "todo.add", {"title": "other"})
        assert conflict["error"]["code"] == "call_id_conflict"
        # the session and its session-data revisions
        snap = rt.surface("c1", "todo").get()
        assert snap.revision == 3 and snap.data is not None
        assert [i["title"] for i in snap.data["items"]] == ["milk", "eggs", "bread"]
        invariants.check(rt, host_down=True)

        # continue: the Host is back, c4's saved show intent reaches it and its focus starts
        host.fail_next = 0
        clock.advance(1_000)
        assert [i["conversation"] for i in host.intents] == ["c4"]
        assert _stages(rt, "p2") == ["accepted", "started"]
        # c2's Pomodoro, focusing since 00:00, completes when the clock passes its deadline
        (focus,) = rt.surface("c2", "pomodoro").operations()
        assert focus["state"] == "focusing" and focus["ends_at"] == format_ts(START + 25 * MIN)
        clock.advance(23 * MIN)
        assert _stages(rt, "p1") == ["accepted", "started"]
        clock.advance(2 * MIN)
        assert _stages(rt, "p1") == ["accepted", "started", "result"]
        result = rt.call_record("p1")["messages"][-1]["result"]  # type: ignore[index]
        assert result["status"] == "completed" and result["ended_at"] == focus["ends_at"]
        assert len(rt.im_records("c2")) == 1
        # new calls work: a new Pomodoro and its interrupt, and today's to-do build
        assert rt.call("p3", "c5", "pomodoro.start", {"minutes": 5})["stage"] == "accepted"
        rt.settle()
        assert _stages(rt, "p3") == ["accepted", "started"]
        stop = rt.call("i2", "c5", "pomodoro.interrupt", {})
        assert stop["result"]["status"] == "interrupted"
        installed = rt.install(todo_bundle, dev_build=True)
        assert installed.action == "upgraded"
        rt.call("t9", "c9", "todo.add", {"title": "tea"})
        rt.settle()
        assert _stages(rt, "t9") == ["accepted", "activation_ready", "result"]
        assert rt.surface("c9", "todo").get().revision == 1
        invariants.check(rt)


# -- schema 4 (the last before UI Actions) -> 5 ------------------------------------------------
#: Written by the code of commit `65799db` (store schema 4) with `fixtures/make_65799db_db.py`.
FIXTURE_4 = FIXTURES / "65799db.db"


def test_a_schema_4_database_gets_the_ui_action_tables_and_keeps_its_facts(
    tmp_path: Path, trust: TrustStore, rt_key: Any
) -> None:
    """SPEC 17's tables and indexes come with schema 5: a database a schema-4 LineUp wrote
    opens at 5 with every row kept, the same schema as a new one, and takes UI Actions."""
    from tests.runtime.conftest import APPS, build_app

    db = tmp_path / "old4.db"
    shutil.copyfile(FIXTURE_4, db)
    assert _version(db) == 4
    con = sqlite3.connect(db)
    tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    assert "ui_actions" not in tables
    before = {t: con.execute(f"SELECT * FROM {t} ORDER BY rowid").fetchall() for t in tables}
    con.close()
    Store(db).close()
    Store(tmp_path / "new.db").close()
    assert _version(db) == SCHEMA_VERSION >= 5
    migrated, new = sqlite3.connect(db), sqlite3.connect(tmp_path / "new.db")
    try:
        assert _schema(migrated) == _schema(new)
        for table, rows in before.items():
            if table != "meta":
                assert migrated.execute(f"SELECT * FROM {table} ORDER BY rowid").fetchall() == (
                    rows
                ), table
    finally:
        migrated.close()
        new.close()
    bundle = build_app(APPS / "queue", tmp_path / "queue", rt_key)
    with Runtime.open(db, trust=trust, clock=VirtualClock(), host=HostSimulator("manual")) as rt:
        assert rt.call("t1", "c1", "todo.add", {"title": "milk"})["id"] == "t1:result"
        assert rt.surface("c1", "todo").get().revision == 2
        dump = engine_of(rt).store.dump()
        assert dump["ui_actions"] == [] and dump["ui_action_clients"] == []
        # the old App session's seq counter goes on: an action there is not running (todo
        # declares none), and the new app's actions take the next seqs of their session
        with pytest.raises(LineupError) as exc:
            rt.surface("c1", "todo").act("todo.tick", {}, client_id="c", seq=1)
        assert exc.value.code == "unknown_action"
        rt.install(bundle)
        assert rt.call("q1", "c2", "queue.add", {"item": "a"})["stage"] == "accepted"
        rt.settle()
        out = rt.surface("c2", "queue").act("queue.push", {"item": "b"}, client_id="c", seq=1)
        assert out["revision"] == 2
        invariants.check(rt)


# -- schema 5 -> 6: call marks in a table of their own -------------------------------------------
def test_call_marks_move_from_meta_to_their_table(tmp_path: Path, trust: TrustStore) -> None:
    """Schema 6 (issue 36): the marks an older runtime kept as `call_mark:<mark>:<call_id>`
    meta rows move to `call_marks`, each with its call's conversation and time; a mark of a
    call the database does not hold is dropped, and no mark is left in `meta`. The database
    is the schema-4 fixture with the marks a schema-5 runtime wrote (`Runtime.marks.add`)."""
    db = tmp_path / "old5.db"
    shutil.copyfile(FIXTURE_4, db)
    con = sqlite3.connect(db)
    con.executemany(
        "INSERT INTO meta VALUES (?, '1')",
        [
            ("call_mark:mcp_task:t1",),
            ("call_mark:other:t1",),
            ("call_mark:mcp_task:t2",),
            ("call_mark:mcp_task:gone",),
            ("call_mark:a_b:t2",),
        ],
    )
    con.commit()
    con.close()
    with Runtime.open(db, trust=trust, clock=VirtualClock()) as rt:
        assert rt.marks.calls("mcp_task") == ["t1", "t2"]
        assert rt.marks.calls("mcp_task", "c1", after="t1") == ["t2"]
        assert rt.marks.calls("other") == ["t1"] and rt.marks.calls("a_b") == ["t2"]
        assert rt.marks.has("t2", "mcp_task") and not rt.marks.has("gone", "mcp_task")
    con = sqlite3.connect(db)
    try:
        rows = con.execute(
            "SELECT mark, call_id, conversation_id, created_ms FROM call_marks ORDER BY 1, 2"
        ).fetchall()
        left = con.execute("SELECT count(*) FROM meta WHERE key LIKE 'call_mark%'").fetchone()
    finally:
        con.close()
    assert rows == [
        ("a_b", "t2", "c1", START),
        ("mcp_task", "t1", "c1", START),
        ("mcp_task", "t2", "c1", START),
        ("other", "t1", "c1", START),
    ]
    assert left == (0,)
    assert _version(db) == SCHEMA_VERSION == 6
