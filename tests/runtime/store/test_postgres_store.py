"""The PostgreSQL store, one node (SPEC 15): the runtime on `postgresql://…`, the store's
rules on both engines (one runtime per database, the schema version, a failed commit or a
lost connection changes nothing), the same dump, and a password never shown.

Each test gets a new database on a throwaway server (`tests/pg_kit.py`); `db_target` runs a
test on an SQLite file and on PostgreSQL.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import psycopg
import pytest

from lineup_build.trust import TrustStore
from lineup_runtime_lite import Runtime, VirtualClock
from lineup_runtime_lite.internals import engine_of
from lineup_runtime_lite.store.database import open_database
from lineup_runtime_lite.store.postgres import (
    PostgresStore,
    check_no_live_runtime,
    drop_schema,
    redact_url,
)
from lineup_sdk.errors import LineupError
from tests.pg_kit import PgServer, fresh_database
from tests.runtime.conftest import message


def _apps(tmp_path: Path) -> Path:
    return tmp_path / "apps"


def test_todo_runs_on_postgres_and_survives_a_restart(
    pg_url: str, tmp_path: Path, trust: TrustStore, todo_bundle: Path
) -> None:
    with Runtime.open(pg_url, trust=trust, apps_dir=_apps(tmp_path)) as rt:
        rt.install(todo_bundle)
        assert rt.call("a1", "conv", "todo.add", {"title": "milk"})["stage"] == "accepted"
        rt.settle()
        assert message(rt, "a1:result")["result"]["count"] == 1
        assert rt.surface("conv", "todo").get().revision == 1
    with Runtime.open(pg_url, trust=trust, apps_dir=_apps(tmp_path)) as rt:
        again = rt.call("a1", "conv", "todo.add", {"title": "milk"})  # a replay
        assert again["stage"] == "result" and again["result"]["count"] == 1
        listed = rt.call("l1", "conv", "todo.list", {})
        assert [i["title"] for i in listed["result"]["items"]] == ["milk"]
        conflict = rt.call("a1", "conv", "todo.add", {"title": "eggs"})
        assert conflict["error"]["code"] == "call_id_conflict"


@pytest.mark.store
def test_a_second_runtime_on_the_database_is_refused(
    db_target: str, tmp_path: Path, trust: TrustStore
) -> None:
    apps = _apps(tmp_path)
    with Runtime.open(db_target, trust=trust, clock=VirtualClock(), apps_dir=apps):
        with pytest.raises(LineupError) as exc:
            Runtime.open(db_target, trust=trust, clock=VirtualClock(), apps_dir=apps)
        assert exc.value.code == "runtime_locked"
    Runtime.open(db_target, trust=trust, clock=VirtualClock(), apps_dir=apps).close()


@pytest.mark.store
def test_a_newer_schema_is_refused(db_target: str) -> None:
    open_database(db_target).close()
    store = open_database(db_target)
    try:
        store.set_meta("schema_version", "99")
    finally:
        store.close()
    with pytest.raises(LineupError) as exc:
        open_database(db_target)
    assert exc.value.code == "store_schema_unsupported"
    assert "99" in exc.value.message


@pytest.mark.store
def test_a_failed_transaction_changes_nothing(db_target: str) -> None:
    store = open_database(db_target)
    try:
        before = store.dump()
        with pytest.raises(RuntimeError), store.transaction() as db:
            db.execute("INSERT INTO apps VALUES ('x', '1.0.0')")
            raise RuntimeError("fail inside the transaction")
        assert store.dump() == before
    finally:
        store.close()


def _dump_shape(dump: dict[str, list[tuple[object, ...]]]) -> dict[str, int]:
    return {table: len(rows) for table, rows in dump.items()}


def test_both_engines_dump_the_same_tables_and_rows(
    pg_url: str, tmp_path: Path, trust: TrustStore, todo_bundle: Path
) -> None:
    dumps = []
    for target, apps in ((str(tmp_path / "rt.db"), tmp_path / "a1"), (pg_url, tmp_path / "a2")):
        with Runtime.open(target, trust=trust, clock=VirtualClock(), apps_dir=apps) as rt:
            rt.install(todo_bundle)
            rt.call("a1", "conv", "todo.add", {"title": "milk"})
            rt.settle()
            rt.call("l1", "conv", "todo.list", {})
            dumps.append(rt.store_dump())
    sqlite_dump, pg_dump = dumps
    digests = pg_dump.pop("bundles")  # PostgreSQL keeps the bundle: its digest is dumped
    assert digests == [(sqlite_dump["app_versions"][0][3],)]
    assert _dump_shape(pg_dump) == _dump_shape(sqlite_dump)
    assert pg_dump["receipts"] and len(pg_dump["receipts"][0]) == len(sqlite_dump["receipts"][0])
    # the same stages in the same order, whatever the ids
    assert [r[1] for r in pg_dump["receipts"]] == [r[1] for r in sqlite_dump["receipts"]]


def test_a_lost_connection_before_commit_is_store_unavailable_and_changes_nothing(
    pg_url: str, pg_server: PgServer
) -> None:
    store = PostgresStore(pg_url)
    try:
        before = store.dump()
        pid = store.db.conn.info.backend_pid
        with psycopg.connect(pg_server.url(), autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))

        def write(facts: object) -> None:
            store.db.execute("INSERT INTO apps VALUES ('x', '1.0.0')")

        with pytest.raises(LineupError) as exc:
            store.batch([write])  # the connection is gone: nothing is written
        assert exc.value.code == "store_unavailable"
        assert store.dump() == before  # the next use connects again
    finally:
        store.close()


def test_a_read_racing_the_close_keeps_no_connection(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A thread that opens the reader while the store closes (a wake-up read in flight)
    closes what it opened and is refused; after the close, reads and writes connect no
    more (each is `store_unavailable`), so nothing is left open for the garbage collector."""
    store = PostgresStore(pg_url)
    opened: list[Any] = []
    real_connect = psycopg.connect

    def connect_while_closing(*args: Any, **kwargs: Any) -> Any:
        conn = real_connect(*args, **kwargs)
        opened.append(conn)
        store.close()  # the close lands while this read is connecting
        return conn

    monkeypatch.setattr(psycopg, "connect", connect_while_closing)
    with pytest.raises(LineupError) as exc:
        store.db.execute("SELECT 1")  # not the writer: the reader is opened
    assert exc.value.code == "store_unavailable" and "closed" in exc.value.message
    assert len(opened) == 1 and opened[0].closed
    monkeypatch.setattr(psycopg, "connect", real_connect)
    for use in (
        lambda: store.db.execute("SELECT 1"),
        lambda: store.batch([lambda facts: None]),
    ):
        with pytest.raises(LineupError) as exc:
            use()
        assert exc.value.code == "store_unavailable"
    assert store._reader is None or store._reader.conn.closed
    assert store._main.conn.closed


