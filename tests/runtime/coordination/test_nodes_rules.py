"""The rules of several nodes that an outside mutation audit could break without a test
failing (issue 33, "Tests round 3 left out"): each test here fails when its rule is broken
by a one-line change (named in each docstring).

The lease is broken by hand in the database (as a takeover, a lapse or a restart with the
same id would leave it) right before the write, with a lease long enough (30 s) that no
heartbeat runs in between: the interleaving is staged, not timed.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from lineup_build.build import build_project
from lineup_build.init import init_project
from lineup_build.signing import SigningKey
from lineup_build.trust import TrustStore
from lineup_runtime_lite import HostSimulator, Runtime, VirtualClock
from lineup_runtime_lite.coordination.nodes import Nodes
from lineup_runtime_lite.core.port import LostRace
from lineup_runtime_lite.internals import engine_of
from lineup_runtime_lite.store.database import open_database
from lineup_runtime_lite.store.postgres import PostgresStore
from lineup_sdk.errors import LineupError

LONG_LEASE_S = 30.0


def sql(url: str, query: str, *args: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(query, args)
        return [tuple(r) for r in cur.fetchall()] if cur.description else []


def until(check: Callable[[], Any], *, timeout: float = 30.0, what: str = "") -> Any:
    """Poll for an event (the timeout only bounds a broken test)."""
    end = time.monotonic() + timeout
    while not (got := check()):
        assert time.monotonic() < end, f"never happened: {what}"
        time.sleep(0.01)
    return got


@pytest.fixture
def lone(pg_url: str, tmp_path: Path, trust: TrustStore, probe_bundle: Path) -> Iterator[Runtime]:
    """One node, alone on its database, with the probe app and one acknowledged-able
    message in the outbox."""
    rt = Runtime.open(
        pg_url,
        trust=trust,
        clock=VirtualClock(),
        host=HostSimulator("manual"),
        apps_dir=tmp_path / "apps",
        node_id="n1",
        node_lease_s=LONG_LEASE_S,
    )
    try:
        rt.install(probe_bundle)
        rt.call("peek", "conv", "probe.peek", {})
        rt.settle()
        yield rt
    finally:
        rt.close()


def _nodes(rt: Runtime) -> Nodes:
    """The runtime's node (its store's coordination on PostgreSQL)."""
    node = engine_of(rt).store.coordination
    assert isinstance(node, Nodes)
    return node


def _registered(rt: Runtime, url: str) -> int:
    """Wait until the node holds a lease again (after a lost one: it registers again)."""
    node = _nodes(rt)

    def held() -> bool:
        if node.lost or rt._art._nodes.rejoining:
            return False
        rows = sql(url, "SELECT epoch FROM nodes WHERE node_id='n1' AND lease_until > now()")
        return rows == [(node.epoch,)]

    until(held, what="the node registered")
    return int(node.epoch)


def _refused(write: Callable[[], Any]) -> None:
    """Refused: the lease guard's answer (or, for a step queued while the node restarts
    after the loss, the store thread's; nothing written either way — the callers check)."""
    with pytest.raises(LineupError) as exc:
        write()
    assert exc.value.code == "store_unavailable", exc.value
    assert "lost its lease" in exc.value.message or "stopped" in exc.value.message, exc.value


def _unacked(url: str) -> int:
    return int(sql(url, "SELECT count(*) FROM outbox WHERE acked = 0")[0][0])


def test_a_node_that_lost_its_lease_commits_no_ack_install_uninstall_or_call(
    lone: Runtime, pg_url: str, todo_bundle: Path
) -> None:
    """One-line breaks caught: `PostgresStore._begin` without `if not held:
    self._lost_lease()` (ack, install, uninstall commit), and `pg_batch.run_pipelined` without
    `if guard.fetchone() is None: lost_lease()` (a call's batch commits)."""
    rt = lone

    def taken_over() -> None:  # another node's takeover deletes the row
        _registered(rt, pg_url)
        sql(pg_url, "DELETE FROM nodes WHERE node_id='n1'")

    ids = [m["id"] for m in rt.outbox.fetch(10)]
    assert ids and _unacked(pg_url) == len(ids)
    taken_over()
    _refused(lambda: rt.outbox.ack(ids))
    assert _unacked(pg_url) == len(ids)

    taken_over()
    _refused(lambda: rt.install(todo_bundle))
    assert sql(pg_url, "SELECT scope FROM app_versions WHERE scope='todo'") == []

    _registered(rt, pg_url)
    rt.install(todo_bundle)
    taken_over()
    _refused(lambda: rt.uninstall("todo"))
    assert sql(pg_url, "SELECT scope FROM apps WHERE scope='todo'") == [("todo",)]

    taken_over()
    _refused(lambda: rt.call("late", "conv", "probe.peek", {}))
    assert sql(pg_url, "SELECT call_id FROM calls WHERE call_id='late'") == []


