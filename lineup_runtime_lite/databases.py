"""A runtime's database as a command line names it (SPEC 15, 16.2): an SQLite file or a
`postgresql://` URL. Which one a value is, whether it carries a password, how to show it
without one, and the private schema `lineup run`, `test` and `dev` keep their tables in.

The one public home of these for the CLI and other tools; their code lives with the
PostgreSQL store, wherever the store's modules move."""

from __future__ import annotations

from pathlib import Path

from lineup_runtime_lite.store.postgres import (
    check_no_live_runtime,
    has_password,
    is_postgres_url,
    private_schema,
    redact_url,
)

__all__ = [
    "check_no_live_runtime",
    "has_password",
    "is_postgres_url",
    "private_schema",
    "private_schema_for",
    "redact_url",
]


def private_schema_for(db: str | Path | None, command: str, *, shared: bool) -> str | None:
    """On a `postgresql://` database, a new private schema for `command` (after refusing a
    database a runtime is serving unless `shared`); None for an SQLite file.

    Raises:
        LineupError: `runtime_locked` for a database live nodes serve, without `shared`.
    """
    if not is_postgres_url(db):
        return None
    if not shared:
        check_no_live_runtime(str(db))
    return private_schema(command)
