"""`lineup verify` without the typer app: its options as data (the typer command is built
from the same table), a parser for the plain forms, and the command's body.

A CI verify is a whole process; building the typer app (typer, click, rich) costs more
than hashing a large bundle's files, so `cli.main` runs a plainly spelled `verify` here
and leaves everything else (help, a misspelling, other commands) to typer.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lineup_build.cli._common import TRUST_HELP, output, trust_store_path
from lineup_sdk.errors import LineupError

__all__ = ["GLOBAL_FLAGS", "VERIFY_OPTIONS", "Opt", "limit_values", "parse_verify", "run_verify"]


@dataclass(frozen=True)
class Opt:
    """One command-line option: its spellings, help, and whether it takes a value."""

    decls: tuple[str, ...]
    help: str
    flag: bool = False


#: `-v/--verbose` and `-q/--quiet`, on the root command.
GLOBAL_FLAGS = {
    "verbose": Opt(
        ("--verbose", "-v"), "Show tracebacks on errors (and the worker log).", flag=True
    ),
    "quiet": Opt(("--quiet", "-q"), "Print only errors.", flag=True),
}

#: The options of `lineup verify`, by parameter name.
VERIFY_OPTIONS = {
    "trust": Opt(("--trust",), TRUST_HELP),
    "source": Opt(("--source",), "Also fail unless a fresh build of DIR gives this manifest."),
    "sandbox": Opt(
        ("--sandbox",),
        "How to contain the source's import for --source: best_effort, required or off.",
    ),
    "as_json": Opt(("--json",), "Print one JSON document instead.", flag=True),
    "max_manifest_bytes": Opt(
        ("--max-manifest-bytes",), "Accept a manifest.json up to N bytes (default 4 MiB)."
    ),
    "max_files": Opt(("--max-files",), "Accept up to N files (default 10,000)."),
    "max_total_bytes": Opt(
        ("--max-total-bytes",), "Accept up to N bytes of files in all (default 256 MiB)."
    ),
}
VERIFY_DEFAULTS: dict[str, Any] = {
    "trust": None,
    "source": None,
    "sandbox": "best_effort",
    "as_json": False,
    "max_manifest_bytes": None,
    "max_files": None,
    "max_total_bytes": None,
}


def _spellings(table: dict[str, Opt]) -> dict[str, tuple[str, Opt]]:
    return {d: (name, opt) for name, opt in table.items() for d in opt.decls}


def parse_verify(args: list[str]) -> tuple[dict[str, bool], dict[str, Any]] | None:
    """`(global flags, verify arguments)` for a plainly spelled `[-v|-q] verify BUNDLE
    [options]` (the global flags also among the options), or None for anything else
    (typer then parses it and reports usage)."""
    flags = _spellings(GLOBAL_FLAGS)
    glob = {name: False for name in GLOBAL_FLAGS}
    i = 0
    while i < len(args) and args[i] in flags:
        glob[flags[args[i]][0]] = True
        i += 1
    if i >= len(args) or args[i] != "verify":
        return None
    spell = _spellings(VERIFY_OPTIONS)
    values = dict(VERIFY_DEFAULTS)
    seen: set[str] = set()
    bundle: str | None = None
    rest = args[i + 1 :]
    j = 0
    while j < len(rest):
        arg = rest[j]
        name_value = arg.split("=", 1) if arg.startswith("--") and "=" in arg else [arg]
        if arg in flags:
            glob[flags[arg][0]] = True
        elif name_value[0] in spell:
            name, opt = spell[name_value[0]]
            if name in seen:
                return None
            seen.add(name)
            if opt.flag:
                if len(name_value) == 2:
                    return None
                values[name] = True
            elif len(name_value) == 2:
                values[name] = name_value[1]
            elif j + 1 < len(rest) and not rest[j + 1].startswith("-"):
                j += 1
                values[name] = rest[j]
            else:
                return None
        elif arg.startswith("-") or bundle is not None or not arg:
            return None
        else:
            bundle = arg
        j += 1
    if bundle is None or all(glob.values()):  # -v with -q: typer reports the contradiction
        return None
    for name in ("trust", "source"):
        if values[name] is not None:
            values[name] = Path(values[name])
    values["bundle"] = Path(bundle)
    return glob, values


def limit_values(**values: object) -> dict[str, int]:
    """The `--max-*` options given (`None` when not), as whole numbers.

    Raises:
        LineupError: `usage_invalid` for a value that is not a whole number.
    """
    out: dict[str, int] = {}
    for name, value in values.items():
        if value is None:
            continue
        if isinstance(value, str):
            if not value.isdigit():
                option = "--" + name.replace("_", "-")
                raise LineupError(
                    "usage_invalid", f"{option} {value!r} is not a whole number of bytes or files"
                )
            value = int(value)
        assert isinstance(value, int)
        out[name] = value
    return out


def run_verify(
    bundle: Path,
    trust: Path | None,
    source: Path | None,
    sandbox: str,
    as_json: bool,
    max_manifest_bytes: int | str | None = None,
    max_files: int | str | None = None,
    max_total_bytes: int | str | None = None,
) -> int:
    """The body of `lineup verify`: check the bundle within the default limits raised by
    the `--max-*` options, render, return the exit status.

    Raises:
        LineupError: `usage_invalid` without a trust store or for a bad `--max-*` value;
            `trust_store_invalid`.
    """
    from lineup_build.cli import _render
    from lineup_build.reader import Limits
    from lineup_build.trust import TrustStore
    from lineup_build.verify import check_bundle

    limits = Limits().raised(
        limit_values(
            max_manifest_bytes=max_manifest_bytes,
            max_files=max_files,
            max_total_bytes=max_total_bytes,
        )
    )

    if source is not None or sandbox != VERIFY_DEFAULTS["sandbox"]:
        from lineup_sdk.sandbox import check_mode  # only --source imports anything

        check_mode(sandbox)
    store = trust_store_path(trust, required=True, why="verify a bundle against")
    assert store is not None
    report = check_bundle(
        bundle, TrustStore.load(store), source=source, sandbox=sandbox, limits=limits
    )
    if as_json:
        _render.emit_json(report.to_dict())
    else:
        _render.verify_report(report, source=source)
    if output.verbose and not as_json:
        _render.line("trust store {}", store)
    return 0 if report.ok else 1
