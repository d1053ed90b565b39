"""A runtime database with a long history, built fast (issue 36): `calls` finished calls with
their receipts, acknowledged outbox items, App sessions, activations, Host intents,
Pomodoro operations and as many finished UI Actions (SPEC 17) with their clients' marks, written by SQL directly (not through calls), plus a handful of pending
facts of every kind a timer tick, a pump, recovery or open looks for.

The same statements run on SQLite and PostgreSQL (a recursive CTE numbers the rows), so the
query-plan tests and the benchmarks measure one history on both engines.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "HISTORY_TABLES",
    "MAX_ROWS",
    "PENDING",
    "T0",
    "add_history",
    "add_pending",
    "rows_read",
]

#: Calls per conversation in the history (each conversation has one App session).
CALLS_PER_SESSION = 20
T0 = 1_767_225_600_000  # 2026-01-01T00:00Z, the virtual clock's start
#: The tables that grow with every call served.
HISTORY_TABLES = (
    "calls",
    "receipts",
    "outbox",
    "activations",
    "app_sessions",
    "operations",
    "im_records",
    "host_intents",
    "session_data",
    "owners",
    "ui_actions",
    "ui_action_clients",
    "call_marks",
)
#: Rows one statement may read on PostgreSQL (the history has 100,000 calls).
MAX_ROWS = 200


def _numbers(n: int) -> str:
    return f"WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {int(n)}) "


def add_history(
    db: Any,
    calls: int,
    *,
    scope: str = "todo",
    version: str = "1.0.0",
    owner: str | None = None,
    actions: int | None = None,
    marks: int = 0,
) -> None:
    """Insert `calls` finished calls (and what they left behind) and `actions` finished UI
    Actions (default: as many as calls) and `marks` MCP task marks (`Runtime.marks.add`, of
    the first calls) through `db.execute` (a `sqlite3` connection, or a
    PostgreSQL store's connection), inside the caller's transaction; on PostgreSQL, node
    `owner` owns every App session."""
    sessions = max(1, calls // CALLS_PER_SESSION)
    actions = calls if actions is None else actions
    per_calls = -(-calls // sessions)  # the seqs the calls of a session take
    per_actions = -(-actions // sessions)
    run = db.execute
    if owner is not None:
        run(
            _numbers(sessions) + "INSERT INTO owners (app_session_id, node_id) "
            "SELECT 'hs' || i, ? FROM n",
            (owner,),
        )
    run(
        _numbers(sessions) + "INSERT INTO app_sessions (app_session_id, conversation_id, scope, "
        "version, created_ms, next_seq) SELECT 'hs' || i, 'hconv' || i, ?, ?, ? + i, "
        f"{per_calls + per_actions + 1} FROM n",
        (scope, version, T0),
    )
    run(
        _numbers(sessions) + "INSERT INTO activations (activation_id, app_session_id, "
        "trigger_call_id, state, requires_foreground, worker_ready, foreground, reason, "
        "deadline_ms, created_ms, ended_ms) SELECT 'ha' || i, 'hs' || i, 'hc' || i, "
        "CASE WHEN i - i / 7 * 7 = 0 THEN 'failed' ELSE 'ready' END, 0, 1, 0, NULL, ? + i + 30000, "
        "? + i, CASE WHEN i - i / 7 * 7 = 0 THEN ? + i + 5 ELSE NULL END FROM n",
        (T0, T0, T0),
    )
    run(
        _numbers(calls) + "INSERT INTO calls (call_id, fingerprint, conversation_id, scope, "
        "method, params, app_session_id, activation_id, seq, state, created_ms) "
        f"SELECT 'hc' || i, 'f' || i, 'hconv' || (i - i / {sessions} * {sessions} + 1), ?, 'todo.add', "
        f"'{{\"title\":\"t\"}}', 'hs' || (i - i / {sessions} * {sessions} + 1), 'ha' || (i - i / {sessions} * {sessions} + 1), "
        f"(i - 1) / {sessions} + 1, 'done', ? + i FROM n",
        (scope, T0),
    )
    for stage, n in (("accepted", 1), ("result", 2)):
        run(
            _numbers(calls) + "INSERT INTO receipts (call_id, stage, n, body) "
            f"SELECT 'hc' || i, '{stage}', {n}, "
            f'\'{{"call_id":"hc\' || i || \'","stage":"{stage}"}}\' FROM n',
        )
        run(
            _numbers(calls) + "INSERT INTO outbox (msg_id, call_id, body, acked) "
            f"SELECT 'hm{stage[0]}' || i, 'hc' || i, "
            f'\'{{"call_id":"hc\' || i || \'","stage":"{stage}"}}\', 1 FROM n',
        )
    if actions:  # each session's actions after its calls, from one client
        run(
            _numbers(actions) + "INSERT INTO ui_actions (app_session_id, seq, client_id, "
            "client_seq, name, params, fingerprint, activation_id, state, outcome, revision, "
            f"created_ms, ended_ms) SELECT 'hs' || (i - i / {sessions} * {sessions} + 1), "
            f"{per_calls} + (i - 1) / {sessions} + 1, 'hclient', (i - 1) / {sessions} + 1, "
            "'todo.toggle', '{}', 'f' || i, "
            f"'ha' || (i - i / {sessions} * {sessions} + 1), 'done', "
            "'{\"result\":null}', 1, ? + i, ? + i FROM n",
            (T0, T0),
        )
        run(
            _numbers(min(sessions, actions)) + "INSERT INTO ui_action_clients "
            "(app_session_id, client_id, last_seq) SELECT 'hs' || i, 'hclient', "
            f"{per_actions} FROM n",
        )
    if marks:
        run(
            "INSERT INTO call_marks (mark, call_id, conversation_id, created_ms) "
            "SELECT 'mcp_task', call_id, conversation_id, created_ms FROM calls "
            "WHERE substr(call_id, 1, 2) = 'hc' AND created_ms <= ?",
            (T0 + marks,),
        )
    run(
        _numbers(sessions) + "INSERT INTO host_intents (dedup_key, body, delivered, instance, "
        "superseded) SELECT 'hk' || i, '{}', 1, 'ha' || i, 0 FROM n",
    )
    run(
        _numbers(sessions) + "INSERT INTO operations (operation_id, call_id, conversation_id, "
        "app_session_id, kind, state, started_ms, ends_ms, ended_ms, params) "
        "SELECT 'ho' || i, 'hc' || i, 'hconv' || i, 'hs' || i, 'focus', 'completed', ? + i, "
        "? + i + 1500000, ? + i + 1500000, '{}' FROM n",
        (T0, T0, T0),
    )
    run(
        _numbers(sessions) + "INSERT INTO im_records (operation_id, conversation_id, body, "
        "created_ms) SELECT 'ho' || i, 'hconv' || i, '{}', ? + i FROM n",
        (T0,),
    )


#: What `add_pending` leaves for the runtime to find, by the fact that finds it.
PENDING = {
    "sessions_to_pump": {"ps1", "ps2"},
    "delivered_calls": {"pc2"},
    "due_activations": {"pa3"},
    "activations_to_drive": {"pa3"},
    "intent_heads": {"pa4"},
    "outbox_pending": {"pm1"},
    "delivered_actions": {("ps2", 5)},
}


def add_pending(
    db: Any, *, scope: str = "todo", version: str = "1.0.0", owner: str | None = None
) -> None:
    """A handful of pending facts: queued calls of a ready activation (`ps1`), a call left
    `delivered` (`ps2`), an activation past its deadline (`pa3`), one waiting for the Host
    with an undelivered intent (`pa4`), a focusing operation and an unacknowledged outbox
    item."""
    run = db.execute
    for n in range(1, 5):
        run(
            "INSERT INTO app_sessions (app_session_id, conversation_id, scope, version, "
            "created_ms, next_seq) VALUES (?, ?, ?, ?, ?, 5)",
            (f"ps{n}", f"pconv{n}", scope, version, T0),
        )
        if owner is not None:
            run("INSERT INTO owners (app_session_id, node_id) VALUES (?, ?)", (f"ps{n}", owner))
    acts = (
        ("pa1", "ps1", "ready", 0, 1, 0),
        ("pa2", "ps2", "ready", 0, 1, 0),
        ("pa3", "ps3", "starting", 0, 0, 0),
        ("pa4", "ps4", "starting", 1, 1, 0),
    )
    for act, session, state, fg, ready, focused in acts:
        run(
            "INSERT INTO activations (activation_id, app_session_id, trigger_call_id, state, "
            "requires_foreground, worker_ready, foreground, deadline_ms, created_ms) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            # pa4 waits for the Host well inside its deadline; pa3's has passed
            (
                act,
                session,
                f"{act}c",
                state,
                fg,
                ready,
                focused,
                T0 + (act == "pa4") * 600_000 - 1,
                T0 - 100,
            ),
        )
    calls = (
        ("pc1", "ps1", "pa1", 1, "queued"),
        ("pc1b", "ps1", "pa1", 2, "queued"),
        ("pc2", "ps2", "pa2", 1, "delivered"),
        ("pc3", "ps3", "pa3", 1, "queued"),
        ("pc4", "ps4", "pa4", 1, "queued"),
    )
    for call, session, act, seq, state in calls:
        run(
            "INSERT INTO calls (call_id, fingerprint, conversation_id, scope, method, params, "
            "app_session_id, activation_id, seq, state, created_ms) "
            "VALUES (?, 'f', ?, ?, 'todo.add', '{}', ?, ?, ?, ?, ?)",
            (call, "pconv" + session[2:], scope, session, act, seq, state, T0),
        )
    # UI Actions in the same queues (SPEC 17): queued behind ps1's calls, delivered on ps2,
    # waiting on ps3's starting activation
    for session, act, state in (("ps1", "pa1", "queued"), ("ps2", "pa2", "delivered")):
        run(
            "INSERT INTO ui_actions (app_session_id, seq, client_id, client_seq, name, params, "
            "fingerprint, activation_id, state, created_ms) "
            "VALUES (?, 5, 'pclient', 1, 'todo.toggle', '{}', 'f', ?, ?, ?)",
            (session, act, state, T0),
        )
        run(
            "INSERT INTO ui_action_clients (app_session_id, client_id, last_seq) "
            "VALUES (?, 'pclient', 1)",
            (session,),
        )
        run("UPDATE app_sessions SET next_seq=6 WHERE app_session_id=?", (session,))
    run(
        "INSERT INTO host_intents (dedup_key, body, delivered, instance) VALUES (?, ?, 0, ?)",
        ("pk4", '{"instance":"pa4"}', "pa4"),
    )
    run(
        "INSERT INTO operations (operation_id, call_id, conversation_id, app_session_id, kind, "
        "state, started_ms, ends_ms, params) VALUES ('po1', 'pc1', 'pconv1', 'ps1', 'focus', "
        "'focusing', ?, ?, '{}')",
        (T0, T0 + 1_500_000),
    )
    run(
        "INSERT INTO outbox (msg_id, call_id, body, acked) VALUES ('pm1', 'pc1', ?, 0)",
        ('{"call_id":"pc1","stage":"accepted"}',),
    )


def rows_read(node: dict[str, Any]) -> int:
    """Rows a plan node and its children read: what each scan returned and what its
    filters removed, per loop."""
    loops = int(node.get("Actual Loops", 1))
    own = 0
    if "Scan" in node["Node Type"]:
        own = (
            int(node.get("Actual Rows", 0))
            + int(node.get("Rows Removed by Filter", 0))
            + int(node.get("Rows Removed by Index Recheck", 0))
        ) * loops
    return own + sum(rows_read(child) for child in node.get("Plans", ()))
