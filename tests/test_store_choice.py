"""The store tests run on the engine `LINEUP_TEST_STORE` names (tests/store_kit.py): `sqlite`
by default, `postgresql` on request, anything else a usage error before collection; and a
test is marked `store` exactly when it runs on that engine (tests/conftest.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import store_marking_problems
from tests.store_kit import VARIABLE, chosen_engine

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("named", "engine"),
    [(None, "sqlite"), ("", "sqlite"), ("sqlite", "sqlite"), ("postgresql", "postgresql")],
    ids=["unset", "empty", "sqlite", "postgresql"],
)
def test_the_variable_names_the_engine(
    monkeypatch: pytest.MonkeyPatch, named: str | None, engine: str
) -> None:
    if named is None:
        monkeypatch.delenv(VARIABLE, raising=False)
    else:
        monkeypatch.setenv(VARIABLE, named)
    assert chosen_engine() == engine


@pytest.mark.parametrize("named", ["postgres", "SQLite", "mysql"])
def test_any_other_engine_is_a_usage_error(monkeypatch: pytest.MonkeyPatch, named: str) -> None:
    monkeypatch.setenv(VARIABLE, named)
    with pytest.raises(pytest.UsageError, match=f"{VARIABLE}='{named}' names no store engine"):
        chosen_engine()


def test_a_run_with_an_unknown_engine_stops_before_collecting() -> None:
    env = {**os.environ, VARIABLE: "postgres"}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "0", "--collect-only", "-q", "tests/store_kit.py"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == pytest.ExitCode.USAGE_ERROR, run.stdout + run.stderr
    assert "LINEUP_TEST_STORE='postgres' names no store engine" in run.stderr
    assert "sqlite, postgresql" in run.stderr


@dataclass
class _Item:
    """What the marking check reads of a collected test."""

    nodeid: str
    fixturenames: list[str]
    markers: set[str] = field(default_factory=set)

    def get_closest_marker(self, name: str) -> object | None:
        return name if name in self.markers else None


def test_a_store_test_is_marked_and_a_marked_test_runs_on_the_store() -> None:
    items = [
        _Item("t.py::marked_and_on_it", ["db_target", "store_engine"], {"store"}),
        _Item("t.py::neither", ["tmp_path"]),
        _Item("t.py::on_it_unmarked", ["rt", "store_engine"]),
        _Item("t.py::marked_elsewhere", ["pg_url"], {"store"}),
    ]
    assert store_marking_problems(items) == [  # type: ignore[arg-type]
        "t.py::on_it_unmarked: runs on store_engine, but is not marked store",
        "t.py::marked_elsewhere: marked store, but opens no store on store_engine",
    ]


@pytest.mark.store
def test_db_target_is_on_the_chosen_engine(store_engine: str, db_target: str) -> None:
    assert db_target.startswith("postgresql://") == (store_engine == "postgresql")
