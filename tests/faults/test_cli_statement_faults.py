"""The CLI commands with a database error injected at their statements (SPEC 16.1): `lineup
run` and `lineup test` on an SQLite file and on PostgreSQL answer an injected error with a
stable code (or absorb it: a race retried), never a traceback. A scenario run sends a few
hundred statements, so the error goes at evenly spaced statements (`POINTS` per kind,
first and last included) to keep the sweep within CI's time; the library entries under
them are swept at every statement (`test_statement_faults.py`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lineup_build.init import init_project
from lineup_build.trust import TrustStore
from tests.cli_kit import run_cli
from tests.faults.statements import KINDS, injecting

pytestmark = pytest.mark.slow  # handed out first under pytest-xdist


#: Statements per kind an error is injected at.
POINTS = 3
#: What an injected error may be answered with: the store's codes, or a scenario whose
#: expectation failed because a step the error refused never happened.
STABLE = ("store_unavailable", "runtime_locked", "expectation_failed")


def _spread(n: int, points: int) -> list[int]:
    if n <= points:
        return list(range(1, n + 1))
    return sorted({1 + round(i * (n - 1) / (points - 1)) for i in range(points)})


@pytest.mark.store
def test_lineup_run_and_test_answer_injected_database_errors_with_stable_codes(
    store_engine: str,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    trust: TrustStore,
    pomodoro_bundle: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    trust_file = tmp_path / "trust.toml"
    trust.save(trust_file)
    scenario = Path(__file__).resolve().parents[2] / "templates/pomodoro/scenarios/happy.toml"
    engine = store_engine
    url = str(request.getfixturevalue("pg_url")) if engine == "postgresql" else ""
    runs = iter(range(10**6))
    project = tmp_path / "focus"
    init_project(project, template="pomodoro")

    def db() -> str:
        return url or str(tmp_path / f"state-{next(runs)}.db")

    commands: dict[str, Any] = {
        "run": lambda: ["run", str(pomodoro_bundle), "--trust", str(trust_file),
                        "--scenario", str(scenario), "--db", db(), "--json"],
        # `lineup test` takes a PostgreSQL --db only (SQLite: each scenario in memory)
        "test": lambda: ["test", str(project), "-k", "happy", "--format", "json"]
        + (["--db", url] if url else []),
    }  # fmt: skip
    escaped: list[str] = []
    with injecting(monkeypatch, engine) as injector:
        for name, argv in commands.items():
            with injector.run():
                code, out, err = run_cli(argv(), capsys)
            assert code == 0, (name, out, err)
            total = injector.count
            for at in _spread(total, POINTS):
                for kind, make in KINDS[engine].items():
                    with injector.run(at, make):
                        code, out, err = run_cli(argv(), capsys)
                    said = out + err
                    if "Traceback" in said or (code != 0 and not any(c in said for c in STABLE)):
                        escaped.append(f"{name} @{at}/{total} {kind}: exit {code}: {said[-400:]}")
                    if code == 0 and name == "run":
                        assert json.loads(out.splitlines()[-1])["ok"] is True
    assert escaped == [], "\n".join(escaped)
