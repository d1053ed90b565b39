"""The runtime's facts: the SQLite store (connection, lock, migrations, group commit), the
`Facts` port with every SQL statement, and the typed records it returns."""

from __future__ import annotations

from lineup_runtime_lite.core.rows import Activation, Call, Intent, Operation, Session
from lineup_runtime_lite.store.facts import Facts, LostRace, SqlFacts
from lineup_runtime_lite.store.schema import SCHEMA_VERSION
from lineup_runtime_lite.store.sqlite import Store, store_error

__all__ = [
    "SCHEMA_VERSION",
    "Activation",
    "Call",
    "Facts",
    "Intent",
    "LostRace",
    "Operation",
    "Session",
    "SqlFacts",
    "Store",
    "store_error",
]
