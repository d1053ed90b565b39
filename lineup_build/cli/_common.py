"""What every `lineup` command shares, with the standard library only: the trust-store
default (SPEC 12), finding the project upward, the global output level, and the one
JSON envelope. The typer app and the `verify` fast path (`_fast`) both use it."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lineup_sdk.errors import LineupError

__all__ = [
    "JSON_SCHEMA_VERSION",
    "TRUST_ENV",
    "TRUST_FILE",
    "Output",
    "envelope",
    "find_project",
    "output",
    "projects_for",
    "trust_for_writing",
    "trust_store_path",
    "write_json",
]

JSON_SCHEMA_VERSION = 1
TRUST_ENV = "LINEUP_TRUST_STORE"
TRUST_FILE = "trust.toml"
TRUST_HELP = f"Trust store file (TOML; default: ${TRUST_ENV}, else ./{TRUST_FILE} if it exists)."


@dataclass
class Output:
    """The global output level: `-v/--verbose` and `-q/--quiet` on the root command."""

    verbose: bool = False
    quiet: bool = False


#: Set once by the root callback (or the fast path) before a command runs.
output = Output()


def trust_store_path(given: Path | None, *, required: bool, why: str = "") -> Path | None:
    """The trust store a command reads: `given`, else `$LINEUP_TRUST_STORE`, else an
    existing `./trust.toml`; None when there is none and none is `required`.

    Raises:
        LineupError: `usage_invalid` (exit 2) when `required` and there is none.
    """
    if given is not None:
        return given
    env = os.environ.get(TRUST_ENV)
    if env:
        return Path(env)
    if Path(TRUST_FILE).is_file():
        return Path(TRUST_FILE)
    if not required:
        return None
    raise LineupError(
        "usage_invalid",
        f"no trust store{f' to {why}' if why else ''}: no --trust, no ${TRUST_ENV}, "
        f"and no {TRUST_FILE} in the working folder",
        hint=f"pass --trust FILE, set {TRUST_ENV}, or create ./{TRUST_FILE} with "
        "`lineup trust add PUBKEY --scope SCOPE`",
        exit_code=2,
    )


def trust_for_writing(given: Path | None) -> Path:
    """The trust store `trust add`/`revoke` edit: as `trust_store_path`, else a new
    `./trust.toml`."""
    found = trust_store_path(given, required=False)
    return found if found is not None else Path(TRUST_FILE)


def find_project(start: Path | None = None) -> Path:
    """The project folder: `start` (default: the working folder) or the nearest parent
    holding `lineup.toml` or a `pyproject.toml` with `[tool.lineup]` (SPEC 13.1); `start`
    itself when none does (the build then reports `config_invalid` for it)."""
    from lineup_build.config import is_project

    here = (start or Path.cwd()).absolute()
    for folder in (here, *here.parents):
        if is_project(folder):
            return folder
    return here


def projects_for(paths: list[Path]) -> list[Path]:
    """Each project that holds one of `paths` (folders or files), once, in first-seen
    order: a project folder is itself a project; anything else belongs to the nearest
    parent that is one (`find_project`)."""
    out: list[Path] = []
    for p in paths:
        start = p if p.is_dir() else p.absolute().parent
        root = find_project(start)
        if root not in out:
            out.append(root)
    return out


def envelope(ok: bool, diagnostics: list[Any] | None = None, **facts: Any) -> dict[str, Any]:
    """The one `--json` document shape: `schema_version`, `ok`, `diagnostics`, facts."""
    return {
        "schema_version": JSON_SCHEMA_VERSION,
        **facts,
        "ok": ok,
        "diagnostics": list(diagnostics or []),
    }


def write_json(doc: dict[str, Any]) -> None:
    """One JSON document as one line on stdout (sorted keys), `schema_version` included."""
    doc = {"schema_version": JSON_SCHEMA_VERSION, **doc}
    sys.stdout.write(json.dumps(doc, sort_keys=True, ensure_ascii=False) + "\n")
    sys.stdout.flush()
