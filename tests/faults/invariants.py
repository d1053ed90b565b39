"""The runtime's promises as one check, run after every fault and every restart.

Nothing lost: every call has exactly one final, or is legitimately pending (queued behind a
starting activation, or a focusing Pomodoro); nothing is pending without an owner.
Nothing duplicated: one receipt per stage, each in the outbox exactly once with the same
body; stages form an ordered prefix; an operation only after `started`; an IM record only
for a terminal operation; session data revisions grow by one per delivery that wrote (a list that is
appended to holds exactly `revision` distinct items); a Host intent is delivered or, its
activation ended, superseded; `PRAGMA integrity_check` is ok.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lineup_runtime_lite import Runtime
from lineup_runtime_lite.internals import engine_of

__all__ = ["Stats", "assert_unchanged", "check", "check_db", "read_db"]

FINAL = ("result", "error")
ACTIVATION_STAGES = ("activation_ready", "activation_failed", "activation_cancelled", "started")
#: Which stage may follow which (None = the first stage of a call).
NEXT: dict[str | None, set[str]] = {
    None: {"accepted", "result", "error"},
    "accepted": {*ACTIVATION_STAGES, *FINAL},
    "activation_ready": set(FINAL),
    "activation_failed": set(FINAL),
    "activation_cancelled": set(FINAL),
    "started": {"result"},
    "result": set(),
    "error": set(),
}
#: The closed field list of an AgentMessage (never an instance, session or operation id).
MESSAGE_FIELDS = {
    "id",
    "call_id",
    "app_scope",
    "kind",
    "stage",
    "at",
    "activation",
    "reason",
    "started_at",
    "ends_at",
    "result",
    "error",
}
REASONS = {"host_failed", "user_left", "timeout", "worker_failed", "method_mismatch", "interrupted"}
TABLES = (
    "calls",
    "receipts",
    "outbox",
    "activations",
    "app_sessions",
    "operations",
    "im_records",
    "session_data",
    "host_intents",
    "ui_actions",
    "ui_action_clients",
)
#: Scopes whose session data is an append-only `items` list: revision == len(items).
APPEND_SCOPES = ("probe", "todo", "queue")


@dataclass
class Stats:
    """What one check looked at."""

    calls: int = 0
    finals: int = 0
    pending: int = 0
    receipts: int = 0
    outbox: int = 0
    operations: int = 0
    im_records: int = 0
    activations: int = 0
    revisions: int = 0


def read_pg(store: Any) -> dict[str, Any]:
    """`read_db` on the PostgreSQL store (its `rowid` column left out; no integrity
    pragma: the server keeps its own)."""
    out: dict[str, Any] = {}
    for t in TABLES:
        rows = store.all(f"SELECT * FROM {t} ORDER BY rowid")
        out[t] = [{k: v for k, v in zip(r.keys(), r, strict=True) if k != "rowid"} for r in rows]
    out["integrity"] = ["ok"]
    return out


def read_db(con: sqlite3.Connection) -> dict[str, Any]:
    """Every table the check needs, as dicts, plus the integrity check."""
    con.row_factory = sqlite3.Row
    out: dict[str, Any] = {
        t: [dict(r) for r in con.execute(f"SELECT * FROM {t} ORDER BY rowid")] for t in TABLES
    }
    out["integrity"] = [r[0] for r in con.execute("PRAGMA integrity_check")]
    return out


def check(rt: Runtime, *, settled: bool = True, host_down: bool = False) -> Stats:
    """Check an open runtime. `settled`: after `rt.settle()` nothing may be in flight."""
    store = engine_of(rt).store
    if getattr(store, "engine", "sqlite") == "postgresql":
        tables: dict[str, Any] = rt._call_sync(lambda: read_pg(store))
    else:
        tables = rt._call_sync(lambda: read_db(store.db))
    return check_tables(tables, settled=settled, host_down=host_down)


def check_db(target: Path | str) -> Stats:
    """Check a database no runtime has open (right after a crash: things may be in flight):
    an SQLite file, or a PostgreSQL URL."""
    if str(target).startswith("postgresql://"):
        import psycopg

        with psycopg.connect(str(target)) as pg:

            class Rows:
                def all(self, sql: str) -> list[Any]:
                    cur = pg.execute(sql)
                    names = [c.name for c in cur.description or ()]
                    return [_Named(names, r) for r in cur.fetchall()]

            tables = read_pg(Rows())
        return check_tables(tables, settled=False, host_down=True)
    con = sqlite3.connect(target)
    try:
        tables = read_db(con)
    finally:
        con.close()
    return check_tables(tables, settled=False, host_down=True)


class _Named(tuple[Any, ...]):
    """A row with `keys()`, as the PostgreSQL store's rows have."""

    _names: list[str]

    def __new__(cls, names: list[str], values: Any) -> _Named:
        row = super().__new__(cls, values)
        row._names = names
        return row

    def keys(self) -> list[str]:
        return list(self._names)


