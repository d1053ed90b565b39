"""Work proportional to what is pending, not to history (issue 36): every statement a timer
tick, a pump, recovery and open run reads the pending rows, on SQLite and PostgreSQL.

The database holds 100,000 finished calls (`tests/history_kit.py`: with their receipts,
outbox items, App sessions, activations, Host intents and operations) and 100,000 finished
UI Actions (SPEC 17: the queue's reads see actions too) and a handful of pending facts. On SQLite each statement's `EXPLAIN QUERY PLAN` may not scan a table that
grows with history except through a partial index of pending rows, and the statement's
virtual-machine steps (a progress handler counts them) stay far below one per finished
call; on PostgreSQL `EXPLAIN ANALYZE` counts the rows each plan node read.
"""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from lineup_build.trust import TrustStore
from lineup_runtime_lite import Runtime, VirtualClock
from lineup_runtime_lite.store.facts import SqlFacts
from lineup_runtime_lite.store.sqlite import Store
from tests.history_kit import (
    HISTORY_TABLES,
    MAX_ROWS,
    PENDING,
    T0,
    add_history,
    add_pending,
    rows_read,
)

HISTORY = 100_000
#: The partial indexes holding only unfinished rows (a scan of one reads pending work).
PARTIAL = (
    "calls_queued",
    "calls_delivered",
    "activations_starting",
    "operations_focusing",
    "ui_actions_queued",
    "ui_actions_delivered",
)
#: Virtual-machine steps one statement may take (a scan of the history takes millions).
MAX_STEPS = 20_000

#: What a timer tick, a pump, recovery and open read, each with the pending rows it finds.
READS: dict[str, tuple[Callable[[SqlFacts], Any], Callable[[Any], Any] | None]] = {
    "sessions_to_pump": (lambda f: f.sessions_to_pump(), set),
    "delivered_calls": (lambda f: f.delivered_calls(), lambda r: {c.call_id for c in r}),
    "due_activations": (lambda f: f.due_activations(T0), set),
    "activations_to_drive": (lambda f: f.activations_to_drive(), set),
    "intent_heads": (lambda f: f.intent_heads(), lambda r: {i.instance for i in r}),
    "outbox_pending": (lambda f: f.outbox_pending(100), lambda r: {m["call_id"] for m in r}),
    "intents_pending": (lambda f: f.intents_pending(), None),
    # the dev Host's poll (`rt.outbox.after`): what follows the history's 200,000 messages
    "outbox_after": (
        lambda f: f.outbox_after(2 * HISTORY, 100),
        lambda r: {m["call_id"] for _, m in r},
    ),
    "due_operations": (lambda f: f.due_operations(T0 + 2_000_000), None),
    "next_deadline": (lambda f: f.next_deadline(), None),
    "delivered_of_session": (lambda f: f.delivered_calls("ps2"), None),
    "queue_head": (lambda f: f.queue_head("ps1"), None),
    "waiting_calls": (lambda f: f.waiting_calls("pa1"), None),
    "active_calls": (lambda f: f.active_calls("pconv1", ["pomodoro.start"]), None),
    "starting_trigger": (lambda f: f.starting_trigger("pconv4", ["todo.add"]), None),
    "focusing": (lambda f: f.focusing("pconv1"), None),
    "operations_of": (lambda f: f.operations_of("pconv1", "todo"), None),
    "im_records": (lambda f: f.im_records("pconv1"), None),
    "session_and_activation": (lambda f: f.session_and_activation("pconv1", "todo"), None),
    "call_activation": (lambda f: f.call_activation("pc1"), None),
    # the UI Actions' reads (SPEC 17)
    "delivered_actions": (
        lambda f: f.delivered_actions(),
        lambda r: {(a.app_session_id, a.seq) for a in r},
    ),
    "delivered_actions_of_session": (lambda f: f.delivered_actions("ps2"), None),
    "delivered_in": (lambda f: f.delivered_in("ps2"), None),
    "waiting_actions": (lambda f: f.waiting_actions("pa1"), None),
    "action": (lambda f: f.action("hs3", "hclient", 4), None),
    "client_mark": (lambda f: f.client_mark("hs3", "hclient"), None),
    "call_and_session": (lambda f: f.call_and_session("hc9", "hconv3", "todo"), None),
    # `lineup serve`'s MCP tasks (`Runtime.marks`): tasks/get and a tasks/list page
    "call_marked": (lambda f: f.call_marked("mcp_task", "hc7"), None),
    "marked_calls_page": (lambda f: f.marked_calls("mcp_task", "hconv2", None, 100), len),
    "marked_calls_after": (lambda f: f.marked_calls("mcp_task", "hconv2", "hc1", 100), len),
}
EXPECTED = {
    **PENDING,
    "outbox_pending": {"pc1"},
    "outbox_after": {"pc1"},
    "marked_calls_page": HISTORY // 5_000,  # 20 calls per conversation
    "marked_calls_after": HISTORY // 5_000 - 1,
}


