"""Replay every conformance fixture on the production runtime with no process: the driver
`lineup run` and `lineup test` use (`simulate.Simulation`), over SQLite `:memory:` and over
PostgreSQL (a private schema on the session's server, SPEC 15; the store tests' two CI
passes), on a virtual clock, with an in-process worker at the worker port (tests/runtime/
inprocess_worker.py) that runs the app's handlers through `lineup_sdk`'s dispatcher. The
events must match the fixture's expected events exactly as the process replay's do
(`test_conformance.py`); changing a transition's answer fails it
(tests/runtime/core/test_production_decisions.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lineup_runtime_lite.store.postgres import private_schema
from tests.conformance.conformance_kit import FIXTURES, bundles, replay_in_process
from tests.pg_kit import PgServer

__all__ = ["bundles"]


@pytest.mark.store
@pytest.mark.parametrize("path", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_fixture_in_process(
    path: Path, bundles: dict[str, Path], store_engine: str, request: pytest.FixtureRequest
) -> None:
    """On the chosen store engine: SQLite `:memory:`, or a private schema on the session's
    PostgreSQL server."""
    if store_engine == "postgresql":
        server: PgServer = request.getfixturevalue("pg_server")
        port = replay_in_process(path, bundles, server.url(), private_schema("conformance"))
    else:
        port = replay_in_process(path, bundles)
    assert all(w.dead for w in port.workers)  # closing the runtime stopped them