def test_the_password_is_redacted_and_warned_about(
    pg_server: PgServer, caplog: pytest.LogCaptureFixture
) -> None:
    url = fresh_database(pg_server).replace("postgres@", "postgres:s3cret-pw@")
    assert redact_url(url) == url.replace("s3cret-pw", "***")
    assert "s3cret-pw" not in redact_url(url + "?password=s3cret-pw")
    with caplog.at_level(logging.WARNING, logger="lineup.runtime"):
        store = PostgresStore(url)
    try:
        assert "s3cret-pw" not in store.path and "***" in store.path
        assert any("password" in r.getMessage() for r in caplog.records)
        assert all("s3cret-pw" not in r.getMessage() for r in caplog.records)
    finally:
        store.close()
    down = url.replace(str(pg_server.port), "1")  # nothing listens on port 1
    with pytest.raises(LineupError) as exc:
        PostgresStore(down)
    assert exc.value.code == "store_unavailable"
    assert "s3cret-pw" not in str(exc.value) and "s3cret-pw" not in (exc.value.hint or "")


def test_a_private_schema_keeps_apart_and_is_dropped(pg_url: str) -> None:
    beside = open_database(pg_url)  # a runtime serving the database's default schema
    try:
        with pytest.raises(LineupError) as exc:
            check_no_live_runtime(pg_url)
        assert exc.value.code == "runtime_locked" and "--shared" in (exc.value.hint or "")
        store = open_database(pg_url, schema="lineup_run_t1")  # --shared: its own lock
        store.set_meta("k", "v")
        store.close()
        again = open_database(pg_url, schema="lineup_run_t1")  # kept until dropped
        assert again.meta("k") == "v"
        again.close()
        drop_schema(pg_url, "lineup_run_t1")
    finally:
        beside.close()
    check_no_live_runtime(pg_url)
    with psycopg.connect(pg_url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM information_schema.schemata WHERE schema_name = 'lineup_run_t1'"
        ).fetchone()
        assert row == (0,)
        assert conn.execute("SELECT to_regclass('public.meta')").fetchone() != (None,)


