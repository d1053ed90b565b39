"""Which store engine the store tests run on: the one place that reads `LINEUP_TEST_STORE`.

The tests marked `store` (what exercises the store: facts, transitions, drivers, the
conformance replays, the fault suite) open their database on the engine this variable names:
`sqlite` (the default; what the README's test command runs) or `postgresql` (a fresh database
on the session's throwaway server, `tests/pg_kit.py`). CI runs the whole suite on SQLite,
then `LINEUP_TEST_STORE=postgresql python -m pytest -m store`, so every store rule is proven
on both engines and no test runs twice on one.

A test is marked `store` exactly when it reaches the `store_engine` fixture (through
`db_target`, the fault suite's `rt`, `env`, ...): `tests/conftest.py` refuses a collection
where the two disagree, so the PostgreSQL pass misses no store test and repeats no other.
"""

from __future__ import annotations

import os

import pytest

__all__ = ["ENGINES", "VARIABLE", "chosen_engine"]

#: The environment variable naming the engine.
VARIABLE = "LINEUP_TEST_STORE"
#: The engines it may name; the first is the default.
ENGINES = ("sqlite", "postgresql")


def chosen_engine() -> str:
    """The engine `LINEUP_TEST_STORE` names (`sqlite` when unset or empty); anything else
    is a usage error, raised before any test is collected."""
    named = os.environ.get(VARIABLE, "").strip() or ENGINES[0]
    if named not in ENGINES:
        raise pytest.UsageError(
            f"{VARIABLE}={named!r} names no store engine: use one of {', '.join(ENGINES)} "
            f"(unset means {ENGINES[0]})"
        )
    return named
