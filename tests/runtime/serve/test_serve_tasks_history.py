"""`tasks/list` at any age (issue 36): `lineup serve` reads the asking conversation's task
marks a page at a time through their index (`call_marks`, schema 6), never every task ever
created. The database holds 100,000 finished calls of one conversation, each an MCP task
(`tests/history_kit.py`); the runtime handed to the bridge counts the call records and
marks each `tasks/list` reads."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import anyio

from lineup_build.trust import TrustStore
from lineup_runtime_lite import Runtime, VirtualClock
from lineup_runtime_lite.serve import Bridge
from tests.history_kit import add_history
from tests.runtime.serve_kit import FAST, raw_session

HISTORY = 100_000
PAGE = 100


def _history_db(db: Path, trust: TrustStore, todo_bundle: Path) -> None:
    with Runtime.open(db, trust=trust, clock=VirtualClock()) as rt:
        version = rt.install(todo_bundle).version
    con = sqlite3.connect(db, isolation_level=None)
    con.execute("BEGIN")
    add_history(con, HISTORY, version=version, actions=0, marks=HISTORY)
    # one conversation, as `lineup serve` on stdio has, and answers a task can show
    con.execute("UPDATE calls SET conversation_id='mcp'")
    con.execute("UPDATE call_marks SET conversation_id='mcp'")
    con.execute(
        "UPDATE receipts SET body = json_object('id', call_id || ':' || stage, 'call_id', "
        "call_id, 'app_scope', 'todo', 'kind', CASE stage WHEN 'result' THEN 'result' "
        "ELSE 'receipt' END, 'stage', stage, 'at', '2026-01-01T00:00:00.000Z', "
        "'result', json('{\"count\":1}'))"
    )
    con.execute("COMMIT")
    con.close()


class CountingMarks:
    """`rt.marks`, counting the marked call ids its `calls` hands the bridge."""

    def __init__(self, counting: Counting) -> None:
        self._counting = counting

    def calls(self, *args: Any, **kwargs: Any) -> list[str]:
        found = self._counting._rt.marks.calls(*args, **kwargs)
        self._counting.marked += len(found)
        return found

    def __getattr__(self, name: str) -> Any:
        return getattr(self._counting._rt.marks, name)


class Counting:
    """The runtime, counting the call records and marked call ids it hands the bridge."""

    def __init__(self, rt: Runtime) -> None:
        self._rt = rt
        self.records = 0
        self.marked = 0

    def call_record(self, call_id: str) -> Any:
        self.records += 1
        return self._rt.call_record(call_id)

    @property
    def marks(self) -> Any:
        return CountingMarks(self)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._rt, name)


def test_tasks_list_reads_a_page_not_every_task(
    tmp_path: Path, trust: TrustStore, todo_bundle: Path
) -> None:
    db = tmp_path / "rt.db"
    _history_db(db, trust, todo_bundle)

    async def main(rt: Runtime) -> None:
        counting = Counting(rt)
        bridge = Bridge(counting, FAST)  # type: ignore[arg-type]
        async with raw_session(bridge) as raw:
            first = (await raw.request("tasks/list", {}))["result"]
            assert counting.records <= PAGE + 1 and counting.marked <= PAGE, vars(counting)
            ids = [t["taskId"] for t in first["tasks"]]
            # the oldest first (all here were accepted at one `at`: by call_id in a page)
            assert sorted(ids) == sorted(f"hc{i}" for i in range(1, PAGE + 1)) == ids
            assert first["tasks"][0]["status"] == "completed"
            assert first["nextCursor"] == f"hc{PAGE}"
            second = (await raw.request("tasks/list", {"cursor": first["nextCursor"]}))["result"]
            assert sorted(t["taskId"] for t in second["tasks"]) == sorted(
                f"hc{i}" for i in range(PAGE + 1, 2 * PAGE + 1)
            )
            assert counting.records <= 2 * PAGE + 2 and counting.marked <= 2 * PAGE + 1
            bad = await raw.request("tasks/list", {"cursor": "no-such-task"})
            assert bad["error"]["code"] == -32602
            other = await raw.request(  # another conversation's list: none of these
                "tasks/list", {"_meta": {"io.lineup/conversation_id": "elsewhere"}}
            )
            assert other["result"]["tasks"] == [] and "nextCursor" not in other["result"]

    with Runtime.open(db, trust=trust, clock=VirtualClock()) as rt:
        anyio.run(main, rt)
