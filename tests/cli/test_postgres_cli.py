"""`--db postgresql://…` through the real CLI (SPEC 15): `lineup test` and `lineup run` play
in a private schema that is gone afterwards, refuse a database a runtime is serving unless
`--shared`, and never print the password."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest

from lineup_build.init import init_project
from lineup_runtime_lite.store.database import open_database
from tests.cli_kit import run_cli
from tests.pg_kit import PgServer, fresh_database


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
