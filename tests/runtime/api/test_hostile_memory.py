"""Bounded in-memory state (issue 10): per-conversation state is released when no longer
needed, and `settle()` returns promptly after a failed activation."""

from __future__ import annotations

import gc
import os
import sys
import time
from pathlib import Path

import pytest

from lineup_build.trust import TrustStore
from lineup_runtime_lite import Runtime, VirtualClock
from lineup_runtime_lite.internals import engine_of
from lineup_runtime_lite.validation.params import DEFAULT_MAX_PARAMS_BYTES, Envelope, check_envelope

CONVERSATIONS = 100_000


def rss_bytes() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def db_bytes(rt: Runtime) -> int:
    def size() -> int:
        db = engine_of(rt).store.db
        return int(db.execute("PRAGMA page_count").fetchone()[0]) * int(
            db.execute("PRAGMA page_size").fetchone()[0]
        )

    return rt._call_sync(size)


def state_sizes(rt: Runtime) -> dict[str, int]:
    return engine_of(rt).held()


EMPTY = dict.fromkeys(
    (
        "pumps",
        "claimed",
        "dirty",
        "capabilities",
        "finals",
        "outcomes",
        "driving",
        "tasks",
        "subscriptions",
        "queued_decisions",
    ),
    0,
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/statm")
def test_100000_one_call_conversations_keep_memory_bounded(bulk: Runtime) -> None:
    rt = bulk
    # conversations that each ran a delivery on a ready session of their own
    for i in range(200):
        assert rt.call(f"w{i}", f"delivered-{i}", "bulk.echo", {"text": "hi"})["stage"] == (
            "accepted"
        )
    rt.settle()
    assert state_sizes(rt) == EMPTY  # pumps ended, waiters answered: nothing held per session

    async def many(n: int, prefix: str) -> None:
        core = engine_of(rt)
        for i in range(n):
            env = check_envelope(
                f"{prefix}{i}",
                f"{prefix}conv-{i}",
                "bulk.peek",
                {},
                max_bytes=DEFAULT_MAX_PARAMS_BYTES,
            )
            assert isinstance(env, Envelope)
            msg = await core.call(env, core.registry["bulk.peek"], [])
            assert msg["error"]["code"] == "app_not_running"

    rt._run(many(5_000, "warm"))  # caches and allocator pools warmed up
    gc.collect()
    rss0, db0 = rss_bytes(), db_bytes(rt)
    started = time.perf_counter()
    rt._run(many(CONVERSATIONS, "c"))
    took = time.perf_counter() - started
    rt.settle()
    gc.collect()
    grown = (rss_bytes() - rss0) - (db_bytes(rt) - db0)  # beyond the stored facts
    print(f"{CONVERSATIONS} conversations in {took:.1f} s; RSS beyond the database {grown} B")
    assert state_sizes(rt) == EMPTY
    assert grown < 20 * 1024 * 1024, f"{grown / CONVERSATIONS:.0f} bytes per conversation"
    assert took < 60


def test_settle_returns_promptly_after_a_failed_activation(
    trust: TrustStore,
    clock: VirtualClock,
    bulk_bundle: Path,
) -> None:
    # its worker never reports its methods: each start would wait out the 30 s handshake
    with Runtime.open(
        ":memory:", trust=trust, clock=clock, worker_env={"BULK_HANG_AT_START": "1"}
    ) as rt:
        rt.install(bulk_bundle)
        assert rt.call("c1", "conv", "bulk.echo", {"text": "hi"})["stage"] == "accepted"
        deadline = time.monotonic() + 30
        while not _workers_of(os.getpid()) and time.monotonic() < deadline:
            time.sleep(0.01)  # until the worker is starting (hanging in its import)
        assert _workers_of(os.getpid()), "the worker never started"
        started = time.perf_counter()
        clock.advance(61_000)  # the activation times out on the runtime clock
        rt.settle()
        assert time.perf_counter() - started < 10  # not the worker's 3 × 30 s start retries
        finals = [m for m in rt.outbox.all() if m["call_id"] == "c1" and m["stage"] == "error"]
        assert finals[0]["error"]["code"] == "activation_failed"
        assert finals[0]["error"]["details"]["reason"] == "timeout"
        assert state_sizes(rt) == EMPTY
        assert _workers_of(os.getpid()) == []  # the hanging worker was killed, not orphaned


def _workers_of(pid: int) -> list[int]:
    if not Path("/proc").is_dir():
        return []
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == pid and b"lineup_sdk._worker" in cmdline and b"bulk" in cmdline:
            out.append(int(entry.name))
    return out
