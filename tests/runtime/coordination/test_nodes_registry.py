"""A node's registration on PostgreSQL without a runtime (`coordination.nodes.Nodes` on a
fresh database with the tables it needs): epochs grow, a live registration of the same id
refuses another, a clean leave lets a restart register at once, a lapsed node's sessions
are taken over (never a live one's), and the heartbeat
renews the lease, says whether the node is alone and reports a lost one."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

from lineup_runtime_lite.coordination.nodes import NODE_TABLES, Nodes, live_nodes
from lineup_sdk.errors import LineupError


def sql(url: str, query: str, *args: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(query, args)
        return [tuple(r) for r in cur.fetchall()] if cur.description else []


def until(check: Callable[[], Any], what: str) -> Any:
    """Poll for an event (the bound only ends a broken test)."""
    end = time.monotonic() + 30
    while not (got := check()):
        assert time.monotonic() < end, f"never happened: {what}"
        time.sleep(0.01)
    return got


@pytest.fixture()
def db(pg_url: str) -> Iterator[tuple[str, Callable[..., Nodes]]]:
    for stmt in NODE_TABLES:
        sql(pg_url, stmt)
    sql(pg_url, "CREATE TABLE app_sessions (app_session_id TEXT PRIMARY KEY)")
    made: list[Nodes] = []

    def nodes(node_id: str, lease_s: float = 30.0) -> Nodes:
        node = Nodes(
            lambda: psycopg.connect(pg_url, autocommit=True, application_name=node_id),
            node_id=node_id,
            lease_s=lease_s,
            schema=None,
            shown="db",
        )
        made.append(node)
        return node

    try:
        yield pg_url, nodes
    finally:
        for node in made:
            node.close()


def lease(url: str, node_id: str) -> tuple[int, bool] | None:
    rows = sql(url, "SELECT epoch, lease_until > now() FROM nodes WHERE node_id=%s", node_id)
    return (int(rows[0][0]), bool(rows[0][1])) if rows else None


def test_a_live_registration_refuses_another_until_it_leaves(
    db: tuple[str, Callable[..., Nodes]],
) -> None:
    url, nodes = db
    first = nodes("n1")
    epoch = first.register()
    assert lease(url, "n1") == (epoch, True) and first.epoch == epoch and not first.lost
    with psycopg.connect(url, autocommit=True) as conn:
        assert live_nodes(conn) == ["n1"]
    again = nodes("n1", lease_s=0.2)  # waits one (short) lease, then gives up
    with pytest.raises(LineupError) as exc:
        again.register()
    assert exc.value.code == "runtime_locked" and "n1" in exc.value.message
    assert lease(url, "n1") == (epoch, True)  # the first one's row stands
    first.leave()  # a clean close gives the lease up: a restart registers at once
    assert lease(url, "n1") == (epoch, False)
    second = again.register()
    assert second > epoch and lease(url, "n1") == (second, True)


def test_a_node_that_lost_its_lease_leaves_nothing_and_a_failing_leave_raises_nothing(
    db: tuple[str, Callable[..., Nodes]],
) -> None:
    url, nodes = db
    first = nodes("n1")
    epoch = first.register()
    first.lease_lost()  # another node took it over meanwhile: its row is not its to end
    first.leave()
    assert lease(url, "n1") == (epoch, True)
    other = nodes("n2")
    other.register()
    sql(url, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name='n2'")
    other.leave()  # its connection is gone: the lease lapses by itself, nothing raised
    assert lease(url, "n2") is not None


def owned(url: str, node_id: str) -> set[str]:
    return {
        str(r[0]) for r in sql(url, "SELECT app_session_id FROM owners WHERE node_id=%s", node_id)
    }


def test_a_lapsed_nodes_sessions_are_taken_over_never_a_live_ones(
    db: tuple[str, Callable[..., Nodes]],
) -> None:
    url, nodes = db
    a, b, c = nodes("n1"), nodes("n2"), nodes("n3")
    for node in (a, b, c):
        node.register()
    sql(url, "INSERT INTO owners VALUES ('s1', 'n1'), ('s2', 'n1'), ('s3', 'n3')")
    sql(url, "UPDATE nodes SET lease_until = now() - interval '1 second' WHERE node_id='n1'")
    b.rejoin()  # registering takes lapsed nodes' sessions over
    assert owned(url, "n2") == {"s1", "s2"} and owned(url, "n3") == {"s3"}  # a live one keeps
    assert [r[0] for r in sql(url, "SELECT node_id FROM nodes ORDER BY node_id")] == [
        "n2",
        "n3",
    ]


def test_the_heartbeat_renews_the_lease_knows_the_others_and_reports_a_lost_one(
    db: tuple[str, Callable[..., Nodes]],
) -> None:
    url, nodes = db
    a = nodes("n1", lease_s=1.0)
    a.register()
    lost: list[str] = []
    taken: list[list[str]] = []
    a.on_lost = lambda: lost.append("lost")
    a.on_taken = taken.append
    assert a.alone
    b = nodes("n2")
    b.register()
    # lapsed, but nobody took it over: the first beat renews it
    sql(url, "UPDATE nodes SET lease_until = now() - interval '1 second' WHERE node_id='n1'")
    # a node that stopped: its sessions are the heartbeat's to take over, and to report
    sql(url, "INSERT INTO nodes VALUES ('n9', 1, now() - interval '1 second', now())")
    sql(url, "INSERT INTO owners VALUES ('s9', 'n9')")
    a.start()
    until(lambda: not a.alone, "the heartbeat saw the other node")
    until(lambda: taken, "the takeover reported")
    assert taken == [["s9"]] and owned(url, "n1") == {"s9"}

    def renewed() -> bool:
        rows = sql(
            url, "SELECT lease_until > now() + interval '0.5 second' FROM nodes WHERE node_id='n1'"
        )
        return bool(rows and rows[0][0])

    until(renewed, "the lease renewed")
    sql(url, "DELETE FROM nodes WHERE node_id='n2'")
    until(lambda: a.alone, "the heartbeat saw it alone again")
    sql(url, "DELETE FROM nodes WHERE node_id='n1'")  # taken over elsewhere
    until(lambda: lost, "the lost lease reported")
    assert a.lost and lost == ["lost"]
