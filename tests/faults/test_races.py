"""Races between nodes are decisions, never database errors (SPEC 16.1): two processes
installing one bundle at the same moment converge (`installed` on one, `unchanged` on the
other), and two processes registering one node id at the same moment end with one node
registered and the other refused (`runtime_locked`) — never a raw `UniqueViolation`.

Each race is first staged (the test holds a table lock both writes wait for, and lets them
go once both wait: they then meet at the unique key), then run 20 times unstaged.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from lineup_build.trust import TrustStore
from lineup_runtime_lite.store.postgres import PostgresStore
from tests.faults.harness import ROOT
from tests.pg_kit import PgServer, fresh_database

pytestmark = pytest.mark.slow  # handed out first under pytest-xdist


DRIVER = Path(__file__).with_name("race_driver.py")
ROUNDS = 20


class Node:
    """A driver process (`race_driver.py`)."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(DRIVER)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=dict(os.environ, PYTHONPATH=str(ROOT)),
            text=True,
            cwd=str(ROOT),
        )

    def send(self, **cmd: Any) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()

    def answer(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, "the node process ended"
        return dict(json.loads(line))

    def stop(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=30)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


@pytest.fixture
def nodes() -> Iterator[tuple[Node, Node]]:
    a, b = Node(), Node()
    try:
        yield a, b
    finally:
        a.stop()
        b.stop()


def at_once(a: Node, b: Node, **cmd: Any) -> list[dict[str, Any]]:
    """The same command to both nodes, sent before either answers."""
    a.send(**cmd)
    b.send(**cmd)
    return [a.answer(), b.answer()]


def _waiting(url: str, n: int) -> bool:
    with psycopg.connect(url, autocommit=True) as watch:
        row = watch.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type='Lock' "
            "AND datname = current_database()"
        ).fetchone()
    return row is not None and int(row[0]) >= n


def staged(db: str, table: str, a: Node, b: Node, **cmd: Any) -> list[dict[str, Any]]:
    """Both nodes' writes wait on a lock the test holds on `table`; let go once both wait."""
    holder = psycopg.connect(db)
    try:
        holder.execute(f"LOCK TABLE {table} IN SHARE MODE")
        a.send(**cmd)
        b.send(**cmd)
        end = time.monotonic() + 30  # bounds a broken test only
        while not _waiting(db, 2):
            assert time.monotonic() < end, "the two writes never both waited"
            time.sleep(0.01)
        holder.rollback()
    finally:
        holder.close()
    return [a.answer(), b.answer()]


def _install_round(
    server: PgServer,
    nodes: tuple[Node, Node],
    tmp: Path,
    trust_file: Path,
    bundle: Path,
    *,
    stage: bool,
) -> list[dict[str, Any]]:
    url = fresh_database(server)
    a, b = nodes
    for name, node in (("A", a), ("B", b)):
        node.send(
            op="open", url=url, trust=str(trust_file), node=name, apps=str(tmp / f"apps-{name}")
        )
    assert [a.answer(), b.answer()] == [{"ready": True}] * 2
    try:
        if stage:
            return staged(url, "bundles", a, b, op="install", bundle=str(bundle))
        return at_once(a, b, op="install", bundle=str(bundle))
    finally:
        at_once(a, b, op="close")


def test_two_nodes_installing_one_bundle_at_once_converge(
    pg_server: PgServer,
    nodes: tuple[Node, Node],
    tmp_path: Path,
    trust: TrustStore,
    probe_bundle: Path,
) -> None:
    trust_file = tmp_path / "trust.toml"
    trust.save(trust_file)
    for i in range(ROUNDS + 1):
        got = _install_round(
            pg_server, nodes, tmp_path / str(i), trust_file, probe_bundle, stage=i == 0
        )
        assert sorted(a.get("action", str(a)) for a in got) == ["installed", "unchanged"], (i, got)


def test_two_processes_registering_one_node_id_at_once_one_is_runtime_locked(
    pg_server: PgServer, nodes: tuple[Node, Node]
) -> None:
    a, b = nodes
    url = fresh_database(pg_server)
    PostgresStore(url, node_id="setup", lease_s=0.2).close()  # the tables, before any lock
    for i in range(ROUNDS + 1):
        cmd = {"op": "register", "url": url, "node": f"same-{i}", "lease": 0.2}
        got = staged(url, "nodes", a, b, **cmd) if i == 0 else at_once(a, b, **cmd)
        at_once(a, b, op="close")
        kinds = sorted("registered" if "registered" in g else g.get("code", str(g)) for g in got)
        assert kinds == ["registered", "runtime_locked"], (i, got)