def test_a_lone_node_paused_past_its_lease_writes_nothing(lone: Runtime, pg_url: str) -> None:
    """No other node takes over, so the row stays: only the lease's time refuses the
    write. One-line break caught: `LEASE_GUARD` without `AND lease_until > now()`."""
    ids = [m["id"] for m in lone.outbox.fetch(10)]
    _registered(lone, pg_url)
    sql(pg_url, "UPDATE nodes SET lease_until = now() - interval '1 second' WHERE node_id='n1'")
    _refused(lambda: lone.outbox.ack(ids))
    assert _unacked(pg_url) == len(ids)


def test_an_old_process_writes_nothing_after_a_restart_with_its_id(
    lone: Runtime, pg_url: str
) -> None:
    """A restart with the same id registers a newer epoch: the old process's guard no
    longer matches. One-line break caught: `LEASE_GUARD` comparing `epoch>=?`."""
    ids = [m["id"] for m in lone.outbox.fetch(10)]
    epoch = _registered(lone, pg_url)
    sql(pg_url, "UPDATE nodes SET epoch = %s WHERE node_id='n1'", epoch + 1000)
    _refused(lambda: lone.outbox.ack(ids))
    assert _unacked(pg_url) == len(ids)


def test_the_heartbeat_renews_the_lease_well_before_it_runs_out(pg_url: str) -> None:
    """Sampled for 2.5 leases, the time left never falls below 40% of the lease (renewed
    four times a lease, it stays above 75% but for scheduling delays). One-line break
    caught: `_heartbeat` with `period = self.lease_s` (the lease runs down to zero)."""
    lease = 1.0
    store = PostgresStore(pg_url, node_id="beat", lease_s=lease)
    try:
        store.coordination.start()
        lows: list[float] = []
        with psycopg.connect(pg_url, autocommit=True) as conn:
            end = time.monotonic() + 2.5 * lease
            while time.monotonic() < end:
                row = conn.execute(
                    "SELECT extract(epoch FROM lease_until - clock_timestamp()) FROM nodes "
                    "WHERE node_id='beat'"
                ).fetchone()
                assert row is not None
                lows.append(float(row[0]))
                time.sleep(0.02)
        assert min(lows) > 0.4 * lease, min(lows)
        assert not store.coordination.lost
    finally:
        store.close()


def test_a_guard_that_lost_its_race_in_a_pipelined_batch_stops_its_step(pg_url: str) -> None:
    """Two steps of one batch end the same thing; what the second writes after its guard
    is covered by no unique key (each step its own IM record id), so only the deferred
    guard check can stop it. One-line break caught: `_PgConnection.check_guards` without
    its `if any(cur.rowcount == 0 ...): raise LostRace()`."""
    store = open_database(pg_url)
    try:
        store.set_meta("focus", "running")

        def end(op: str) -> Callable[[Any], str]:
            def step(facts: Any) -> str:
                cur = store.db.execute(
                    "UPDATE meta SET value='ended' WHERE key='focus' AND value='running'"
                )
                facts._writes._guard(cur)
                store.db.execute(
                    "INSERT INTO im_records (operation_id, conversation_id, body, created_ms) "
                    "VALUES (?, 'c1', '{}', 0)",
                    (op,),
                )
                return op

            return step

        out = store.batch([end("op1"), end("op2")])
        assert out[0] == "op1" and isinstance(out[1], LostRace), out
        assert [tuple(r) for r in store.all("SELECT operation_id FROM im_records")] == [("op1",)]
    finally:
        store.close()


