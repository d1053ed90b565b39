"""The fault suite's runtime (`rt`) and crash harness (`env`) open the store engine
`LINEUP_TEST_STORE` names (tests/store_kit.py): one CI pass runs the suite on each."""

from __future__ import annotations

import pytest

from lineup_runtime_lite import Runtime
from lineup_runtime_lite.internals import engine_of
from tests.faults.harness import Env

pytestmark = pytest.mark.store


def test_rt_runs_on_the_chosen_engine(rt: Runtime, store_engine: str) -> None:
    assert getattr(engine_of(rt).store, "engine", "sqlite") == store_engine


def test_env_runs_on_the_chosen_engine(env: Env, store_engine: str) -> None:
    assert env.engine == store_engine
