"""The dev Host follows the outbox with a cursor (issue 36): its poll every 0.2 s reads
what is new, never the whole outbox, which grows with every call the runtime answered. The
runtime's database holds 100,000 finished calls (`tests/history_kit.py`: 200,000 outbox
messages); the outbox handed to the Host counts the messages each poll reads from it."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lineup_build.init import init_project
from lineup_runtime_lite import VirtualClock
from tests.history_kit import add_history

HISTORY = 100_000


class CountingOutbox:
    """`rt.outbox` that counts the messages it hands back, by method."""

    def __init__(self, outbox: Any) -> None:
        self.outbox = outbox
        self.read: dict[str, int] = {}

    def _count(self, name: str, messages: list[Any]) -> None:
        self.read[name] = self.read.get(name, 0) + len(messages)

    def all(self) -> list[Any]:
        found = self.outbox.all()
        self._count("all", found)
        return list(found)

    def after(self, position: int = 0, limit: int = 100) -> tuple[list[Any], int]:
        page, cursor = self.outbox.after(position, limit)
        self._count("after", page)
        return page, cursor

    def total(self) -> int:
        return sum(self.read.values())


@pytest.fixture()
def dev(tmp_path: Path) -> Iterator[Any]:
    from lineup_runtime_lite.web import open_dev

    init_project(tmp_path / "todo", template="todo")
    db = tmp_path / "d.db"
    first = open_dev(tmp_path / "todo", db=db, watch=False, clock=VirtualClock())
    version = first.rt.apps()[0]["version"]
    first.close()
    con = sqlite3.connect(db, isolation_level=None)
    con.execute("BEGIN")
    add_history(con, HISTORY, version=version, actions=0)
    con.execute("COMMIT")
    con.close()
    session = open_dev(tmp_path / "todo", db=db, watch=False, clock=VirtualClock())
    try:
        yield session
    finally:
        session.close()


def test_a_poll_reads_what_is_new_not_the_history(dev: Any) -> None:
    counting = CountingOutbox(dev.rt.outbox)
    dev.host.rt = _Facade(dev.rt, counting)
    dev.host.poll()  # the first poll catches up with what was there: once
    assert counting.total() >= 2 * HISTORY
    counting.read.clear()
    for _ in range(3):  # nothing new: nothing read
        assert dev.host.poll() is False
    assert counting.total() == 0, counting.read
    answer = dev.host.call("dev", "todo.add", {"title": "milk"})
    dev.rt.settle()
    dev.host.poll()
    assert counting.total() <= 5, counting.read  # the call's own messages
    mine = [
        e
        for e in dev.host.state()["timeline"]
        if e["source"] == "agent" and e.get("call_id") == answer["call_id"]
    ]
    assert mine and {e["stage"] for e in mine} >= {"result"}
    failed = dev.host.call("dev", "todo.complete", {"item_id": "nope"})  # stored: not
    assert failed["kind"] == "error" and failed["error"]["code"] == "app.not_found"
    entries = [e for e in dev.host.state()["timeline"] if e.get("call_id") == failed["call_id"]]
    assert entries and not any(e.get("rejected") for e in entries), entries
    refused = dev.host.call("dev", "todo.add", {"title": ""})  # not stored: rejected
    entries = [e for e in dev.host.state()["timeline"] if e.get("call_id") == refused["call_id"]]
    assert [e.get("rejected") for e in entries] == [True]


class _Facade:
    """The runtime with its outbox swapped for the counting one."""

    def __init__(self, rt: Any, outbox: CountingOutbox) -> None:
        self._rt, self.outbox = rt, outbox

    def __getattr__(self, name: str) -> Any:
        return getattr(self._rt, name)
