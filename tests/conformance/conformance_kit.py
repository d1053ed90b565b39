"""The conformance fixtures and what replays them: the fixture files, the bundles they run
(pomodoro, notes, tasks) signed with a fixed key, the trust store of that key, and the
in-process replay on the production runtime (an in-process worker at the worker port)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from lineup_build.build import build_project
from lineup_build.init import init_project
from lineup_build.signing import SigningKey, key_from_seed
from lineup_build.trust import TrustedKey, TrustStore
from lineup_runtime_lite.drivers import workers
from lineup_runtime_lite.sim.format import load_scenario
from lineup_runtime_lite.sim.simulation import Simulation
from tests.runtime.inprocess_worker import InProcessPort

HERE = Path(__file__).parent
FIXTURES = sorted((HERE / "fixtures").glob("*.json"))
KEY = key_from_seed(bytes(range(100, 132)))


@pytest.fixture(scope="module")
def bundles(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out: dict[str, Path] = {}
    root = tmp_path_factory.mktemp("conformance")
    init_project(root / "pomodoro", template="pomodoro")
    shutil.copytree(HERE / "apps" / "notes", root / "notes")
    shutil.copytree(HERE / "apps" / "tasks", root / "tasks")  # UI Actions (SPEC 17)
    for name in ("pomodoro", "notes", "tasks"):
        result = build_project(root / name, signing_key=KEY)
        assert result.ok and result.bundle is not None, [d.to_dict() for d in result.diagnostics]
        out[name] = result.bundle
    return out


def _trust(key: SigningKey) -> TrustStore:
    return TrustStore.from_keys([TrustedKey(key.key_id, key.public_raw, ("*",), "conformance")])


def replay_in_process(
    path: Path,
    bundles: dict[str, Path],
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
