"""`--db postgresql://…` through the real CLI (SPEC 15): `lineup test` and `lineup run` play
in a private schema that is gone afterwards, refuse a database a runtime is serving unless
`--shared`, and never print the password."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import psycopg
import pytest

from lineup_build.init import init_project
from lineup_runtime_lite.store.database import open_database
from tests.cli_kit import Served, run_cli, serving_http
from tests.pg_kit import PgServer, fresh_database

TOKEN = "pg-token-0123456789"
CALL_ID = "io.lineup/call_id"


@pytest.fixture(scope="module")
def focus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("pg") / "focus"
    init_project(root, template="pomodoro")
    return root


def _schemas(url: str) -> list[str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT schema_name FROM information_schema.schemata "
            "WHERE schema_name LIKE 'lineup_%' ORDER BY 1"
        ).fetchall()
    return [str(r[0]) for r in rows]


def test_lineup_test_on_postgres_plays_every_scenario_and_leaves_nothing(
    focus: Path, pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli(["test", str(focus), "--db", pg_url, "--format", "json"], capsys)
    assert code == 0, out + err
    doc = json.loads(out)
    assert doc["ok"] is True and doc["passed"] == len(list((focus / "scenarios").glob("*.toml")))
    assert _schemas(pg_url) == []  # each scenario's private schema dropped


def test_lineup_run_on_postgres_restarts_inside_its_schema(
    focus: Path, pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = focus / "scenarios" / "restart_while_focusing.toml"
    code, out, err = run_cli(
        ["run", str(focus), "--scenario", str(scenario), "--db", pg_url, "--json"], capsys
    )
    assert code == 0, out + err
    assert json.loads(out.splitlines()[-1])["ok"] is True
    assert _schemas(pg_url) == []


def test_a_served_database_is_refused_unless_shared(
    focus: Path, pg_server: PgServer, capsys: pytest.CaptureFixture[str]
) -> None:
    url = fresh_database(pg_server).replace("postgres@", "postgres:hunter2-pw@")
    serving = open_database(url)  # a runtime on the database's own tables
    try:
        code, out, err = run_cli(["test", str(focus), "--db", url, "--json"], capsys)
        assert code != 0
        doc = json.loads(out)
        assert doc["error"]["code"] == "runtime_locked"
        assert "--shared" in doc["error"]["hint"]
        assert "hunter2-pw" not in out + err and "***" in doc["error"]["message"]
        code, out, err = run_cli(
            ["test", str(focus), "--db", url, "--shared", "-k", "happy", "--json"], capsys
        )
        assert code == 0, out + err
        assert "hunter2-pw" not in out + err
    finally:
        serving.close()


def test_lineup_test_refuses_an_sqlite_db(
    focus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_cli(["test", str(focus), "--db", str(tmp_path / "x.db"), "--json"], capsys)
    assert code == 2
    assert json.loads(out)["error"]["code"] == "usage_invalid"


@contextmanager
def _serve_http(cwd: Path, db: str, env: dict[str, str], *extra: str) -> Iterator[Served]:
    """`lineup serve todo --http` on `db`, started on PostgreSQL."""
    with serving_http(["todo", "--db", db, "--http", "127.0.0.1:0", *extra], cwd, TOKEN, env) as on:
        assert on.url.startswith("http://127.0.0.1:"), on.text
        assert "state in postgresql://" in on.text
        yield on


def test_serve_http_on_postgres_restarts_and_moves_to_an_empty_cache(
    tmp_path: Path, pg_url: str
) -> None:
    """SPEC 15's "done when": `lineup serve --http --db postgresql://…`, restarted, then
    moved to another machine (a copy of the project, an empty cache): every call, receipt
    and session is there, through the real MCP client."""
    from tests.runtime.serve_kit import call_meta, http_session

    first = tmp_path / "machine-a"
    init_project(first / "todo", template="todo", scope="todo")
    env_a = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache-a")}

    async def add() -> Any:
        async with http_session(url, TOKEN) as s:
            added = await s.call_tool("todo-add", {"title": "tea"}, meta=call_meta({CALL_ID: "h1"}))
            assert not added.is_error, added
            return added.structured_content

    with _serve_http(first, pg_url, env_a) as served:
        url = served.url
        added = anyio.run(add)

    second = tmp_path / "machine-b"  # the same project (and its dev key), another cache
    shutil.copytree(first, second)
    env_b = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache-b")}

    async def after() -> None:
        async with http_session(url, TOKEN) as s:
            again = await s.call_tool("todo-add", {"title": "tea"}, meta=call_meta({CALL_ID: "h1"}))
            assert again.structured_content == added  # the stored final, replayed
            listed = await s.call_tool("todo-list", {})
            assert [i["title"] for i in listed.structured_content["items"]] == ["tea"]

    with _serve_http(second, pg_url, env_b) as served:
        url = served.url
        anyio.run(after)
    assert any(
        (tmp_path / "cache-b" / "lineup" / "apps").rglob("*.py")
    )  # unpacked from the database


def test_two_serve_nodes_on_one_database_and_the_failover_path(tmp_path: Path, pg_url: str) -> None:
    """The several-nodes guide's path (docs/guides/postgres-and-nodes.md), through the real
    MCP client: two `lineup serve --http` nodes on one database; a call on the node that
    does not own the conversation answers as one node would; the owner is SIGKILLed; its
    client reconnects to the other node, whose next call waits out the lease and is
    delivered there, and replays by
    call_id (`_meta` or `lineup-result`) give the stored finals."""
    import signal

    from tests.runtime.serve_kit import call_meta, http_session

    init_project(tmp_path / "todo", template="todo", scope="todo")
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    with (
        _serve_http(tmp_path, pg_url, env, "--node-id", "a", "--node-lease", "1") as a,
        _serve_http(tmp_path, pg_url, env, "--node-id", "b", "--node-lease", "1") as b,
    ):
        url_a, url_b = a.url, b.url

        async def add(url: str, call_id: str, title: str) -> Any:
            async with http_session(url, TOKEN) as s:
                got = await s.call_tool(
                    "todo-add", {"title": title}, meta=call_meta({CALL_ID: call_id})
                )
                assert not got.is_error, got
                return got.structured_content

        first = anyio.run(add, url_a, "n1", "tea")  # a owns the conversation
        second = anyio.run(add, url_b, "n2", "milk")  # delivered by a, answered by b
        assert first["count"] == 1 and second["count"] == 2, (first, second)
        a.proc.send_signal(signal.SIGKILL)
        a.proc.wait(timeout=30)
        third = anyio.run(add, url_b, "n3", "eggs")  # b takes the conversation over
        assert third["count"] == 3, third

        async def replays() -> None:
            async with http_session(url_b, TOKEN) as s:
                again = await s.call_tool(
                    "todo-add", {"title": "tea"}, meta=call_meta({CALL_ID: "n1"})
                )
                assert again.structured_content == first  # stored on a, replayed on b
                stored = await s.call_tool("lineup-result", {"call_id": "n2"})
                assert not stored.is_error, stored
                assert "milk" in json.dumps(stored.structured_content)
                listed = await s.call_tool("todo-list", {})
                titles = [i["title"] for i in listed.structured_content["items"]]
                assert titles == ["tea", "milk", "eggs"]  # each once, in order

        anyio.run(replays)


def test_serve_lists_no_tool_of_a_tampered_row_on_an_empty_and_a_filled_cache(
    tmp_path: Path, pg_url: str
) -> None:
    """SPEC 16.1: a database writer changes a tool's description and input schema in the
    `app_versions` row; `lineup serve` on that database (its apps cache filled by an
    earlier run, or empty on another machine) lists none of the app's tools through the
    real MCP client and says why on start."""
    from tests.runtime.serve_kit import http_session

    first = tmp_path / "machine-a"
    init_project(first / "todo", template="todo", scope="todo")
    env_a = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache-a")}

    async def listed(url: str) -> list[Any]:
        async with http_session(url, TOKEN) as s:
            return list((await s.list_tools()).tools)

    with _serve_http(first, pg_url, env_a) as served:
        signed = anyio.run(listed, served.url)
    assert "todo-add" in {t.name for t in signed}
    planted = "the database writer's words for the Agent"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        (manifest,) = conn.execute("SELECT manifest FROM app_versions").fetchone() or ("",)
        doc = json.loads(bytes(manifest))
        for tool in doc["tools"]:
            tool["description"] = planted
            tool["input_schema"] = {"type": "object", "description": planted}
        conn.execute("UPDATE app_versions SET manifest = %s", (json.dumps(doc).encode(),))
    second = tmp_path / "machine-b"
    shutil.copytree(first, second)
    env_b = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache-b")}
    for cwd, env in ((first, env_a), (second, env_b)):
        args = ["todo", "--db", pg_url, "--http", "127.0.0.1:0"]
        with serving_http(args, cwd, TOKEN, env) as served:
            said = served.text
            assert served.url.startswith("http://127.0.0.1:"), said
            tools = anyio.run(listed, served.url)
        assert [t.name for t in tools] == ["lineup-result"], tools  # the runtime's own
        assert planted not in repr(tools)
        assert "todo 1.0.0 untrusted, no tools served" in said and "install_tampered" in said
    assert not any((tmp_path / "cache-b").rglob("*.py"))  # nothing unpacked from that row
