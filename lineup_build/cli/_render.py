"""Everything the CLI prints: rich tables for people, JSON documents for machines.

This is the only module that imports rich.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from lineup_build.cli._common import output, write_json
from lineup_build.diagnostics import Diagnostic
from lineup_sdk.errors import LineupError

if TYPE_CHECKING:
    from lineup_build.model import Tool

# rich's markup tags (`[bold red]`, `[/]`), with the backslashes that may escape them
_TAG = re.compile(r"(\\*)(\[[a-z#/@][^[]*?])")


class _Plain:
    """A console for a stream that is not a terminal: plain lines at any width (no rich,
    no wrapping, no colour), the markup removed exactly as rich would render it."""

    def __init__(self, stderr: bool) -> None:
        self._stream = sys.stderr if stderr else sys.stdout

    def print(self, text: Any, *_: Any, **__: Any) -> None:
        self._stream.write(_strip(str(text)) + "\n")


def _strip(text: str) -> str:
    def repl(m: re.Match[str]) -> str:
        slashes, tag = m.group(1), m.group(2)
        escaped = len(slashes) % 2 == 1  # an escaped bracket is shown literally
        return "\\" * (len(slashes) // 2) + (tag if escaped else "")

    return _TAG.sub(repl, text)


def _is_terminal(stream: Any) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def _console(stderr: bool = False) -> Any:
    stream = sys.stderr if stderr else sys.stdout
    if not _is_terminal(stream):
        return _Plain(stderr)
    from rich.console import Console

    return Console(stderr=stderr, highlight=False, soft_wrap=False)


def _table_console() -> Any:
    """rich for a table; without a terminal, as wide as the table needs (no wrapping)."""
    from rich.console import Console

    if _is_terminal(sys.stdout):
        return Console(highlight=False)
    return Console(highlight=False, width=10_000, no_color=True)


def _show_table(table: Any) -> None:
    if not output.quiet:
        _table_console().print(table)


def emit_json(doc: Any) -> None:
    """One JSON document on stdout: one line, sorted keys, with `schema_version`."""
    write_json(doc)


def error(exc: LineupError, *, as_json: bool) -> None:
    """Render a top-level error (always, even with `--quiet`)."""
    if as_json:  # one line, so it also ends a JSON-lines stream (`lineup run --json`)
        facts = exc.to_dict()
        diags = facts.pop("problems", None) or [
            {k: v for k, v in facts.items() if k != "exit_code"}
        ]
        write_json({"ok": False, "error": facts, "diagnostics": diags})
        return
    con = _console(stderr=True)
    con.print(f"[bold red]error[/] [bold]{exc.code}[/]: {_esc(exc.message)}", markup=True)
    if exc.hint:
        con.print(f"  [dim]hint:[/] {_esc(exc.hint)}")


def diagnostics(diags: list[Diagnostic]) -> None:
    """Each diagnostic as `file:line: severity code: message` plus its hint."""
    con = _console(stderr=True)
    for d in diags:
        if output.quiet and d.severity != "error":
            continue
        colour = "red" if d.severity == "error" else "yellow"
        where = f"{_esc(d.where)}: " if d.where else ""
        con.print(
            f"{where}[bold {colour}]{d.severity}[/] [bold]{d.code}[/]: {_esc(d.message)}",
            markup=True,
            highlight=False,
        )
        for r in d.related:
            con.print(f"  [dim]also at[/] {_esc(r)}")
        hint = d.effective_hint
        if hint:
            con.print(f"  [dim]hint:[/] {_esc(hint)}")


#: Rows a people-facing tools table shows; rich needs about a second per 4,000 rows, and
#: `--json` lists every tool anyway.
TOOLS_TABLE_ROWS = 200


def tools_table(tools: Sequence[Tool], title: str, *, limit: int = TOOLS_TABLE_ROWS) -> None:
    """A table of tools: method, activation, delivery, long-running (the first `limit`)."""
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for col in ("method", "activation", "delivery", "long-running", "hints"):
        table.add_column(col)
    ordered = sorted(tools, key=lambda t: t.method)
    for t in ordered[:limit]:
        hints = ", ".join(k if v else f"not {k}" for k, v in t.hints)
        table.add_row(t.method, t.activation, t.delivery, "yes" if t.long_running else "no", hints)
    if len(ordered) > limit:
        table.add_row(f"… and {len(ordered) - limit} more (--json lists all)", "", "", "", "")
    _show_table(table)


def line(text: str) -> None:
    """A line for people (nothing with `--quiet`)."""
    if output.quiet:
        return
    _console().print(text, markup=True, highlight=False)


def literal(text: str) -> str:
    """Outside text (a file name, a log) escaped so it is shown as written."""
    return _escape(text)


def literal_block(text: str) -> None:
    """Outside text for people, shown exactly as written (nothing with `--quiet`)."""
    line(_escape(text.removesuffix("\n")))


def kv_table(rows: list[tuple[str, str]], title: str | None = None) -> None:
    """A two-column key/value table."""
    from rich.table import Table

    table = Table(title=title, title_justify="left", show_header=False)
    table.add_column(style="bold")
    table.add_column()
    for k, v in rows:
        table.add_row(k, v)
    _show_table(table)


def table(columns: list[str], rows: list[list[str]], title: str | None = None) -> None:
    """A generic table."""
    from rich.table import Table

    t = Table(title=title, title_justify="left")
    for c in columns:
        t.add_column(c)
    for r in rows:
        t.add_row(*r)
    _show_table(t)


def _esc(text: Any) -> str:
    """Bundle-controlled text made inert: no rich markup, no terminal control codes."""
    shown = "".join(
        ch if ch.isprintable() or ch == " " else ch.encode("unicode_escape").decode("ascii")
        for ch in str(text)
    )
    return _escape(shown)


def _escape(text: str) -> str:
    """rich markup made literal: each tag-like bracket escaped (as `rich.markup.escape`)."""
    text = _TAG.sub(lambda m: f"{m.group(1)}{m.group(1)}\\{m.group(2)}", text)
    return text + "\\" if text.endswith("\\") and not text.endswith("\\\\") else text


def problems(items: list[LineupError], *, limit: int = 50) -> None:
    """Each problem as `error code: message`; each code's hint once; at most `limit`."""
    con = _console(stderr=True)
    hinted: set[str] = set()
    for p in items[:limit]:
        con.print(f"[bold red]error[/] [bold]{p.code}[/]: {_esc(p.message)}", markup=True)
        if p.hint and p.code not in hinted:
            hinted.add(p.code)
            con.print(f"  [dim]hint:[/] {_esc(p.hint)}")
    if len(items) > limit:
        con.print(f"[dim]... and {len(items) - limit} more problem(s); use --json for all[/]")


