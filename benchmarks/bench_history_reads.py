"""What still grew with history, before and after (issue 36), side by side on one database
of `--calls` finished calls (`tests/history_kit.py`, 20 calls per App session, every call
an MCP task), interleaved rounds, medians and spread (the rounds' lowest and highest):

SQLite (a runtime on the file):
* dev poll: the read `lineup dev`'s Host ran every 0.2 s — before, every outbox message
  (`rt.outbox.all()`); after, what follows its cursor (`rt.outbox.after(position)`), with
  nothing new;
* tasks/list: `lineup serve`'s task list of one conversation holding every task — before,
  every `call_mark:` meta row and each task's record; after, one page (100) of the
  conversation's marks (`rt.marks.calls(mark, conversation, limit=100)`) and their records.

PostgreSQL (a throwaway server; the node `n1` owns every App session):
* heartbeat: the take-over statements of one beat with no lease lapsed — before, the
  `DELETE` of lapsed nodes and an `UPDATE` of `owners` anti-joined with `nodes`; after, the
  `DELETE … RETURNING` alone;
* register: the adoption of sessions of no node — before, an `INSERT … NOT IN` over
  `app_sessions` and `owners` at every registration; after, none (once, when `owners` is
  made);
* owned: what a node read of its sessions — before, every id it owns, at open; after, one
  keyed lookup when a session is first asked about;
* registry poll (`--apps` installed versions): before, `installed()` and two keyed reads
  per app; after, one read (`installed_stamp`).

The "before" side runs the statements main ran (written out here), the "after" side the
runtime's own reads. Run: python benchmarks/bench_history_reads.py [--calls 100000]
[--rounds 5] [--reps 20] [--engines sqlite,postgresql] [--smoke]
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(Path(__file__).parent)]

from concurrency_driver import build_bundle, trust_store  # noqa: E402

from lineup_runtime_lite.internals import engine_of  # noqa: E402
from tests.history_kit import add_history  # noqa: E402
from tests.pg_kit import fresh_database, pg_bindir, start_server  # noqa: E402

PAGE = 100
MARK = "mcp_task"


def timed(fn: Callable[[], Any], reps: int) -> float:
    """The median milliseconds of `reps` runs of `fn`."""
    out = []
    for _ in range(reps):
        started = time.perf_counter()
        fn()
        out.append((time.perf_counter() - started) * 1000)
    return statistics.median(out)


def sqlite_db(path: Path, bundle: Path, calls: int) -> None:
    """The bench app installed, `calls` finished calls of one conversation, each a task
    (marked in `call_marks`, and as main kept them, in `meta` too)."""
    from lineup_runtime_lite import HostSimulator, Runtime

    with Runtime.open(path, trust=trust_store(), host=HostSimulator("auto")) as rt:
        rt.install(bundle)
    con = sqlite3.connect(path, isolation_level=None)
    con.execute("PRAGMA synchronous=OFF")
    con.execute("BEGIN")
    add_history(con, calls, scope="bench", version="1.0.0", actions=0, marks=calls)
    con.execute("UPDATE calls SET conversation_id='mcp'")
    con.execute("UPDATE call_marks SET conversation_id='mcp'")
    con.execute(
        "INSERT INTO meta SELECT 'call_mark:mcp_task:' || call_id, '1' FROM call_marks"
    )  # main's copy of the marks, for the "before" read only
    con.execute("COMMIT")
    con.close()


def sqlite_rounds(path: Path, rounds: int, reps: int) -> dict[str, list[float]]:
    from lineup_runtime_lite import Runtime

    out: dict[str, list[float]] = {
        k: [] for k in ("dev_poll_before", "dev_poll_after", "tasks_before", "tasks_after")
    }
    with Runtime.open(path, trust=trust_store()) as rt:
        facts = engine_of(rt).facts
        end = 0
        while True:
            page, nxt = rt.outbox.after(end, 1000)
            if not page:
                break
            end = nxt

        def tasks_before() -> None:
            ids = facts.meta_keys(f"call_mark:{MARK}:")
            for call_id in ids:
                rt.call_record(call_id)

        def tasks_after() -> None:
            for call_id in rt.marks.calls(MARK, "mcp", limit=PAGE):
                rt.call_record(call_id)

        sides: list[tuple[str, Callable[[], Any], int]] = [
            ("dev_poll_before", rt.outbox.all, reps),
            ("dev_poll_after", lambda: rt.outbox.after(end), reps),
            ("tasks_before", tasks_before, max(1, reps // 10)),
            ("tasks_after", tasks_after, reps),
        ]
        for r in range(rounds):
            order = sides if r % 2 == 0 else [sides[1], sides[0], sides[3], sides[2]]
            for name, fn, n in order:
                out[name].append(timed(fn, n))
    return out


def pg_rounds(url: str, calls: int, apps: int, rounds: int, reps: int) -> dict[str, list[float]]:
    import psycopg

    from lineup_runtime_lite.store.postgres import PostgresStore

    store = PostgresStore(url, node_id="n1", lease_s=3600)  # no heartbeat runs here
    conn = psycopg.connect(url, autocommit=True)
    try:
        with store.transaction(fault_points=False) as db:
            add_history(db, calls, owner="n1", actions=0)
            for n in range(apps):
                db.execute(
                    "INSERT INTO app_versions VALUES (?, '1.0.0', ?, ?, 'k', ?, 0)",
                    (f"app{n}", b"{}", f"sha{n}", f"sha{n}"),
                )
                db.execute("INSERT INTO apps VALUES (?, '1.0.0')", (f"app{n}",))
        for table in ("calls", "app_sessions", "owners", "nodes", "app_versions", "apps"):
            store.db.execute(f"ANALYZE {table}")
        facts = store.facts

        def run(sql: str, args: tuple[Any, ...]) -> Any:
            return conn.execute(sql.replace("?", "%s"), args)

        def beat_before() -> None:
            with conn.transaction():
                run("DELETE FROM nodes WHERE lease_until < now() AND node_id <> ?", ("n1",))
                run(
                    "UPDATE owners SET node_id=? WHERE node_id <> ? AND node_id NOT IN "
                    "(SELECT node_id FROM nodes) RETURNING app_session_id",
                    ("n1", "n1"),
                ).fetchall()

        def beat_after() -> None:
            with conn.transaction():
                run(
                    "DELETE FROM nodes WHERE lease_until < now() AND node_id <> ? "
                    "RETURNING node_id",
                    ("n1",),
                ).fetchall()

        def register_before() -> None:
            with conn.transaction():
                run(
                    "INSERT INTO owners (app_session_id, node_id) SELECT app_session_id, ? "
                    "FROM app_sessions WHERE app_session_id NOT IN (SELECT app_session_id "
                    "FROM owners) ON CONFLICT DO NOTHING",
                    ("n1",),
                )

        def owned_before() -> None:
            run("SELECT app_session_id FROM owners WHERE node_id=?", ("n1",)).fetchall()

        def poll_before() -> None:
            for scope, version in facts.installed():  # verify_ahead, then load_registry
                facts.version_row(scope, version)
            for scope, version in facts.installed():
                facts.version_row(scope, version)

        sides: list[tuple[str, Callable[[], Any]]] = [
            ("heartbeat_before", beat_before),
            ("heartbeat_after", beat_after),
            ("register_before", register_before),
            ("register_after", lambda: None),
            ("owned_before", owned_before),
            ("owned_after", lambda: facts.session_mine("hs7")),
            ("registry_poll_before", poll_before),
            ("registry_poll_after", facts.installed_stamp),
        ]
        out: dict[str, list[float]] = {name: [] for name, _ in sides}
        for r in range(rounds):
            for i in range(0, len(sides), 2):
                pair = sides[i : i + 2] if r % 2 == 0 else sides[i : i + 2][::-1]
                for name, fn in pair:
                    out[name].append(timed(fn, reps))
        trips = store.round_trips
        poll_before()
        before_trips = store.round_trips - trips
        trips = store.round_trips
        facts.installed_stamp()
        out["registry_poll_trips_before"] = [float(before_trips)]
        out["registry_poll_trips_after"] = [float(store.round_trips - trips)]
        return out
    finally:
        conn.close()
        store.close()


def show(title: str, found: dict[str, list[float]]) -> None:
    print(title)
    for name, values in found.items():
        med = statistics.median(values)
        print(f"  {name:<28}{med:>10.3f}  [{min(values):.3f} .. {max(values):.3f}]")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=100_000)
    ap.add_argument("--apps", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--engines", default="sqlite,postgresql", help="which to measure")
    ap.add_argument("--smoke", action="store_true", help="a tiny size, one round")
    args = ap.parse_args()
    if args.smoke:
        args.calls, args.rounds, args.reps = 200, 1, 2
    print(f"history: {args.calls} finished calls; {args.rounds} rounds; ms, median [spread]")
    engines = args.engines.split(",")
    if "sqlite" in engines:
        with tempfile.TemporaryDirectory(prefix="lineup-bench-history-reads-") as tmp:
            bundle = build_bundle(Path(tmp))
            path = Path(tmp) / "history.db"
            sqlite_db(path, bundle, args.calls)
            show("SQLite", sqlite_rounds(path, args.rounds, args.reps))
    if "postgresql" not in engines:
        return
    if pg_bindir() is None:
        print("PostgreSQL: no server binaries found (LINEUP_PG_BINDIR): skipped")
        return
    server = start_server()
    try:
        found = pg_rounds(fresh_database(server), args.calls, args.apps, args.rounds, args.reps)
    finally:
        server.stop()
    show(f"PostgreSQL ({args.apps} apps installed)", found)


if __name__ == "__main__":
    main()
