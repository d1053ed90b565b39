"""Option and argument types several `lineup` commands share (typer annotations): each
option a second command takes is declared here once, with its help, and every command uses
that alias (`lineup <cmd> --help` shows the same text wherever it appears)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from lineup_build.cli._common import TRUST_HELP

__all__ = [
    "BundleTrustOpt",
    "CodeSandboxOpt",
    "DbOpt",
    "IsolationOpt",
    "JsonOpt",
    "NodeIdOpt",
    "NodeLeaseOpt",
    "PathArg",
    "SandboxOpt",
    "ServeDbOpt",
    "SharedOpt",
    "checked_isolation",
    "db_target",
    "warn_db_password",
]

#: The environment variable `--db` defaults to: a URL there stays out of the process list.
DB_ENV = "LINEUP_DB"
_SANDBOX_MODES = "best_effort, required (refuse without containment) or off (debugging)."

JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document instead.")]
#: `build`, `check`: the sandbox of importing the entry to read its declarations.
SandboxOpt = Annotated[
    str, typer.Option("--sandbox", help=f"How to contain the entry's import: {_SANDBOX_MODES}")
]
#: `run`, `test`, `serve`, `dev`: the sandbox of the entry's import and of the workers.
CodeSandboxOpt = Annotated[
    str, typer.Option("--sandbox", help=f"Contain MiniApp code: {_SANDBOX_MODES}")
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


def _db_option(state: str) -> Any:
    """`--db` (from `LINEUP_DB` when not given): `state` says what it holds and its default
    for the command; the advice to keep a password out of the process list is the same."""
    return typer.Option(
        "--db",
        envvar=DB_ENV,
        show_envvar=True,
        help=f"{state} Keep a password out of it: PGPASSWORD, ~/.pgpass, or the whole URL "
        f"in {DB_ENV}.",
    )


#: `run`, `test`, `dev`: a state of their own (a private schema on PostgreSQL).
DbOpt = Annotated[
    str | None,
    _db_option(
        "Runtime state: an SQLite FILE, or a PostgreSQL database postgresql://user@host/db "
        "(the postgres extra; run, test and dev keep their tables in a private schema "
        "dropped at the end)."
    ),
]
#: `serve`: the state it keeps between starts.
ServeDbOpt = Annotated[
    str | None,
    _db_option(
        "Runtime state: calls, receipts, sessions: an SQLite FILE (default: <first "
        "folder>/.lineup/serve.db; only bundles: $XDG_STATE_HOME/lineup/serve.db) or a "
        "PostgreSQL database postgresql://user@host/db (the postgres extra)."
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
NodeIdOpt = Annotated[
    str | None,
    typer.Option(
        "--node-id",
        help="On PostgreSQL: this server's id among the nodes of the database "
        "(default: $LINEUP_NODE_ID, else the hostname and the apps cache path).",
    ),
]
NodeLeaseOpt = Annotated[
    float,
    typer.Option(
        "--node-lease",
        help="On PostgreSQL: seconds of this node's lease; once it lapses (the node "
        "died or was cut off) another node takes its conversations over.",
        min=0.2,
        max=3600,
    ),
]
#: `run`, `serve`: a bundle is verified against a trust store; a folder trusts its dev key.
BundleTrustOpt = Annotated[
    Path | None, typer.Option("--trust", help=f"{TRUST_HELP} Needed for a bundle.")
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
    from lineup_runtime_lite import DEFAULT_ISOLATION, check_isolation

    return check_isolation(DEFAULT_ISOLATION if value is None else value)


def db_target(value: str | None, command: str = "") -> str | Path | None:
    """`--db` as the runtime opens it: a `postgresql://` URL as given (warned about when it
    carries a password on the command line: `warn_db_password`), anything else a file
    path (a URL must not pass through `Path`, which folds its `//`)."""
    from lineup_runtime_lite.databases import is_postgres_url

    if value is None or is_postgres_url(value):
        warn_db_password(value, command)
        return value
    return Path(value)


def _from_command_line(value: str) -> bool:
    """Whether `--db` was given on the command line (not taken from `LINEUP_DB`)."""
    import click

    ctx = click.get_current_context(silent=True)
    if ctx is not None:
        source = ctx.get_parameter_source("db")
        if source is not None:
            return source == click.core.ParameterSource.COMMANDLINE
    return os.environ.get(DB_ENV) != value


def warn_db_password(value: str | None, command: str) -> None:
    """SPEC 16.2: a password in a `--db` argument is visible to every local user in the
    process list before any code runs; say so on stderr at start (the URL redacted)."""
    from lineup_runtime_lite.databases import has_password, is_postgres_url, redact_url

    if value is None or not is_postgres_url(value) or not has_password(value):
        return
    if not _from_command_line(value):
        return
    who = f"lineup {command}: " if command else "lineup: "
    sys.stderr.write(
        f"{who}warning: the --db URL {redact_url(value)} holds a password, which every local "
        "user can read in the process list; prefer PGPASSWORD or ~/.pgpass (libpq reads "
        f"them), or give the whole URL in the environment variable {DB_ENV}\n"
    )
    sys.stderr.flush()
