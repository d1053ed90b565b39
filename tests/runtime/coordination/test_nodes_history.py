"""Several nodes at any age (issue 36): what a node runs to register, to beat (taking a
lapsed node's sessions over) and to know its App sessions, and the Registry poll, are
bounded by what is pending or changed, never by history. The database holds 100,000 finished calls in 5,000 App sessions, all owned by
the node (`tests/history_kit.py`); every statement any psycopg connection ran while the
node opened and beat is explained again (`EXPLAIN ANALYZE`, in a transaction rolled back)
and the rows each plan node read are counted."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from lineup_build.trust import TrustStore
from lineup_runtime_lite.internals import engine_of
from tests.history_kit import HISTORY_TABLES, MAX_ROWS, add_history, add_pending, rows_read
from tests.runtime.coordination.nodes_kit import LEASE_S, node, until

HISTORY = 100_000
#: Statements worth explaining: reads and writes (not LISTEN, locks, notifications).
VERBS = ("SELECT", "UPDATE", "DELETE", "INSERT", "WITH")
SKIP = ("pg_notify", "pg_try_advisory_lock", "pg_advisory", "to_regclass", "txid_current")


@pytest.fixture()
def history_url(pg_url: str) -> str:
    from lineup_runtime_lite.store.postgres import PostgresStore

    store = PostgresStore(pg_url, node_id="n1")
    try:
        with store.transaction(fault_points=False) as db:
            add_history(db, HISTORY, owner="n1", marks=HISTORY)
            add_pending(db, owner="n1")
            # a node whose lease lapsed long ago, with one App session: taken over at once
            db.execute(
                "INSERT INTO nodes (node_id, epoch, lease_until) "
                "VALUES ('lost', 1, now() - interval '1 hour')"
            )
            db.execute(
                "INSERT INTO app_sessions (app_session_id, conversation_id, scope, version, "
                "created_ms) VALUES ('lost1', 'lostconv', 'todo', '1.0.0', 0)"
            )
            db.execute("INSERT INTO owners (app_session_id, node_id) VALUES ('lost1', 'lost')")
        for table in HISTORY_TABLES:
            store.db.execute(f"ANALYZE {table}")  # as autovacuum would have
    finally:
        store.close()
    return pg_url


@pytest.fixture()
def statements(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, Any]]]:
    """Every statement a psycopg cursor runs from now on, with its arguments."""
    seen: list[tuple[str, Any]] = []
    execute = psycopg.Cursor.execute

    def recording(self: Any, query: Any, params: Any = None, **kwargs: Any) -> Any:
        if isinstance(query, str):
            seen.append((query, params))
        return execute(self, query, params, **kwargs)

    monkeypatch.setattr(psycopg.Cursor, "execute", recording)
    yield seen


def _explained(url: str, seen: list[tuple[str, Any]]) -> dict[str, int]:
    """The rows each distinct statement on `owners` or `nodes` read, explained again now
    (writes rolled back)."""
    out: dict[str, int] = {}
    with psycopg.connect(url) as conn:
        for sql, params in seen:
            head = sql.lstrip().upper()
            if not head.startswith(VERBS) or any(s in sql for s in SKIP) or sql in out:
                continue
            if "owners" not in sql and "nodes" not in sql:  # the facts': test_pending_work
                continue
            with conn.transaction(force_rollback=True):
                row = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params).fetchone()
            assert row is not None
            plan = row[0] if not isinstance(row[0], str) else json.loads(row[0])
            out[sql] = rows_read(plan[0]["Plan"])
    return out


def test_a_node_opens_and_beats_reading_no_history(
    history_url: str, tmp_path: Path, trust: TrustStore, statements: list[tuple[str, Any]]
) -> None:
    rt = node(history_url, tmp_path, trust, "n1")
    try:
        beats = sum("DELETE FROM nodes" in sql for sql, _ in statements)
        until(  # a heartbeat after the registration's
            lambda: sum("DELETE FROM nodes" in sql for sql, _ in statements) > beats,
            what="a heartbeat",
        )
        assert rt.sessions("todo")  # the node serves the sessions it owns
    finally:
        rt.close()
    with psycopg.connect(history_url) as conn:
        taken = conn.execute("SELECT node_id FROM owners WHERE app_session_id='lost1'").fetchone()
    assert taken == ("n1",)  # the lapsed node's session, taken over
    assert any("UPDATE owners" in sql for sql, _ in statements)
    rows = _explained(history_url, statements)
    assert any("owners" in sql for sql in rows), "the node's statements were seen"
    heavy = {sql: n for sql, n in rows.items() if n > MAX_ROWS}
    assert not heavy, heavy


def test_the_registry_poll_reads_once_unless_something_changed(
    pg_url: str, tmp_path: Path, trust: TrustStore, todo_bundle: Path, pomodoro_bundle: Path
) -> None:
    """The nodes' poll (a lost `r:` wake-up covered) projects the Registry again only when
    the installed versions or the trust store changed: one read, not two per app."""
    from lineup_runtime_lite import AsyncRuntime

    def opened(name: str) -> Any:
        return AsyncRuntime.open(
            pg_url,
            trust=trust,
            apps_dir=tmp_path / f"apps-{name}",
            node_id=name,
            node_lease_s=LEASE_S,
        )

    async def main() -> None:
        a = await opened("a")
        b = await opened("b")
        try:
            await a.install(todo_bundle)
            engine = engine_of(a)
            assert "todo.add" in engine.registry
            store: Any = engine.store  # a PostgresStore: it counts its round trips
            for _ in range(3):
                before = store.round_trips
                assert await engine.poll_registry() is False
                assert store.round_trips - before == 1
            await b.install(pomodoro_bundle)  # a does not hear b's `r:` here: it polls
            assert await engine.poll_registry() is True
            assert "pomodoro.start" in engine.registry
            assert await engine.poll_registry() is False
        finally:
            await b.close()
            await a.close()

    asyncio.run(main())


def test_the_sessions_of_a_database_before_nodes_are_adopted_once(
    pg_url: str, tmp_path: Path, trust: TrustStore
) -> None:
    """A database one runtime served before nodes (no `owners` table) has its App sessions
    adopted by the first node that opens it, when the table is made — registration never
    looks for sessions of no node again."""
    from lineup_runtime_lite.store.postgres import PostgresStore

    store = PostgresStore(pg_url, node_id="n0")
    try:
        with store.transaction(fault_points=False) as db:
            add_history(db, 200, actions=0)
    finally:
        store.close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("DROP TABLE owners")
        conn.execute("DROP TABLE nodes")
    first = node(pg_url, tmp_path, trust, "n1")
    first.close()
    with psycopg.connect(pg_url) as conn:
        owned = conn.execute("SELECT node_id, count(*) FROM owners GROUP BY 1").fetchall()
        conn.execute(
            "INSERT INTO app_sessions (app_session_id, conversation_id, scope, "
            "version, created_ms) VALUES ('late', 'lconv', 'todo', '1.0.0', 0)"
        )
    assert owned == [("n1", 10)]
    again = node(pg_url, tmp_path, trust, "n2")  # the table stands: nothing adopted again
    again.close()
    with psycopg.connect(pg_url) as conn:
        late = conn.execute("SELECT count(*) FROM owners WHERE app_session_id='late'").fetchone()
    assert late == (0,)


def test_owned_sessions_are_looked_up_once_and_remembered_within_a_bound() -> None:
    from lineup_runtime_lite.coordination import OwnedSessions

    asked: list[str] = []

    def mine(sid: str) -> bool:
        asked.append(sid)
        return sid.startswith("m")

    owned = OwnedSessions(mine, limit=3)
    assert "m1" in owned and "o1" not in owned
    assert "m1" in owned and "o1" not in owned  # remembered: not asked again
    assert asked == ["m1", "o1"]
    owned.add(["o2"])  # made here or taken over: this node's without asking
    assert "o2" in owned and asked == ["m1", "o1"]
    assert "m2" in owned and len(owned) == 3  # the oldest answer ("m1") forgotten
    assert "m1" in owned and asked == ["m1", "o1", "m2", "m1"]
