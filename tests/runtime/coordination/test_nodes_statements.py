"""What a node adds to the facts' transactions (`coordination.nodes.Nodes`), and its
option checks, without a database server: the owner filter and a new session's owner run
on SQLite (the same SQL both engines run), the locks, wake-ups and notifications are
checked as the statements handed to the transaction. The lease, the epochs and the
takeovers on PostgreSQL are in test_nodes_rules.py and test_nodes.py."""

from __future__ import annotations

import socket
import sqlite3
from typing import Any

import pytest

from lineup_runtime_lite.coordination.nodes import (
    LEASE_GUARD,
    Nodes,
    channel_of,
    check_lease_s,
    check_node_id,
    default_node_id,
)
from lineup_sdk.errors import LineupError


def node(writing: bool = True, node_id: str = "n1") -> Nodes:
    def connect() -> Any:
        raise AssertionError("no connection is opened here")

    return Nodes(
        connect, node_id=node_id, lease_s=1.0, schema="s", shown="db", writing=lambda: writing
    )


def refused(check: Any, value: Any, named: str) -> None:
    with pytest.raises(LineupError) as exc:
        check(value)
    assert exc.value.code == "usage_invalid" and named in exc.value.message


def test_a_node_id_is_1_to_200_printable_characters() -> None:
    assert check_node_id("n") == "n"
    assert check_node_id("n" * 200) == "n" * 200
    for bad in ("", "n" * 201, None, 3, "tab\there", "nl\n"):
        refused(check_node_id, bad, "node_id")


def test_a_lease_is_0_2_to_3600_seconds_and_a_float() -> None:
    assert check_lease_s(0.2) == 0.2 and check_lease_s(3600) == 3600.0
    assert type(check_lease_s(1)) is float
    for bad in (0.19, 3600.5, 0, -1, True, "1", None):
        refused(check_lease_s, bad, "node_lease_s")


def test_the_default_node_id_is_the_host_and_the_apps_folder_clipped() -> None:
    assert default_node_id("/apps") == f"{socket.gethostname()}:/apps"[:200]
    long = default_node_id("/" + "a" * 500)
    assert len(long) == 200 and long.startswith(socket.gethostname() + ":/a")
    assert check_node_id(long) == long


def test_each_schema_has_its_own_channel_and_none_the_default_one() -> None:
    assert channel_of(None) == "lineup_wake"
    one, two = channel_of("a"), channel_of("b")
    assert one != two and one == channel_of("a")
    assert one.startswith("lineup_") and len(one) == len("lineup_") + 16
    assert node().channel == channel_of("s")


def _db(notified: list[tuple[str, str]] | None = None) -> sqlite3.Connection:
    """The tables the statements name, and `pg_notify` writing down what it is sent."""
    db = sqlite3.connect(":memory:")
    sent = notified if notified is not None else []
    db.create_function("pg_notify", 2, lambda channel, payload: sent.append((channel, payload)))
    db.execute("CREATE TABLE owners (app_session_id TEXT PRIMARY KEY, node_id TEXT NOT NULL)")
    db.execute("CREATE TABLE app_sessions (app_session_id TEXT, conversation_id TEXT, scope TEXT)")
    db.executemany(
        "INSERT INTO app_sessions VALUES (?, ?, ?)",
        [("s1", "c1", "a"), ("s2", "c2", "b"), ("s3", "c3", "a")],
    )
    db.execute("CREATE TABLE calls (call_id TEXT, app_session_id TEXT)")
    db.executemany("INSERT INTO owners VALUES (?, ?)", [("s1", "n1"), ("s2", "n2"), ("s3", "n1")])
    db.executemany(
        "INSERT INTO calls VALUES (?, ?)",
        [("c1", "s1"), ("c2", "s2"), ("c3", "s3"), ("c4", None), ("c5", "s9")],
    )
    return db


def test_the_owner_filter_keeps_this_nodes_sessions_and_with_or_none_the_sessionless() -> None:
    db = _db()

    def calls(nodes: Nodes, or_none: bool = False) -> list[str]:
        column = "calls.app_session_id"  # by default, a row of no session is not mine
        cond, args = nodes.mine(column, or_none=True) if or_none else nodes.mine(column)
        rows = db.execute(f"SELECT call_id FROM calls WHERE 1=1{cond} ORDER BY call_id", args)
        return [r[0] for r in rows]

    assert calls(node()) == ["c1", "c3"]
    assert calls(node(), or_none=True) == ["c1", "c3", "c4"]
    assert calls(node(node_id="n2")) == ["c2"]


def test_a_new_session_is_recorded_as_this_nodes() -> None:
    db = _db()
    for sql, args in node().owner("s4"):
        db.execute(sql, args)
    assert db.execute("SELECT node_id FROM owners WHERE app_session_id='s4'").fetchall() == [
        ("n1",)
    ]


def _locked(stmt: tuple[str, tuple[Any, ...]]) -> list[Any]:
    """The sessions a lock statement takes (run on SQLite, which has no `FOR UPDATE`)."""
    sql, args = stmt
    assert sql.endswith(" FOR UPDATE")
    return [r[0] for r in _db().execute(sql.removesuffix(" FOR UPDATE"), args)]


def test_a_step_locks_each_session_once_and_only_on_the_writer() -> None:
    reader = node(writing=False)
    assert reader.lock("app_session_id=?", ("s1",)) == ()
    nodes = node()
    (first,) = nodes.lock("app_session_id=?", ("s1",))
    assert _locked(first) == [1]  # `SELECT 1` of the session's row
    assert nodes.lock("app_session_id=?", ("s1",)) == ()  # locked already in this step
    assert len(nodes.lock("app_session_id=?", ("s2",))) == 1
    nodes.new_step()  # a rolled-back savepoint gave the locks back
    assert len(nodes.lock("app_session_id=?", ("s1",))) == 1


def test_a_batch_locks_its_sessions_in_one_order() -> None:
    nodes = node()
    assert nodes.lock_all([]) == ()
    (stmt,) = nodes.lock_all([("c2", "b"), ("c1", "a"), ("c2", "b")])
    assert stmt[1] == ("c1", "a", "c2", "b")  # each pair once, sorted
    assert _locked(stmt) == [1, 1]  # both sessions' rows
    assert "ORDER BY app_session_id" in stmt[0]  # one order: no deadlock between batches


def test_wake_ups_go_to_the_schemas_channel_and_finals_are_told_only_beside_others() -> None:
    nodes = node()
    notified: list[tuple[str, str]] = []
    db = _db(notified)

    def run(statements: Any) -> list[tuple[str, str]]:
        notified.clear()
        for sql, args in statements:
            db.execute(sql, args)
        return list(notified)

    assert nodes.wake([]) == ()
    assert run(nodes.wake(["s:1", "r:"])) == [(nodes.channel, "s:1"), (nodes.channel, "r:")]
    assert nodes.alone and nodes.tell("c:1") == ()  # no other node: nobody waits elsewhere
    nodes.alone = False
    assert run(nodes.tell("c:1")) == [(nodes.channel, "c:1")]


def test_the_lease_guard_names_this_node_and_its_epoch_and_a_lost_one_is_told() -> None:
    nodes = node()
    nodes.epoch = 42
    assert nodes.guard() == (LEASE_GUARD, ("n1", 42))
    told: list[str] = []
    nodes.on_lost = lambda: told.append("lost")
    nodes.lease_lost()
    assert nodes.lost and told == ["lost"]