class Recording:
    """A connection that records each statement (and its arguments) it runs."""

    def __init__(self, db: Any) -> None:
        self.db = db
        self.seen: list[tuple[str, tuple[Any, ...]]] = []

    def execute(self, sql: str, args: Sequence[Any] = ()) -> Any:
        self.seen.append((sql, tuple(args)))
        return self.db.execute(sql, args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.db, name)


def _history_scans(plan: list[str]) -> list[str]:
    """The plan lines that scan a history table other than through a partial index."""
    bad = []
    for line in plan:
        m = re.match(r"SCAN (\w+)(?: AS \w+)?(?: USING (?:COVERING )?INDEX (\w+))?", line)
        if m is None:
            continue
        table = m.group(1)
        if m.group(2) in PARTIAL:
            continue
        if table in HISTORY_TABLES or len(table) <= 2:  # an alias (`c`, `a`, `o`)
            bad.append(line)
    return bad


def _sqlite_plan(db: sqlite3.Connection, sql: str, args: Sequence[Any] = ()) -> list[str]:
    return [str(r[3]) for r in db.execute("EXPLAIN QUERY PLAN " + sql, tuple(args))]


@pytest.fixture(scope="module")
def history_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("history") / "history.db"
    Store(path).close()
    con = sqlite3.connect(path, isolation_level=None)
    con.execute("BEGIN")
    add_history(con, HISTORY, marks=HISTORY)
    add_pending(con)
    con.execute("COMMIT")
    con.close()
    return path


@pytest.mark.parametrize("name", list(READS))
def test_sqlite_reads_of_pending_work_do_not_grow_with_history(history_db: Path, name: str) -> None:
    read, shown = READS[name]
    store = Store(history_db)
    try:
        recording = Recording(store.db)
        facts = SqlFacts(recording)
        steps = [0]

        def count() -> int:
            steps[0] += 1000
            return 0

        store.db.set_progress_handler(count, 1000)
        found = read(facts)
        store.db.set_progress_handler(None, 0)
        assert recording.seen, name
        for sql, args in recording.seen:
            plan = _sqlite_plan(store.db, sql, args)
            assert not _history_scans(plan), (sql, plan)
        assert steps[0] <= MAX_STEPS, (name, steps[0])
        if name in EXPECTED and shown is not None:
            assert shown(found) == EXPECTED[name]
    finally:
        store.close()


def test_without_schema_4s_indexes_the_check_finds_the_scans(
    history_db: Path, tmp_path: Path
) -> None:
    """The rule's own check: on schema 3's indexes, the pump's read and the tick's deadline
    read scan the history (the shapes issue 36 measured at 124 ms per tick)."""
    copy = tmp_path / "v3.db"
    shutil.copyfile(history_db, copy)
    con = sqlite3.connect(copy)
    try:
        for (name,) in con.execute(
            "SELECT name FROM sqlite_master WHERE type='index' AND sql IS NOT NULL"
        ).fetchall():
            if name in PARTIAL:
                con.execute(f"DROP INDEX {name}")
        recording = Recording(con)
        facts = SqlFacts(recording)
        facts.sessions_to_pump()
        facts.due_activations(T0)
        for sql, args in recording.seen:
            assert _history_scans(_sqlite_plan(con, sql, args)), sql
    finally:
        con.close()


