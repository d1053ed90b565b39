"""Kill -9 the runtime process between and during steps; reopen; nothing lost or doubled."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

from lineup_build.trust import TrustStore
from lineup_runtime_lite import HostSimulator, Runtime, VirtualClock
from lineup_runtime_lite.internals import engine_of

DRIVER = Path(__file__).parents[1] / "driver.py"
ROOT = Path(__file__).resolve().parents[3]


def run_and_kill(
    db: Path, trust: Path, bundle: Path, start: int, count: int, kill_after: int
) -> list[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(
        [sys.executable, str(DRIVER), str(db), str(trust), str(bundle), str(start), str(count)],
        stdout=subprocess.PIPE,
        env=env,
        text=True,
    )
    acked: list[str] = []
    workers: set[int] = set()
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("done"):
                break
            row = json.loads(line)
            acked.append(row["call_id"])
            workers.update(row["workers"])
            if len(acked) >= kill_after:
                proc.send_signal(signal.SIGKILL)
                break
    finally:
        proc.kill()
        proc.wait(timeout=30)
        if proc.stdout is not None:
            proc.stdout.close()
    assert workers, "the driver reported no worker"
    for pid in workers:  # the worker sees its pipe close and exits: no orphans
        assert _exits(pid), f"worker {pid} outlived the killed runtime"
    return acked


def _exits(pid: int) -> bool:
    import time

    for _ in range(200):  # waiting for a process to exit, not for a deadline
        try:
            with open(f"/proc/{pid}/stat") as fh:
                if fh.read().split(")")[-1].split()[0] == "Z":
                    return True  # exited; only its zombie entry remains
        except FileNotFoundError:
            return True
        time.sleep(0.025)
    return False


def check_invariants(rt: Runtime) -> dict[str, int]:
    dump = rt.store_dump()
    calls = {row[0]: row for row in dump["calls"]}
    finals = Counter(r[0] for r in dump["receipts"] if r[1] in ("result", "error"))
    assert all(n == 1 for n in finals.values()), finals
    for call_id, row in calls.items():
        assert row[9] == "done", (call_id, row[9])  # every accepted call ended
        assert finals[call_id] == 1
    ids = [r[1] for r in dump["outbox"]]
    assert len(ids) == len(set(ids))
    receipts = {(r[0], r[1]) for r in dump["receipts"]}
    assert receipts == {(r[2], i.split(":", 1)[1]) for r in dump["outbox"] for i in [r[1]]}
    for _scope, sid, rev, _data in dump["session_data"]:
        data = rt.surface(*next((c[1], c[2]) for c in dump["app_sessions"] if c[0] == sid)).get()
        assert data.revision == rev
    return {"calls": len(calls), "outbox": len(ids)}


def test_kill_and_reopen_loses_and_duplicates_nothing(
    tmp_path: Path, probe_bundle: Path, trust: TrustStore
) -> None:
    db = tmp_path / "rt.db"
    trust_file = tmp_path / "trust.toml"
    trust.save(trust_file)
    acked_all: list[str] = []
    start = 0
    for cycle, kill_after in enumerate((3, 7, 5)):
        acked = run_and_kill(db, trust_file, probe_bundle, start, 10, kill_after)
        acked_all.extend(acked)
        start += 10
        with Runtime.open(
            db, trust=trust_file, clock=VirtualClock(), host=HostSimulator("auto")
        ) as rt:
            rt.settle()
            stats = check_invariants(rt)
            present = {r[0] for r in rt.store_dump()["calls"]}
            assert set(acked_all) <= present, cycle  # acknowledged ⇒ present
            assert stats["calls"] >= len(acked_all)
    with Runtime.open(db, trust=trust_file, clock=VirtualClock()) as rt:
        for conv in ("conv0", "conv1", "conv2"):
            snap = rt.surface(conv, "probe").get()
            items = (snap.data or {}).get("items", [])
            assert len(items) == len(set(items))  # at most once per call
            assert snap.revision == len(items)  # one revision per delivery that wrote


def test_delivered_without_result_becomes_delivery_interrupted(
    tmp_path: Path, probe_bundle: Path, trust: TrustStore
) -> None:
    db = tmp_path / "rt.db"
    with Runtime.open(db, trust=trust, clock=VirtualClock()) as rt:
        rt.install(probe_bundle)
        rt.call("c1", "conv", "probe.echo", {"text": "x"})
        rt.settle()
        with engine_of(rt).store.transaction() as con:  # simulate a crash after `delivered`
            con.execute(
                "INSERT INTO calls SELECT 'c2', fingerprint, conversation_id, scope, method, params, "
                "app_session_id, activation_id, 99, 'delivered', created_ms FROM calls WHERE call_id='c1'"
            )
    with Runtime.open(db, trust=trust, clock=VirtualClock()) as rt:
        rt.settle()
        final = [m for m in rt.outbox.all() if m["id"] == "c2:error"]
        assert len(final) == 1 and final[0]["error"]["code"] == "delivery_interrupted"
    with Runtime.open(db, trust=trust, clock=VirtualClock()) as rt:  # recovery is idempotent
        assert len([m for m in rt.outbox.all() if m["call_id"] == "c2"]) == 1
