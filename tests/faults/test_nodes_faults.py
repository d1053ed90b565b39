"""A node lost (SPEC 15, "A node lost"): node A is a driver process, node B runs in this
process, both on one PostgreSQL database with a 1 s lease.

A owns ten conversations' App sessions; B sends them calls that A delivers (one in flight
each, one queued behind it). Then A is killed (SIGKILL) or stopped past its lease
(SIGSTOP, later SIGCONT): B takes the sessions over within 5 s of the lease's expiry, the
deliveries in flight end `delivery_interrupted`, the queued calls are delivered by B, and
nothing is lost or done twice; a stopped node that resumes can answer, write session data
or deliver nothing, and registers again.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest

from lineup_build.trust import TrustStore
from lineup_runtime_lite import HostSimulator, Runtime, VirtualClock
from lineup_runtime_lite.core.messages import AgentMessage
from tests.faults import invariants
from tests.faults.harness import DRIVER, ROOT

LEASE_S = 1.0
CONVERSATIONS = 10
FINAL = ("result", "error")


@dataclass
class Cluster:
    url: str
    a: subprocess.Popen[str]
    b: Runtime
    release: Path

    def sql(self, query: str, *args: Any) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.url, autocommit=True) as conn:
            return [tuple(r) for r in conn.execute(query, args).fetchall()]

    def owners(self) -> set[str]:
        return {str(r[0]) for r in self.sql("SELECT DISTINCT node_id FROM owners")}


def until(check: Any, *, timeout: float = 30.0, what: str = "") -> Any:
    """Poll for an event (the timeout only bounds a broken test)."""
    end = time.monotonic() + timeout
    while not (got := check()):
        assert time.monotonic() < end, f"never happened: {what}"
        time.sleep(0.01)
    return got


@pytest.fixture
def cluster(
    pg_url: str, tmp_path: Path, trust: TrustStore, flaky_bundle: Path
) -> Iterator[Cluster]:
    trust_file = tmp_path / "trust.toml"
    trust.save(trust_file)
    steps: list[dict[str, Any]] = [
        {"call": [f"up{i}", f"c{i}", "flaky.echo", {"text": "up"}]} for i in range(CONVERSATIONS)
    ]
    steps += [{"settle": True}, {"block": True}]
    plan = {
        "db": pg_url,
        "apps_dir": str(tmp_path / "apps-a"),
        "trust": str(trust_file),
        "bundles": {"flaky": str(flaky_bundle)},
        "node_id": "A",
        "lease_s": LEASE_S,
        "host": "auto",
        "steps": steps,
    }
    plan_file = tmp_path / "a.plan.json"
    plan_file.write_text(json.dumps(plan))
    a = subprocess.Popen(
        [sys.executable, str(DRIVER), str(plan_file)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        text=True,
        cwd=str(ROOT),
    )
    try:
        assert a.stdout is not None
        for line in a.stdout:  # A owns the ten sessions, each with a ready activation
            if json.loads(line).get("kind") == "block":
                break
        else:
            raise AssertionError(f"node A ended early: {a.stderr.read() if a.stderr else ''}")
        b = Runtime.open(
            pg_url,
            trust=trust,
            clock=VirtualClock(),
            host=HostSimulator("auto"),
            apps_dir=tmp_path / "apps-b",
            node_id="B",
            node_lease_s=LEASE_S,
        )
        try:
            yield Cluster(pg_url, a, b, tmp_path / "release")
        finally:
            b.close()
    finally:
        if a.poll() is None:
            os.kill(a.pid, signal.SIGCONT)
            a.kill()
        a.wait(timeout=30)
        for stream in (a.stdin, a.stdout, a.stderr):
            if stream is not None:
                stream.close()


def _load(c: Cluster, method: str, extra: dict[str, Any]) -> dict[str, Future[AgentMessage]]:
    """Through B: one call in flight on A per conversation (`method`), one queued behind
    it; returns once A has delivered the first and B's queue holds the second."""
    pool = ThreadPoolExecutor(2 * CONVERSATIONS)
    futures: dict[str, Future[AgentMessage]] = {}
    for i in range(CONVERSATIONS):
        params = {"path": str(c.release), **extra}
        if method == "flaky.wait_append":
            params["item"] = f"w{i}"
        futures[f"w{i}"] = pool.submit(c.b.call, f"w{i}", f"c{i}", method, params)
    until(
        lambda: c.sql("SELECT count(*) FROM calls WHERE state='delivered'")[0][0] == CONVERSATIONS,
        what="A delivering one call per conversation",
    )
    for i in range(CONVERSATIONS):
        futures[f"q{i}"] = pool.submit(c.b.call, f"q{i}", f"c{i}", "flaky.echo", {"text": f"q{i}"})
    until(
        lambda: c.sql("SELECT count(*) FROM calls WHERE state='queued'")[0][0] == CONVERSATIONS,
        what="one call queued behind each",
    )
    pool.shutdown(wait=False)
    return futures