@pytest.fixture()
def traced(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every statement any SQLite connection opened from now on runs (expanded)."""
    seen: list[str] = []
    connect = sqlite3.connect

    def tracing(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        con: sqlite3.Connection = connect(*args, **kwargs)
        con.set_trace_callback(seen.append)
        return con

    monkeypatch.setattr(sqlite3, "connect", tracing)
    return seen


def test_open_recovery_and_a_tick_read_no_history(
    tmp_path: Path, todo_bundle: Path, trust: TrustStore, traced: list[str]
) -> None:
    """Every statement `Runtime.open` (recovery included) and a timer tick run, on a
    database of 100,000 finished calls and pending work of every kind."""
    db = tmp_path / "rt.db"
    with Runtime.open(db, trust=trust, clock=VirtualClock()) as rt:
        rt.install(todo_bundle)
    con = sqlite3.connect(db, isolation_level=None)
    (version,) = con.execute("SELECT version FROM apps WHERE scope='todo'").fetchone()
    con.execute("BEGIN")
    add_history(con, HISTORY, version=version)
    add_pending(con, version=version)
    con.execute("COMMIT")
    con.close()
    traced.clear()
    clock = VirtualClock()
    with Runtime.open(db, trust=trust, clock=clock) as rt:
        clock.advance(700_000)  # past pa4's deadline too
        rt.settle()
    verbs = ("SELECT", "UPDATE", "DELETE", "WITH")
    statements = sorted({s for s in traced if s.lstrip().upper().startswith(verbs)})
    assert any("UNION" in s for s in statements), "the pump's read ran"
    con = sqlite3.connect(db)
    try:
        for sql in statements:
            plan = _sqlite_plan(con, sql)
            assert not _history_scans(plan), (sql, plan)
        stages = {
            r[0]: json.loads(r[1])["stage"]
            for r in con.execute("SELECT call_id, body FROM receipts WHERE call_id LIKE 'p%'")
        }
    finally:
        con.close()
    assert set(stages) == {"pc1", "pc1b", "pc2", "pc3", "pc4"}  # every pending call ended


# -- PostgreSQL ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def pg_history(pg_server: Any) -> Iterator[Any]:
    from lineup_runtime_lite.store.postgres import PostgresStore
    from tests.pg_kit import fresh_database

    store = PostgresStore(fresh_database(pg_server), node_id="history-node")
    try:
        with store.transaction(fault_points=False) as db:
            add_history(db, HISTORY, owner="history-node", marks=HISTORY)
            add_pending(db, owner="history-node")
            # another node's pending work: this node's reads must not find it
            db.execute(
                "INSERT INTO app_sessions (app_session_id, conversation_id, scope, version, "
                "created_ms) VALUES ('px', 'pconvx', 'todo', '1.0.0', 0)"
            )
            db.execute("INSERT INTO owners (app_session_id, node_id) VALUES ('px', 'other')")
            db.execute(
                "INSERT INTO activations (activation_id, app_session_id, trigger_call_id, "
                "state, requires_foreground, deadline_ms, created_ms) "
                "VALUES ('pax', 'px', 'pcx', 'starting', 0, 0, 0)"
            )
            db.execute(
                "INSERT INTO calls (call_id, fingerprint, conversation_id, scope, method, "
                "params, app_session_id, activation_id, seq, state, created_ms) VALUES "
                "('pcx', 'f', 'pconvx', 'todo', 'todo.add', '{}', 'px', 'pax', 1, "
                "'delivered', 0)"
            )
        for table in HISTORY_TABLES:
            store.db.execute(f"ANALYZE {table}")  # as autovacuum would have
        yield store
    finally:
        store.close()


@pytest.mark.parametrize("name", list(READS))
def test_postgres_reads_of_pending_work_do_not_grow_with_history(
    pg_history: Any, name: str
) -> None:
    read, shown = READS[name]
    recording = Recording(pg_history.db)
    facts = SqlFacts(recording, pg_history.coordination)
    found = read(facts)
    assert recording.seen, name
    for sql, args in recording.seen:
        (row,) = pg_history.all("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, args)
        plan = row[0] if not isinstance(row[0], str) else json.loads(row[0])
        rows = rows_read(plan[0]["Plan"])
        assert rows <= MAX_ROWS, (sql, rows, json.dumps(plan, indent=1)[:3000])
    if name in EXPECTED and shown is not None:
        assert shown(found) == EXPECTED[name]


@pytest.mark.parametrize("start", [3, 4, 5])
def test_postgres_moves_an_older_database_to_6(pg_url: str, start: int) -> None:
    """Schema 4's indexes, schema 5's UI Action tables (SPEC 17) and schema 6's call marks
    have PostgreSQL twins: a database written at schema 3, 4 or 5 gets what it lacks on
    open, its facts kept and its call marks moved out of `meta`; one below the first
    PostgreSQL schema is refused."""
    import psycopg

    from lineup_runtime_lite.internals import V4_INDEXES, V5_INDEXES
    from lineup_runtime_lite.store.database import open_database
    from lineup_runtime_lite.store.schema import SCHEMA_VERSION
    from lineup_sdk.errors import LineupError

    assert SCHEMA_VERSION == 6
    names = [stmt.split(" ON ")[0].split()[-1] for stmt in (*V4_INDEXES, *V5_INDEXES)]
    store = open_database(pg_url, node_id="n1")
    try:
        with store.transaction(fault_points=False) as db:
            add_history(db, 40, owner="n1", actions=0)
    finally:
        store.close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"UPDATE meta SET value='{start}' WHERE key='schema_version'")
        if start == 3:
            for name in names[: len(V4_INDEXES)]:
                conn.execute(f"DROP INDEX {name}")
        if start < 5:
            conn.execute("DROP TABLE ui_actions")
            conn.execute("DROP TABLE ui_action_clients")
        conn.execute("DROP TABLE call_marks")
        for key in ("call_mark:mcp_task:hc3", "call_mark:mcp_task:hc1", "call_mark:x:nocall"):
            conn.execute("INSERT INTO meta VALUES (%s, '1')", (key,))
    store = open_database(pg_url, node_id="n1")
    try:
        assert store.meta("schema_version") == "6"
        found = {r[0] for r in store.all("SELECT indexname FROM pg_indexes")}
        assert set(names) | {"call_marks_conversation"} <= found
        assert store.one("SELECT count(*) FROM calls")[0] == 40
        assert store.all(
            "SELECT mark, call_id, conversation_id, created_ms FROM call_marks ORDER BY call_id"
        ) == [("mcp_task", "hc1", "hconv2", T0 + 1), ("mcp_task", "hc3", "hconv2", T0 + 3)]
        assert (
            store.one("SELECT count(*) FROM meta WHERE substr(key, 1, 10) = 'call_mark:'")[0] == 0
        )
        with store.transaction(fault_points=False) as db:  # the new tables take actions
            db.execute(
                "INSERT INTO ui_actions (app_session_id, seq, client_id, client_seq, name, "
                "params, fingerprint, activation_id, state, created_ms) "
                "VALUES ('hs1', 99, 'c', 1, 'todo.toggle', '{}', 'f', 'ha1', 'queued', 0)"
            )
        assert store.one("SELECT count(*) FROM ui_actions")[0] == 1
        assert "ui_action_clients" in store.dump()
    finally:
        store.close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("UPDATE meta SET value='2' WHERE key='schema_version'")
    with pytest.raises(LineupError) as exc:
        open_database(pg_url, node_id="n1")
    assert exc.value.code == "store_schema_unsupported"


def test_without_schema_5s_indexes_the_check_finds_the_action_scans(
    history_db: Path, tmp_path: Path
) -> None:
    """The rule's own check for the UI Actions' reads (SPEC 17): without their partial
    indexes (and the queue's), recovery's and the pump's reads of actions scan the 100,000
    finished ones."""
    copy = tmp_path / "no-v5.db"
    shutil.copyfile(history_db, copy)
    con = sqlite3.connect(copy)
    con.row_factory = sqlite3.Row
    try:
        for name in ("ui_actions_queued", "ui_actions_delivered", "ui_actions_queue"):
            con.execute(f"DROP INDEX {name}")
        recording = Recording(con)
        facts = SqlFacts(recording)
        facts.delivered_actions()
        facts.waiting_actions("pa1")
        facts.sessions_to_pump()
        for sql, args in recording.seen:
            assert _history_scans(_sqlite_plan(con, sql, args)), sql
    finally:
        con.close()
