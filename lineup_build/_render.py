"""Everything the CLI prints: rich tables for people, JSON documents for machines.

This is the only module that imports rich.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from lineup_build.diagnostics import Diagnostic
from lineup_sdk.errors import LineupError


def _console(stderr: bool = False) -> Any:
    from rich.console import Console

    return Console(stderr=stderr, highlight=False, soft_wrap=False)


def emit_json(doc: Any) -> None:
    """One JSON document on stdout."""
    sys.stdout.write(json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def error(exc: LineupError, *, as_json: bool) -> None:
    """Render a top-level error."""
    if as_json:
        emit_json({"ok": False, "error": exc.to_dict()})
        return
    con = _console(stderr=True)
    con.print(f"[bold red]error[/] [bold]{exc.code}[/]: {exc.message}", markup=True)
    if exc.hint:
        con.print(f"  [dim]hint:[/] {exc.hint}")


def diagnostics(diags: list[Diagnostic]) -> None:
    """Each diagnostic as `file:line: severity code: message` plus its hint."""
    con = _console(stderr=True)
    for d in diags:
        colour = "red" if d.severity == "error" else "yellow"
        where = f"{d.where}: " if d.where else ""
        con.print(
            f"{where}[bold {colour}]{d.severity}[/] [bold]{d.code}[/]: {d.message}",
            markup=True,
            highlight=False,
        )
        for r in d.related:
            con.print(f"  [dim]also at[/] {r}")
        hint = d.effective_hint
        if hint:
            con.print(f"  [dim]hint:[/] {hint}")


def tools_table(tools: list[dict[str, Any]], title: str) -> None:
    """A table of tools: method, activation, delivery, long-running."""
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for col in ("method", "activation", "delivery", "long-running"):
        table.add_column(col)
    for t in sorted(tools, key=lambda t: t["method"]):
        table.add_row(
            t["method"], t["activation"], t["delivery"], "yes" if t.get("long_running") else "no"
        )
    _console().print(table)


def line(text: str) -> None:
    """A plain line for people."""
    _console().print(text, markup=True, highlight=False)


def kv_table(rows: list[tuple[str, str]], title: str | None = None) -> None:
    """A two-column key/value table."""
    from rich.table import Table

    table = Table(title=title, title_justify="left", show_header=False)
    table.add_column(style="bold")
    table.add_column()
    for k, v in rows:
        table.add_row(k, v)
    _console().print(table)


def table(columns: list[str], rows: list[list[str]], title: str | None = None) -> None:
    """A generic table."""
    from rich.table import Table

    t = Table(title=title, title_justify="left")
    for c in columns:
        t.add_column(c)
    for r in rows:
        t.add_row(*r)
    _console().print(t)
