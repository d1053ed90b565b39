"""Option and argument types several `lineup` commands share (typer annotations)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

__all__ = [
    "DbOpt",
    "IsolationOpt",
    "JsonOpt",
    "PathArg",
    "SandboxOpt",
    "SharedOpt",
    "checked_isolation",
    "db_target",
]

JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document instead.")]
SandboxOpt = Annotated[
    str,
    typer.Option(
        "--sandbox",
        help="How to contain the entry's import: best_effort, required (refuse without "
        "containment) or off (debugging).",
    ),
]
IsolationOpt = Annotated[
    str | None,
    typer.Option(
        "--isolation",
        help="app: one worker per app version; session: one per App session, so one "
        "conversation's code never shares a process with another's (default: the "
        "runtime's; see the security model guide).",
    ),
]
DbOpt = Annotated[
    str | None,
    typer.Option(
        "--db",
        help="Runtime state: an SQLite FILE, or a PostgreSQL database postgresql://user@host/db "
        "(the postgres extra; run, test and dev keep their tables in a private schema "
        "dropped at the end).",
    ),
]
SharedOpt = Annotated[
    bool,
    typer.Option(
        "--shared",
        help="On a PostgreSQL database a runtime is serving, go on beside it (still in a "
        "private schema) instead of refusing.",
    ),
]
PathArg = Annotated[
    Path | None,
    typer.Argument(
        help="The MiniApp project folder (default: the one holding lineup.toml, found "
        "upward from the working folder)."
    ),
]


def checked_isolation(value: str | None) -> str:
    """`--isolation` as given, or the runtime's default; `usage_invalid` for anything else."""
    from lineup_runtime_lite.api.async_runtime import DEFAULT_ISOLATION, check_isolation

    return check_isolation(DEFAULT_ISOLATION if value is None else value)


def db_target(value: str | None) -> str | Path | None:
    """`--db` as the runtime opens it: a `postgresql://` URL as given, anything else a file
    path (a URL must not pass through `Path`, which folds its `//`)."""
    from lineup_runtime_lite.store.postgres import is_postgres_url

    if value is None or is_postgres_url(value):
        return value
    return Path(value)