def _check_taken_over(c: Cluster, futures: dict[str, Future[AgentMessage]]) -> float:
    """B answers everything: in flight → `delivery_interrupted`, queued → delivered by B;
    one final per call; returns the seconds from the lease's expiry to B owning it all."""
    took_at = until(lambda: c.owners() == {"B"} and time.monotonic(), what="B took over")
    for i in range(CONVERSATIONS):
        w = futures[f"w{i}"].result(timeout=30)
        assert w["stage"] == "error" and w["error"]["code"] == "delivery_interrupted", w
        q = futures[f"q{i}"].result(timeout=30)
        assert q["stage"] == "result" and q["result"] == f"q{i}", q
    finals = c.sql(
        "SELECT call_id, count(*) FROM receipts WHERE stage IN ('result','error') GROUP BY call_id"
    )
    assert all(n == 1 for _, n in finals), finals  # nothing answered twice
    assert {cid for cid, _ in finals} >= {f"w{i}" for i in range(CONVERSATIONS)}
    assert c.sql("SELECT count(*) FROM calls WHERE state IN ('queued','delivered')") == [(0,)]
    invariants.check_db(c.url)
    return float(took_at)


def test_a_node_killed_under_load_has_its_sessions_taken_over(cluster: Cluster) -> None:
    futures = _load(cluster, "flaky.wait", {})
    os.kill(cluster.a.pid, signal.SIGKILL)
    killed = time.monotonic()
    took = _check_taken_over(cluster, futures) - killed
    assert took < LEASE_S + 5, took  # within 5 s of the lease's expiry
    print(f"takeover after SIGKILL: {took:.2f} s (lease {LEASE_S} s)")
    # a replay of any call on B: its one stored final
    again = cluster.b.call("w0", "c0", "flaky.wait", {"path": str(cluster.release)})
    assert again["error"]["code"] == "delivery_interrupted"


def test_a_node_stopped_past_its_lease_cannot_answer_write_or_deliver_when_it_resumes(
    cluster: Cluster,
) -> None:
    futures = _load(cluster, "flaky.wait_append", {})
    os.kill(cluster.a.pid, signal.SIGSTOP)
    (epoch,) = cluster.sql("SELECT epoch FROM nodes WHERE node_id='A'")[0]
    _check_taken_over(cluster, futures)
    data_before = cluster.sql("SELECT app_session_id, revision, data FROM session_data ORDER BY 1")
    receipts_before = cluster.sql("SELECT count(*) FROM receipts")
    cluster.release.write_text("go")  # A's workers now finish: they answer a stopped node
    time.sleep(0.2)  # let them write into A's pipes
    os.kill(cluster.a.pid, signal.SIGCONT)
    # A finds its lease gone, stops and registers again with a new epoch
    until(
        lambda: [
            r for r in cluster.sql("SELECT epoch FROM nodes WHERE node_id='A'") if r[0] > epoch
        ],
        what="A registered again",
    )
    time.sleep(0.3)  # anything A still tried has reached the database by now
    assert (
        cluster.sql("SELECT app_session_id, revision, data FROM session_data ORDER BY 1")
        == data_before
    )
    assert cluster.sql("SELECT count(*) FROM receipts") == receipts_before
    assert cluster.owners() == {"B"}
    # the sessions go on, on B
    msg = cluster.b.call("after", "c0", "flaky.append", {"item": "x"})
    assert msg["stage"] == "result", msg


def test_the_stranded_call_race_is_closed_by_the_session_lock(
    pg_url: str, tmp_path: Path, trust: TrustStore, probe_bundle: Path
) -> None:
    """A call joining a `starting` activation's queue on one node while the other node
    fails that activation: staged with the session row held by the test, so both steps
    are in flight at once. Whichever commits first, the call is never left queued on a
    failed activation."""
    nodes = [
        Runtime.open(
            pg_url,
            trust=trust,
            clock=VirtualClock(),
            host=HostSimulator("manual"),
            apps_dir=tmp_path / f"apps-{name}",
            node_id=name,
            node_lease_s=LEASE_S,
        )
        for name in ("n1", "n2")
    ]
    n1, n2 = nodes
    try:
        n1.install(probe_bundle)
        first = n1.call("s0", "conv", "probe.fg", {})  # starting: waits for the Host
        assert first["stage"] == "accepted"
        with psycopg.connect(pg_url) as conn:
            row = conn.execute(
                "SELECT activation_id FROM activations WHERE state='starting'"
            ).fetchone()
            assert row is not None
            inst = row[0]
        holder = psycopg.connect(pg_url)
        try:
            holder.execute("SELECT 1 FROM app_sessions FOR UPDATE")  # the session, held
            out: dict[str, Any] = {}
            join = threading.Thread(
                target=lambda: out.update(join=n2.call("s1", "conv", "probe.fg", {}))
            )
            fail = threading.Thread(
                target=lambda: out.update(
                    fail=n1.host.event(
                        "activation_failed", conversation="conv", scope="probe", instance=inst
                    )
                )
            )
            join.start()
            fail.start()

            def staged() -> bool:  # both steps wait for the row, or one already committed
                with psycopg.connect(pg_url, autocommit=True) as watch:
                    row = watch.execute(
                        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type='Lock'"
                    ).fetchone()
                waiting = int(row[0]) if row else 0
                return waiting >= 2 or (waiting >= 1 and "fail" in out)

            until(staged, what="both steps in flight")
            holder.rollback()  # let them go
        finally:
            holder.close()
        join.join(timeout=30)
        fail.join(timeout=30)
        with psycopg.connect(pg_url) as conn:
            stranded = conn.execute(
                "SELECT c.call_id FROM calls c JOIN activations a ON a.activation_id=c.activation_id "
                "WHERE c.state='queued' AND a.state IN ('failed','cancelled')"
            ).fetchall()
        assert stranded == [], stranded
        record = n2.call_record("s1")
        assert record is not None
    finally:
        for rt in nodes:
            rt.close()