INSTALL = """
import sys
from lineup_build.signing import key_from_seed
from lineup_build.trust import TrustStore, TrustedKey
from lineup_runtime_lite import Runtime

url, apps, bundle, seed = sys.argv[1:5]
key = key_from_seed(bytes.fromhex(seed))
trust = TrustStore.from_keys([TrustedKey(key.key_id, key.public_raw, ("*",), "tests")])
with Runtime.open(url, trust=trust, apps_dir=apps) as rt:
    print(rt.install(bundle).action)
"""


def test_installed_in_one_process_runs_from_another_with_an_empty_cache(
    pg_url: str, tmp_path: Path, trust: TrustStore, todo_bundle: Path
) -> None:
    """The bundle is in the database: a node that never saw the file (another machine, an
    emptied cache) unpacks it, checks it with its own trust store, and serves the app."""
    import subprocess
    import sys

    first = tmp_path / "machine-a"
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            INSTALL,
            pg_url,
            str(first),
            str(todo_bundle),
            bytes(range(1, 33)).hex(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["installed"]
    second = tmp_path / "machine-b"  # empty: never saw the bundle file
    with Runtime.open(pg_url, trust=trust, apps_dir=second) as rt:
        assert [a["scope"] for a in rt.apps()] == ["todo"]
        assert rt.call("a1", "conv", "todo.add", {"title": "milk"})["stage"] == "accepted"
        rt.settle()
        assert message(rt, "a1:result")["result"]["count"] == 1
        assert rt.install(todo_bundle).action == "unchanged"  # the same bytes again
        digest = rt.store_dump()["app_versions"][0][3]
    # unpacked into this node's cache, in the folder named by the manifest's hash (SPEC 15)
    assert [p.name for p in second.iterdir() if not p.name.startswith("_")] == [digest]
    assert any((second / digest).rglob("*.py"))


def test_a_node_whose_trust_store_refuses_the_recorded_bundle_does_not_run_it(
    pg_url: str, tmp_path: Path, trust: TrustStore, todo_bundle: Path
) -> None:
    with Runtime.open(pg_url, trust=trust, apps_dir=tmp_path / "a") as rt:
        rt.install(todo_bundle)
    with psycopg.connect(pg_url, autocommit=True) as conn:  # the recorded bytes damaged
        conn.execute("UPDATE bundles SET bytes = substring(bytes from 1 for 200)")
    with Runtime.open(pg_url, trust=trust, apps_dir=tmp_path / "b") as rt:
        # the version lists no tools (SPEC 16.1): the Agent never sees it, a call to it is
        # an unknown method, and apps() says why
        assert not [t for t in rt.inventory() if t["method"].startswith("todo.")]
        first = rt.call("a1", "conv", "todo.add", {"title": "milk"})
        assert first["kind"] == "error", first
        assert first["error"]["code"] == "unknown_method", first
        (app,) = rt.apps()
        assert app["trusted"] is False and app["problem"]["code"] == "bundle_unreadable", app
    assert not any((tmp_path / "b").rglob("*.py"))  # nothing unpacked


def _lose_the_connection_at_commit(
    store: PostgresStore, monkeypatch: pytest.MonkeyPatch, pg_server: PgServer, *, landed: bool
) -> None:
    """The next COMMIT loses its connection: after the server committed it (`landed`: the
    answer never arrived) or before (the backend ended, so the transaction aborted)."""
    real = type(store._main).execute

    def execute(self: Any, sql: str, args: Any = ()) -> Any:
        if sql != "COMMIT":
            return real(self, sql, args)
        monkeypatch.setattr(type(store._main), "execute", real)
        if landed:
            real(self, sql, args)
            if self._pipeline is not None:
                self.sync()  # in a batch's pipeline: now it reaches the server
            self.conn.close()
        else:
            pid = self.conn.info.backend_pid
            with psycopg.connect(pg_server.url(), autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        raise psycopg.OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(type(store._main), "execute", execute)


@pytest.mark.parametrize("landed", [True, False], ids=["commit_landed", "commit_lost"])
def test_a_connection_lost_during_commit_is_resolved_by_asking_the_server(
    pg_url: str, pg_server: PgServer, monkeypatch: pytest.MonkeyPatch, landed: bool
) -> None:
    store = PostgresStore(pg_url)
    try:

        def write(facts: object) -> str:
            store.db.execute("INSERT INTO apps VALUES ('x', '1.0.0')")
            return "written"

        _lose_the_connection_at_commit(store, monkeypatch, pg_server, landed=landed)
        if landed:
            assert store.batch([write]) == ["written"]  # txid_status: committed
            assert store.commits == 1
        else:
            with pytest.raises(LineupError) as exc:
                store.batch([write])
            assert exc.value.code == "store_unavailable"
            assert "nothing was changed" in exc.value.message
            assert store.commits == 0
        rows = store.all("SELECT scope FROM apps")
        assert [r[0] for r in rows] == (["x"] if landed else [])
    finally:
        store.close()


@pytest.mark.parametrize("landed", [True, False], ids=["commit_landed", "commit_lost"])
def test_a_call_whose_commit_lost_its_connection_replays_either_way(
    pg_url: str,
    pg_server: PgServer,
    tmp_path: Path,
    trust: TrustStore,
    todo_bundle: Path,
    monkeypatch: pytest.MonkeyPatch,
    landed: bool,
) -> None:
    with Runtime.open(pg_url, trust=trust, apps_dir=_apps(tmp_path)) as rt:
        rt.install(todo_bundle)
        rt.call("a0", "conv", "todo.add", {"title": "warm"})
        rt.settle()  # the session is ready: the next call is answered in one batch
        store = engine_of(rt).store
        assert isinstance(store, PostgresStore)
        _lose_the_connection_at_commit(store, monkeypatch, pg_server, landed=landed)
        if landed:
            first = rt.call("a1", "conv", "todo.add", {"title": "milk"})
            assert first["stage"] == "result"
        else:
            with pytest.raises(LineupError) as exc:
                rt.call("a1", "conv", "todo.add", {"title": "milk"})
            assert exc.value.code == "store_unavailable"
        again = rt.call("a1", "conv", "todo.add", {"title": "milk"})  # the retry
        assert again["stage"] == "result" and again["result"]["count"] == 2
        if landed:
            assert again == first  # the stored final, replayed
        listed = rt.call("l1", "conv", "todo.list", {})
        assert [i["title"] for i in listed["result"]["items"]] == ["warm", "milk"]


def test_a_batch_waiting_on_the_database_never_holds_up_the_event_loop(
    pg_url: str, tmp_path: Path, trust: TrustStore, todo_bundle: Path
) -> None:
    """A commit held up at the server (here: another session locks the outbox) runs on the
    store thread: the loop goes on serving (a heartbeat task, reads of committed facts)
    until it lands."""
    import asyncio
    import threading

    from lineup_runtime_lite import AsyncRuntime

    async def main() -> None:
        async with await AsyncRuntime.open(pg_url, trust=trust, apps_dir=_apps(tmp_path)) as rt:
            await rt.install(todo_bundle)
            await rt.call("a0", "conv", "todo.add", {"title": "warm"})
            await rt.settle()
            blocker = psycopg.connect(pg_url)
            blocker.execute("LOCK TABLE outbox IN EXCLUSIVE MODE")  # writes wait; reads go on
            released = threading.Event()

            def release() -> None:
                if not released.is_set():
                    released.set()
                    blocker.rollback()

            watchdog = threading.Timer(10, release)  # never needed when the loop is free
            watchdog.start()
            beats = 0
            try:
                call = asyncio.ensure_future(rt.call("a1", "conv", "todo.add", {"title": "x"}))
                while beats < 5 and not call.done():
                    await asyncio.sleep(0.01)
                    beats += 1
                    assert [m["call_id"] for m in await rt.outbox.fetch(100)]  # committed reads
                assert not call.done() and beats == 5, "the loop stopped while the batch waited"
                release()
                answer = await call
                assert answer["stage"] == "result"
            finally:
                watchdog.cancel()
                release()
                blocker.close()

    asyncio.run(main())


@pytest.mark.store
def test_a_step_that_raises_writes_nothing_and_the_rest_of_its_batch_commits(
    db_target: str,
) -> None:
    """Group commit on both engines: PostgreSQL runs a batch without savepoints first and,
    when a step raises, again with one per step: the same outcome as SQLite's."""
    store = open_database(db_target)
    runs: list[str] = []

    def insert(scope: str, fail: bool = False) -> Any:
        def step(facts: object) -> str:
            runs.append(scope)
            store.db.execute("INSERT INTO apps VALUES (?, '1.0.0')", (scope,))
            if fail:
                raise LookupError(scope)
            return scope

        return step

    try:
        before = store.commits
        out = store.batch([insert("a"), insert("b", fail=True), insert("c")])
        assert out[0] == "a" and isinstance(out[1], LookupError) and out[2] == "c"
        rows = store.all("SELECT scope FROM apps ORDER BY scope")
        assert [r[0] for r in rows] == ["a", "c"]
        assert store.commits == before + 1
        assert runs.count("a") in (1, 2) and runs[-1] == "c"
        clean = store.batch([insert("d"), insert("e")])  # nothing raises: one run
        assert clean == ["d", "e"] and runs[-2:] == ["d", "e"]
    finally:
        store.close()


def test_a_lock_held_elsewhere_times_out_as_store_unavailable_and_changes_nothing(
    pg_url: str, tmp_path: Path, trust: TrustStore, todo_bundle: Path
) -> None:
    """F21's busy database on PostgreSQL: another session holds a lock the answer's batch
    needs; past the lock timeout (the URL's own here, 100 ms; the runtime's default is 10 s)
    that batch fails and keeps nothing; once its retries are spent the waiting caller hears
    `store_unavailable` (never a hang), and a retry once the lock is gone replays the one
    final the call got."""
    url = pg_url + "?options=-c%20lock_timeout%3D100"
    with Runtime.open(url, trust=trust, apps_dir=_apps(tmp_path)) as rt:
        rt.install(todo_bundle)
        rt.call("a0", "conv", "todo.add", {"title": "warm"})
        rt.settle()
        with psycopg.connect(pg_url) as blocker:
            blocker.execute("LOCK TABLE outbox IN EXCLUSIVE MODE")  # the answer writes there
            with pytest.raises(LineupError) as exc:
                rt.call("a1", "conv", "todo.add", {"title": "milk"})
            assert exc.value.code == "store_unavailable"
            assert "lock" in exc.value.message and "retry the same call_id" in (
                exc.value.hint or ""
            )
            blocker.rollback()
        assert [s for s, *_ in rt.store_dump()["receipts"] if s == "a1"] == []  # no answer kept
        # the handler ran but its answer was never stored: at most once, the call ends
        # `delivery_interrupted`, and every retry replays that one final
        again = rt.call("a1", "conv", "todo.add", {"title": "milk"})
        assert again["stage"] == "error", again
        assert again["error"]["code"] == "delivery_interrupted"
        assert rt.call("a1", "conv", "todo.add", {"title": "milk"}) == again
        fresh = rt.call("a2", "conv", "todo.add", {"title": "tea"})  # the store is back
        assert fresh["stage"] == "result"


@pytest.mark.store
def test_a_step_that_lost_its_race_never_writes_past_its_guard(db_target: str) -> None:
    """Two steps of one batch end the same thing: the second one's guard finds no row, so
    it loses its race (`LostRace`) and writes nothing after the guard — its IM record would
    break the first one's key. On PostgreSQL the pipelined first run stops at the refused
    write and the careful run finds the lost race where SQLite does."""
    from lineup_runtime_lite.core.port import LostRace

    store = open_database(db_target)
    try:
        store.set_meta("focus", "running")

        def end(facts: Any) -> str:
            cur = store.db.execute(
                "UPDATE meta SET value='ended' WHERE key='focus' AND value='running'"
            )
            facts._writes._guard(cur)
            store.db.execute(
                "INSERT INTO im_records (operation_id, conversation_id, body, created_ms) "
                "VALUES ('op1', 'c1', '{}', 0)"
            )
            return "ended"

        out = store.batch([end, end])
        assert out[0] == "ended" and isinstance(out[1], LostRace)
        assert [tuple(r) for r in store.all("SELECT operation_id FROM im_records")] == [("op1",)]
        assert store.meta("focus") == "ended"
    finally:
        store.close()


def test_without_psycopg_a_postgres_url_is_usage_invalid_with_the_install_hint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "psycopg", None)  # the `postgres` extra not installed
    with pytest.raises(LineupError) as exc:
        open_database("postgresql://lineup@db.invalid/lineup")
    assert exc.value.code == "usage_invalid"
    from lineup_sdk import __version__

    hint = exc.value.hint or ""  # a checkout's and a wheel's install line, nothing else
    assert 'pip install ".[postgres]"' in hint
    assert f'pip install "lineup_sdk-{__version__}-py3-none-any.whl[postgres]"' in hint
    assert "lineup-sdk[" not in hint


def _session_with_activation(store: Any, conversation: str) -> None:
    from lineup_runtime_lite.core.decisions import NewActivation, NewSession

    def make(facts: Any) -> None:
        facts.apply(NewSession(f"ses-{conversation}", conversation, "demo", "1.0.0", 0))
        facts.apply(NewActivation(f"act-{conversation}", f"ses-{conversation}", "t0", False, 9, 0))

    assert store.batch([make]) == [None]


def _seen_state(conversation: str, call_id: str) -> Any:
    """A batch step that says what it reads first (as a call's acceptance does) and
    returns the activation state it read."""
    from lineup_runtime_lite.core.port import CallRead, ReadingStep

    def read(facts: Any) -> str | None:
        _call, _session, act = facts.call_and_session(call_id, conversation, "demo")
        return None if act is None else str(act.state)

    return ReadingStep(read, CallRead(call_id, conversation, "demo"))


@pytest.mark.store
def test_a_read_sent_ahead_of_its_batch_that_an_earlier_step_made_stale_is_not_used(
    db_target: str,
) -> None:
    """On PostgreSQL the acceptance reads of a batch go ahead of its first step (they ride
    its first round trip). An earlier step of the batch fails the activation a later step
    reads: that step must decide on `failed`, never on the `starting` read ahead (a call
    queued behind a failed activation would be stranded: no guard of its write sees it)."""
    from lineup_runtime_lite.core.decisions import ActivationUpdate

    store = open_database(db_target)
    try:
        _session_with_activation(store, "c1")
        _session_with_activation(store, "c2")

        def fail(facts: Any) -> str:
            facts.apply(ActivationUpdate("act-c1", state="failed", reason="x", ended_ms=1))
            return "failed it"

        out = store.batch([_seen_state("c2", "k0"), fail, _seen_state("c1", "k1")])
        assert out == ["starting", "failed it", "failed"]
    finally:
        store.close()


def test_a_batch_of_call_acceptances_asks_the_server_in_three_round_trips(pg_url: str) -> None:
    """SPEC 15's round-trip bar: a batch's acceptance reads travel together (with its
    BEGIN), are checked again where each step stands without waiting, and the batch ends
    with its guards' sync and its COMMIT — three waits for twelve calls, not fourteen."""
    store = PostgresStore(pg_url)
    try:
        conversations = [f"c{i}" for i in range(12)]
        for c in conversations:
            _session_with_activation(store, c)
        before = store.round_trips
        out = store.batch([_seen_state(c, f"k{c}") for c in conversations])
        assert out == ["starting"] * 12
        assert store.round_trips - before == 3
    finally:
        store.close()