def check_tables(t: dict[str, Any], *, settled: bool, host_down: bool) -> Stats:
    """The invariants over a table snapshot; raises AssertionError naming the broken one."""
    assert t["integrity"] == ["ok"], t["integrity"]
    stats = Stats(
        calls=len(t["calls"]),
        receipts=len(t["receipts"]),
        outbox=len(t["outbox"]),
        operations=len(t["operations"]),
        im_records=len(t["im_records"]),
        activations=len(t["activations"]),
    )
    calls = {c["call_id"]: c for c in t["calls"]}
    acts = {a["activation_id"]: a for a in t["activations"]}
    sessions = {s["app_session_id"]: s for s in t["app_sessions"]}
    ops_by_call = {o["call_id"]: o for o in t["operations"]}

    # -- receipts and the outbox: each stage once, in order, each in the outbox once -----
    by_call: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in t["receipts"]:
        by_call[r["call_id"]].append(r)
    outbox_ids = Counter(o["msg_id"] for o in t["outbox"])
    dup = [k for k, n in outbox_ids.items() if n != 1]
    assert not dup, f"outbox items written more than once: {dup}"
    outbox = {o["msg_id"]: o for o in t["outbox"]}
    receipt_ids = {f"{r['call_id']}:{r['stage']}" for r in t["receipts"]}
    assert set(outbox) == receipt_ids, (
        f"receipts without outbox item: {sorted(receipt_ids - set(outbox))[:5]}, "
        f"outbox items without receipt: {sorted(set(outbox) - receipt_ids)[:5]}"
    )
    for o in t["outbox"]:
        assert o["acked"] in (0, 1), o
    finals: dict[str, dict[str, Any]] = {}
    for call_id, rows in by_call.items():
        assert call_id in calls, f"receipts for a call that was never stored: {call_id}"
        rows.sort(key=lambda r: r["n"])
        assert [r["n"] for r in rows] == list(range(1, len(rows) + 1)), (call_id, rows)
        prev: str | None = None
        out_ids = []
        for r in rows:
            stage = r["stage"]
            assert stage in NEXT[prev], f"{call_id}: stage {stage} after {prev}"
            prev = stage
            body = json.loads(r["body"])
            msg_id = f"{call_id}:{stage}"
            assert body["id"] == msg_id and body["stage"] == stage, body
            assert set(body) <= MESSAGE_FIELDS, f"{msg_id} carries {set(body) - MESSAGE_FIELDS}"
            assert outbox[msg_id]["body"] == r["body"], f"{msg_id}: outbox differs from receipt"
            assert outbox[msg_id]["call_id"] == call_id
            out_ids.append(outbox[msg_id]["id"])
            if stage in FINAL:
                finals[call_id] = body
        assert out_ids == sorted(out_ids), f"{call_id}: outbox order differs from stage order"
    stats.finals = len(finals)

    # -- calls: exactly one final, or legitimately pending --------------------------------
    for call_id, c in calls.items():
        state = c["state"]
        if state == "done":
            assert call_id in finals, f"{call_id} is done without a final"
            continue
        assert call_id not in finals, f"{call_id} has a final but is still {state}"
        stats.pending += 1
        act = acts.get(c["activation_id"] or "")
        if state == "queued":
            assert act is not None, f"queued call {call_id} has no activation"
            allowed = ("starting",) if settled else ("starting", "ready")
            assert act["state"] in allowed, (
                f"queued call {call_id} has no owner: its activation is {act['state']}"
            )
        elif state == "running":
            op = ops_by_call.get(call_id)
            assert op is not None and op["state"] == "focusing", f"{call_id} runs without a focus"
        elif state == "delivered":
            assert not settled, f"{call_id} is still delivered after settling"
        else:
            raise AssertionError(f"{call_id}: unknown state {state}")
        if c["app_session_id"] is None:
            raise AssertionError(f"{call_id} is pending without a session")

    # per-session arrival order: seq unique and below next_seq
    seqs: dict[str, list[int]] = defaultdict(list)
    for c in calls.values():
        if c["app_session_id"] is not None:
            assert c["app_session_id"] in sessions, c
            seqs[c["app_session_id"]].append(c["seq"])
    # UI Actions take their seq from the same counter: one queue, no seq shared (SPEC 17)
    for u in t.get("ui_actions", ()):
        assert u["app_session_id"] in sessions, u
        seqs[u["app_session_id"]].append(u["seq"])
    for sid, values in seqs.items():
        assert len(values) == len(set(values)), f"duplicate seq in {sid}"
        assert max(values) < sessions[sid]["next_seq"], sid

    # -- UI Actions: one outcome each, per-client marks, nothing stranded ------------------
    clients: dict[tuple[str, str], list[int]] = defaultdict(list)
    for u in t.get("ui_actions", ()):
        clients[(u["app_session_id"], u["client_id"])].append(u["client_seq"])
        act = acts.get(u["activation_id"])
        assert act is not None and act["app_session_id"] == u["app_session_id"], u
        if u["state"] == "done":
            outcome = json.loads(u["outcome"])
            assert set(outcome) in ({"result"}, {"error"}), u
            assert ("result" in outcome) == (u["revision"] is not None), u
            assert u["ended_ms"] is not None, u
            continue
        assert u["outcome"] is None and u["revision"] is None, u
        stats.pending += 1
        if u["state"] == "queued":
            allowed = ("starting",) if settled else ("starting", "ready")
            assert act["state"] in allowed, f"queued action {u} has no owner: {act['state']}"
        else:
            assert u["state"] == "delivered" and not settled, f"{u} still in flight"
    marks = {
        (m["app_session_id"], m["client_id"]): m["last_seq"] for m in t.get("ui_action_clients", ())
    }
    assert set(marks) == set(clients), (marks, clients)
    for key, numbers in clients.items():
        # a client's accepted seqs are exactly 1..mark: none skipped, none twice
        assert sorted(numbers) == list(range(1, marks[key] + 1)), (key, numbers)

    # -- activations -----------------------------------------------------------------------
    queued_on: dict[str, list[str]] = defaultdict(list)
    for c in calls.values():
        if c["state"] == "queued" and c["activation_id"] is not None:
            queued_on[c["activation_id"]].append(c["call_id"])
    starting_per_session: Counter[str] = Counter()
    for a in t["activations"]:
        state = a["state"]
        assert a["app_session_id"] in sessions, a
        trigger = calls.get(a["trigger_call_id"])
        assert trigger is not None, f"activation {a['activation_id']} without its trigger"
        assert trigger["activation_id"] == a["activation_id"], a
        if state == "starting":
            starting_per_session[a["app_session_id"]] += 1
            assert a["ended_ms"] is None, a
        elif state == "ready":
            assert a["worker_ready"] == 1, a
            assert a["foreground"] == 1 or not a["requires_foreground"], a
        else:
            assert a["reason"] in REASONS, a
            stuck = queued_on.get(a["activation_id"])
            assert not stuck, f"calls left queued on a {state} activation: {stuck}"
        stages = {r["stage"] for r in by_call.get(a["trigger_call_id"], [])}
        if "activation_failed" in stages:
            assert state == "failed", a
        if "activation_cancelled" in stages:
            assert state == "cancelled", a
    many = [s for s, n in starting_per_session.items() if n > 1]
    assert not many, f"sessions with two starting activations: {many}"

    # -- Pomodoro operations and IM records ------------------------------------------------
    ims = {i["operation_id"]: i for i in t["im_records"]}
    focusing_per_conv: Counter[str] = Counter()
    for o in t["operations"]:
        bodies = {r["stage"]: json.loads(r["body"]) for r in by_call.get(o["call_id"], [])}
        assert "started" in bodies, f"operation {o['operation_id']} without a started receipt"
        started = bodies["started"]
        assert started["ends_at"] == _ts(o["ends_ms"]), (started, o)
        assert started["started_at"] == _ts(o["started_ms"]), (started, o)
        if o["state"] == "focusing":
            focusing_per_conv[o["conversation_id"]] += 1
            assert o["operation_id"] not in ims, f"IM record for a running focus {o}"
            assert calls[o["call_id"]]["state"] == "running", o
        else:
            assert o["ended_ms"] is not None, o
            im = ims.get(o["operation_id"])
            assert im is not None, f"terminal operation without its IM record: {o}"
            assert json.loads(im["body"])["status"] == o["state"], (im, o)
            final = finals.get(o["call_id"])
            assert final is not None and final["stage"] == "result", o
            assert final["result"]["status"] == o["state"], (final, o)
            assert final["result"]["operation_id"] == o["operation_id"], (final, o)
            if o["state"] == "completed":
                assert o["ended_ms"] == o["ends_ms"], f"completed away from its deadline: {o}"
    ops_ids = {o["operation_id"]: o for o in t["operations"]}
    for op_id in ims:
        assert op_id in ops_ids and ops_ids[op_id]["state"] != "focusing", (
            f"IM record {op_id} without a terminal operation"
        )
    assert all(n == 1 for n in focusing_per_conv.values()), focusing_per_conv
    for call_id, final in finals.items():
        result = final.get("result")
        if isinstance(result, dict) and result.get("status") == "not_started":
            assert call_id not in ops_by_call, f"{call_id} not_started but has an operation"
            assert result.get("reason") in REASONS, final

    # -- session data ----------------------------------------------------------------------
    for row in t["session_data"]:
        assert row["app_session_id"] in sessions, row
        stats.revisions += int(row["revision"])
        data = json.loads(row["data"])
        if row["scope"] in APPEND_SCOPES and isinstance(data.get("items"), list):
            items = data["items"]
            keys = [json.dumps(i, sort_keys=True) if isinstance(i, dict) else i for i in items]
            ids = [i["id"] if isinstance(i, dict) else i for i in items]
            assert len(ids) == len(set(ids)), f"an item applied twice in {row['scope']}: {keys}"
            assert row["revision"] == len(items), (
                f"{row['scope']} session at revision {row['revision']} holds {len(items)} items"
            )

    # -- Host intents ----------------------------------------------------------------------
    for h in t["host_intents"]:
        body = json.loads(h["body"])
        act = acts.get(body["instance"])
        assert act is not None and act["requires_foreground"], h
        assert h["dedup_key"] == f"show_surface:{body['instance']}", h
        assert h["instance"] == body["instance"], h
        if h["superseded"]:  # only an ended activation's intent, never one still starting
            assert act["state"] in ("failed", "cancelled"), f"superseded too early: {h}"
        if settled and not host_down:
            assert h["delivered"] == 1 or h["superseded"], f"Host intent left undelivered: {h}"
    return stats


def assert_unchanged(before: dict[str, Any], after: dict[str, Any]) -> None:
    """A failed commit changed nothing: every table is as it was."""
    for table in sorted(set(before) | set(after)):
        assert before.get(table) == after.get(table), f"table {table} changed"


def _ts(ms: int) -> str:
    from lineup_runtime_lite.api.clock import format_ts

    return format_ts(ms)