def verify_report(report: Any, source: Any = None) -> None:
    """`lineup verify`: the problems, then one verdict line (naming `source` when the
    bundle was also checked against a fresh build of it)."""
    problems(report.problems)
    if report.ok:
        m = report.model
        label = f" ({report.signer.label})" if report.signer and report.signer.label else ""
        matches = f" and matches the source {_esc(source)}" if source is not None else ""
        line(
            f"[green]verified[/] {_esc(report.bundle)}: {m.app.scope} {_esc(m.app.version)}, "
            f"{len(m.tools)} tools, {len(m.files)} files, "
            f"signed by {report.key_id}{_esc(label)}{matches}"
        )
    else:
        first = report.problems[0].code if report.problems else "not verified"
        line(f"[red]rejected[/] {_esc(report.bundle)}: {first}")


def inspect_report(report: Any) -> None:
    """`lineup inspect`: app, key, signature status, tools and files."""
    doc = report.to_dict()
    m = report.model
    rows = [("bundle", doc["bundle"])]
    if m is not None:
        rows += [
            ("app", f"{m.app.scope} {m.app.version} ({m.app.name})"),
            ("entry", m.app.entry),
            ("permissions", ", ".join(m.app.permissions) or "none"),
            ("sdk", m.sdk.version),
        ]
    signature = doc["signature"] + (f" ({doc['signer_label']})" if doc["signer_label"] else "")
    rows += [("key id", doc["key_id"] or "-"), ("signature", signature)]
    rows.append(("manifest sha256", doc["manifest_sha256"] or "-"))
    kv_table([(k, _esc(v)) for k, v in rows])
    if m is not None:
        tools_table(m.tools, "tools")
        table(["path", "size"], [[_esc(f.path), str(f.size)] for f in m.files], "files")
    problems(report.problems)


def trust_keys(doc: dict[str, Any]) -> None:
    """`lineup trust list`: every key with its scopes, label and status."""
    rows = [
        [
            k["key_id"],
            ", ".join(k["scopes"]),
            ", ".join(k["allow"]) or "-",
            _esc(k["label"] or ""),
            k["status"],
        ]
        for k in doc["keys"]
    ]
    rows += [[kid, "", "", "", "revoked"] for kid in doc["revoked_unknown"]]
    table(["key id", "scopes", "allow", "label", "status"], rows, title=_esc(doc["store"]))


def _short(value: Any) -> str:
    text = (
        value if isinstance(value, str) else json.dumps(value, sort_keys=True, ensure_ascii=False)
    )
    if isinstance(value, str) and len(value) == 24 and value[10] == "T" and value.endswith("Z"):
        return value[11:19]  # RFC 3339 → time of day; the date is in the `at` column
    return text if len(text) <= 40 else text[:39] + "…"


def _pairs(value: Any) -> str:
    if isinstance(value, dict):
        return " ".join(f"{k}={_short(v)}" for k, v in value.items() if k != "operation_id")
    return _short(value)


def _summary(msg: dict[str, Any]) -> str:
    if "stage" not in msg:
        return _pairs(msg)
    parts = [f"{msg['call_id']} {msg['stage']}"]
    for key in ("activation", "reason", "started_at", "ends_at"):
        if key in msg:
            parts.append(f"{key}={_short(msg[key])}")
    if "result" in msg:
        parts.append(_pairs(msg["result"]))
    if "error" in msg:
        parts.append(f"{msg['error']['code']}: {msg['error']['message']}")
    return " ".join(parts)


def timeline(reports: list[Any]) -> None:
    """The `lineup run` timeline: step, time, action, what it emitted, expectation."""
    from rich.table import Table

    t = Table(title="timeline", title_justify="left")
    for col in ("#", "at", "step", "emitted", "expect"):
        t.add_column(col)
    for r in reports:
        emitted = "\n".join(_esc(_summary(m)) for m in r.messages) or "-"
        verdict = "ok" if r.ok else f"FAIL: {_esc(r.problem)}"
        t.add_row(
            str(r.index), r.at[:10] + " " + r.at[11:19], _esc(r.description), emitted, verdict
        )
    _show_table(t)
