"""Replay the runtime-neutral golden fixtures (JSON steps + exact expected events) against
`lineup_runtime_lite`. Another Host can replay the same files; the README gives the format."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lineup_build.build import build_project
from lineup_build.init import init_project
from lineup_build.signing import SigningKey, key_from_seed
from lineup_build.trust import TrustedKey, TrustStore
from lineup_runtime_lite.scenario import matches, parse_scenario
from lineup_runtime_lite.simulate import Simulation

HERE = Path(__file__).parent
FIXTURES = sorted((HERE / "fixtures").glob("*.json"))
KEY = key_from_seed(bytes(range(100, 132)))


@pytest.fixture(scope="module")
def bundles(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out: dict[str, Path] = {}
    root = tmp_path_factory.mktemp("conformance")
    init_project(root / "pomodoro", template="pomodoro")
    shutil.copytree(HERE / "apps" / "notes", root / "notes")
    for name in ("pomodoro", "notes"):
        result = build_project(root / name, signing_key=KEY)
        assert result.ok and result.bundle is not None, [d.to_dict() for d in result.diagnostics]
        out[name] = result.bundle
    return out


def _trust(key: SigningKey) -> TrustStore:
    return TrustStore.from_keys([TrustedKey(key.key_id, key.public_raw, ("*",), "conformance")])


@pytest.fixture()
def sim_factory(tmp_path: Path, bundles: dict[str, Path]) -> Iterator[Any]:
    sims: list[Simulation] = []

    def make(app: str, policy: str) -> Simulation:
        sim = Simulation(tmp_path / "rt.db", _trust(KEY), bundles[app], app, policy)
        sim.start()
        sims.append(sim)
        return sim

    yield make
    for sim in sims:
        sim.close()


@pytest.mark.parametrize("path", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_fixture(path: Path, sim_factory: Any) -> None:
    doc = json.loads(path.read_text("utf-8"))
    assert set(doc) == {"review", "title", "app", "host_policy", "steps"}
    sim: Simulation = sim_factory(doc["app"], doc["host_policy"])
    subscriptions: dict[str, list[dict[str, Any]]] = {}
    for i, raw in enumerate(doc["steps"], start=1):
        expect = raw.get("expect")
        if "subscribe" in raw:
            sub = raw["subscribe"]
            frames = subscriptions.setdefault(sub["as"], [])
            sim.runtime().surface(sub["conversation"], sub["scope"]).subscribe(
                lambda kind, snap, frames=frames: frames.append(
                    {"frame": kind, "revision": snap.revision, "data": snap.data}
                )
            )
            emitted = list(frames)
        elif "frames" in raw:
            sim.runtime().settle()  # listeners run off the loop; settle drains their queues
            emitted = list(subscriptions[raw["frames"]["as"]])
        else:
            step_doc = {k: v for k, v in raw.items() if k not in ("expect", "outbox_grew")}
            step = parse_scenario({"step": [step_doc]}, source=path.name).steps[0]
            before = len(sim.runtime().outbox.all())
            emitted = sim.act(step)
            if raw.get("outbox_grew") is False:
                assert len(sim.runtime().outbox.all()) == before, f"step {i}: the outbox grew"
        if expect is not None:
            assert matches(expect, emitted), (
                f"{path.name} step {i}: expected {expect}, got {emitted}"
            )
