"""Replay the runtime-neutral golden fixtures (scenario format v2 as JSON: steps + exact
expected events) against `lineup_runtime_lite` through the same driver as `lineup test`.
Another Host can replay the same files; the README gives the format."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lineup_runtime_lite.sim.format import load_scenario
from lineup_runtime_lite.sim.simulation import Simulation
from tests.conformance.conformance_kit import FIXTURES, KEY, _trust, bundles

__all__ = ["bundles"]


@pytest.fixture()
def sim_factory(db_target: str, store_engine: str, bundles: dict[str, Path]) -> Iterator[Any]:
    """Simulations on the chosen store engine: an SQLite file, or a private schema of a
    fresh PostgreSQL database."""
    sims: list[Simulation] = []

    def make(app: str, policy: str) -> Simulation:
        from lineup_runtime_lite.store.postgres import private_schema

        schema = private_schema("test") if store_engine == "postgresql" else None
        sim = Simulation(db_target, _trust(KEY), bundles[app], app, policy, db_schema=schema)
        sim.start()
        sims.append(sim)
        return sim

    yield make
    for sim in sims:
        sim.close()


@pytest.mark.store
@pytest.mark.parametrize("path", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_fixture(path: Path, sim_factory: Any) -> None:
    scenario = load_scenario(path)  # the scenario model: fixtures are JSON, scenarios TOML
    header = scenario.header
    assert header.review and header.title and header.app and header.host, "fixture metadata"
    sim: Simulation = sim_factory(header.app, header.host)
    reports = sim.play(scenario)  # the one replay driver `lineup run` and `lineup test` use
    failed = [f"step {r.index} ({r.description}): {r.problem}" for r in reports if not r.ok]
    assert not failed, f"{path.name}: " + "; ".join(failed)


#: SPEC 17's fixtures: replayed on both engines by `test_fixture` (the store tests' two CI
#: passes), and from a Surface frame in Chromium against `lineup dev`
#: (tests/web/test_fixtures_in_browser.py).
UI_ACTION_FIXTURES = [p for p in FIXTURES if p.stem.startswith("tis2_06_")]


def test_the_ui_action_fixtures_are_the_required_ones() -> None:
    assert {p.stem for p in UI_ACTION_FIXTURES} >= {
        "tis2_06_agent_and_ui_interleaved",
        "tis2_06_resend_applied_once",
        "tis2_06_out_of_order",
        "tis2_06_action_id_conflict",
        "tis2_06_business_refusal",
        "tis2_06_action_interrupted_by_crash",
        "tis2_06_tool_interrupted_by_crash",
        "tis2_06_action_while_starting",
    }
