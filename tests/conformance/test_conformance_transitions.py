"""Replay every conformance fixture on the production runtime with no process: the driver
`lineup run` and `lineup test` use (`simulate.Simulation`), over SQLite `:memory:` and over
PostgreSQL (a private schema on the session's server, SPEC 15), on a virtual clock, with an in-process worker at the worker port (tests/runtime/
inprocess_worker.py) that runs the app's handlers through `lineup_sdk`'s dispatcher. The
events must match the fixture's expected events exactly as the process replay's do
(`test_conformance.py`); changing a transition's answer fails it
(tests/runtime/core/test_production_decisions.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lineup_runtime_lite.drivers import workers
from lineup_runtime_lite.sim.format import load_scenario
from lineup_runtime_lite.sim.simulation import Simulation
from lineup_runtime_lite.store.postgres import private_schema
from tests.conformance.test_conformance import FIXTURES, KEY, _trust, bundles  # noqa: F401
from tests.pg_kit import PgServer
from tests.runtime.inprocess_worker import InProcessPort


def replay_in_process(
    path: Path,
    bundles: dict[str, Path],  # noqa: F811
    db: Path | str = Path(":memory:"),
    db_schema: str | None = None,
) -> InProcessPort:
    """Play one fixture; its failed steps fail the assertion. The port made its workers."""
    scenario = load_scenario(path)
    header = scenario.header
    assert header.app and header.host
    port = InProcessPort()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(workers, "process_port", port)
        sim = Simulation(
            db, _trust(KEY), bundles[header.app], header.app, header.host, db_schema=db_schema
        )
        try:
            sim.start()
            reports = sim.play(scenario)
        finally:
            sim.close()
    failed = [f"step {r.index} ({r.description}): {r.problem}" for r in reports if not r.ok]
    assert not failed, f"{path.name}: " + "; ".join(failed)
    return port


@pytest.mark.parametrize("path", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_fixture_in_process(path: Path, bundles: dict[str, Path]) -> None:  # noqa: F811
    port = replay_in_process(path, bundles)
    assert all(w.dead for w in port.workers)  # closing the runtime stopped them


@pytest.mark.parametrize("path", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_fixture_on_postgres(
    path: Path,
    bundles: dict[str, Path],  # noqa: F811
    pg_server: PgServer,
) -> None:
    port = replay_in_process(path, bundles, pg_server.url(), private_schema("conformance"))
    assert all(w.dead for w in port.workers)