def test_a_call_waiting_on_a_non_owner_is_woken_by_the_final_s_notification(
    pg_url: str, tmp_path: Path, trust: TrustStore, probe_bundle: Path
) -> None:
    """n2 takes a call for n1's session and waits; n1 commits the final and tells n2
    (`c:<call_id>`), which answers at once instead of at its next poll (1 s). One-line
    break caught: `Writes._add_receipt` without its `tell(f"c:{call_id}")`."""

    def node(name: str) -> Runtime:
        return Runtime.open(
            pg_url,
            trust=trust,
            clock=VirtualClock(),
            host=HostSimulator("auto"),
            apps_dir=tmp_path / f"apps-{name}",
            node_id=name,
            node_lease_s=5.0,
        )

    n1 = node("n1")
    try:
        n1.install(probe_bundle)
        n1.call("up", "conv", "probe.echo", {"text": "up"})
        n1.settle()
        n2 = node("n2")
        try:
            until(lambda: not _nodes(n1).alone, what="n1 knows n2")
            heard: list[str] = []
            lease = _nodes(n2)
            wake = lease.on_wake

            def spy(payloads: list[str]) -> None:
                heard.extend(payloads)
                wake(payloads)

            lease.on_wake = spy
            for i in range(3):  # a node starved past its lease looks gone: then polling
                started = time.monotonic()
                msg = n2.call(f"x{i}", "conv", "probe.echo", {"text": "via-n2"})
                took = time.monotonic() - started
                assert msg["stage"] == "result" and msg["result"] == "via-n2", msg
                print(f"call through a non-owner answered in {took:.3f} s")
            # the notification may land just after a poll answered the call (under load)
            until(
                lambda: any(p.startswith("c:x") for p in heard),
                timeout=5,
                what="n2 told of a final",
            )
        finally:
            n2.close()
    finally:
        n1.close()


@pytest.fixture(scope="module")
def pomodoro_v2(tmp_path_factory: pytest.TempPathFactory, rt_key: SigningKey) -> Path:
    """Pomodoro 2.0.0 without `pomodoro.start`: a session pinned to 1.0.0 still has it."""
    root = tmp_path_factory.mktemp("pomo2") / "focus"
    init_project(root, template="pomodoro")
    toml = root / "lineup.toml"
    toml.write_text(toml.read_text().replace('version = "1.0.0"', 'version = "2.0.0"'))
    tools = next(root.glob("*/tools.py"))
    text = tools.read_text()
    start = text.index("tools.runtime_tool(\n")
    end = text.index("tools.runtime_tool(", start + 1)
    tools.write_text(text[:start] + text[end:])
    for scenario in (root / "scenarios").glob("*.toml"):
        scenario.unlink()
    shutil.rmtree(root / "tests", ignore_errors=True)
    result = build_project(root, signing_key=rt_key)
    assert result.ok and result.bundle is not None, [d.to_dict() for d in result.diagnostics]
    return result.bundle


@pytest.mark.store
def test_an_activation_step_uses_the_tools_of_the_session_s_pinned_version(
    db_target: str,
    tmp_path: Path,
    trust: TrustStore,
    pomodoro_bundle: Path,
    pomodoro_v2: Path,
) -> None:
    """A focus start waits on its activation in a session pinned to 1.0.0; 2.0.0 (without
    `pomodoro.start`) becomes current; the activation fails. The start is a runtime
    long-running tool of 1.0.0, so its final is a `not_started` result, not an error.
    One-line break caught: `steps._activation` taking `tools_of(session.scope,
    tx.app_version(session.scope))` (the current version's tools)."""
    rt = Runtime.open(
        db_target,
        trust=trust,
        clock=VirtualClock(),
        host=HostSimulator("manual"),
        apps_dir=tmp_path / "apps",
    )
    try:
        rt.install(pomodoro_bundle)
        first = rt.call("s1", "c1", "pomodoro.start", {"minutes": 5})
        assert first["stage"] == "accepted", first
        rt.settle()
        assert rt.install(pomodoro_v2).action == "upgraded"
        assert rt.host.event("activation_failed", conversation="c1", scope="pomodoro")
        rt.settle()
        (final,) = [m for m in rt.outbox.all() if m["call_id"] == "s1" and m["kind"] != "receipt"]
        assert final["kind"] == "result", final
        assert final["result"]["status"] == "not_started", final
        assert {s["version"] for s in rt.sessions()} == {"1.0.0"}
    finally:
        rt.close()
