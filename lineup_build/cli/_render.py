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
    from lineup_build.model import Tool, UiAction

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


def _say(con: Any, template: str, *values: Any) -> None:
    """The one way a line reaches a console: `template` is this module's own markup, each
    `{}` in it a value from outside, shown literally (never markup, no control codes)."""
    con.print(template.format(*(_esc(v) for v in values)), markup=True, highlight=False)


def _cell(text: str) -> str:
    """A table cell's text: each of its lines printable, nothing else changed."""
    return "\n".join(_printable(part) for part in str(text).split("\n"))


def _show_table(
    columns: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    title: str | None = None,
    header: bool = True,
    first_bold: bool = False,
) -> None:
    """A table: on a terminal a rich table whose cells are literal text, wrapped to fit,
    never cut; otherwise plain lines (see `_plain_table`)."""
    if output.quiet:
        return
    cells = [[_cell(c) for c in row] for row in rows]
    if not _is_terminal(sys.stdout):
        sys.stdout.write(_plain_table(columns, cells, title=title, header=header))
        return
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(
        title=Text(_cell(title)) if title else None, title_justify="left", show_header=header
    )
    for i, col in enumerate(columns):
        table.add_column(col, overflow="fold", style="bold" if first_bold and i == 0 else None)
    for row in cells:  # `Text` is never read as markup
        table.add_row(*(Text(c) for c in row))
    Console(highlight=False).print(table)


def _plain_table(
    columns: Sequence[str], rows: list[list[str]], *, title: str | None, header: bool
) -> str:
    """A table as plain lines: the title, the header, then one line per row, columns
    padded and separated by two spaces; a cell's lines joined by ` | `. No box, no colour,
    no wrapping."""
    lines = [[" | ".join(c.split("\n")) for c in row] for row in rows]
    if header:
        lines.insert(0, list(columns))
    widths = [max((len(r[i]) for r in lines), default=0) for i in range(len(columns))]
    out = [_cell(title)] if title else []
    out += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in lines]
    return "".join(f"{text}\n" for text in out)


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
    _problem(_console(stderr=True), exc, hint=True)


def _problem(con: Any, exc: LineupError, *, hint: bool) -> None:
    _say(con, "[bold red]error[/] [bold]{}[/]: {}", exc.code, exc.message)
    if hint and exc.hint:
        _say(con, "  [dim]hint:[/] {}", exc.hint)


def prompt_error(exc: LineupError) -> None:
    """A mistake typed at an interactive prompt: code and message, then its hint (the
    usage line of the command typed) on stdout, where the prompt is."""
    con = _console()
    _say(con, "[red]{}[/]: {}", exc.code, exc.message)
    if exc.hint:
        _say(con, "  {}", exc.hint)


_ERROR_LINE = "{}[bold red]{}[/] [bold]{}[/]: {}"
_WARNING_LINE = "{}[bold yellow]{}[/] [bold]{}[/]: {}"


def diagnostics(diags: list[Diagnostic]) -> None:
    """Each diagnostic as `file:line: severity code: message` plus its hint."""
    con = _console(stderr=True)
    for d in diags:
        if output.quiet and d.severity != "error":
            continue
        template = _ERROR_LINE if d.severity == "error" else _WARNING_LINE
        _say(con, template, f"{d.where}: " if d.where else "", d.severity, d.code, d.message)
        for r in d.related:
            _say(con, "  [dim]also at[/] {}", r)
        hint = d.effective_hint
        if hint:
            _say(con, "  [dim]hint:[/] {}", hint)


#: Rows a people-facing tools table shows; rich needs about a second per 4,000 rows, and
#: `--json` lists every tool anyway.
TOOLS_TABLE_ROWS = 200


def tools_table(tools: Sequence[Tool], title: str, *, limit: int = TOOLS_TABLE_ROWS) -> None:
    """A table of tools: method, activation, delivery, long-running (the first `limit`)."""
    ordered = sorted(tools, key=lambda t: t.method)
    rows = []
    for t in ordered[:limit]:
        hints = ", ".join(k if v else f"not {k}" for k, v in t.hints)
        rows.append([t.method, t.activation, t.delivery, "yes" if t.long_running else "no", hints])
    if len(ordered) > limit:
        rows.append([f"… and {len(ordered) - limit} more (--json lists all)", "", "", "", ""])
    _show_table(("method", "activation", "delivery", "long-running", "hints"), rows, title=title)


def actions_table(
    actions: Sequence[UiAction], title: str, *, limit: int = TOOLS_TABLE_ROWS
) -> None:
    """A table of UI Actions (SPEC 17): name, timeout, description (the first `limit`)."""
    ordered = sorted(actions, key=lambda a: a.name)
    rows = [[a.name, f"{a.timeout_s:g} s", a.description] for a in ordered[:limit]]
    if len(ordered) > limit:
        rows.append([f"… and {len(ordered) - limit} more (--json lists all)", "", ""])
    _show_table(("name", "timeout", "description"), rows, title=title)


def counts(tools: int, files: int, actions: int) -> str:
    """`N tools, M files`, with `K UI Actions` between them when the app declares some."""
    middle = f", {actions} UI Actions" if actions else ""
    return f"{tools} tools{middle}, {files} files"


def line(template: str, *values: Any) -> None:
    """A line for people (nothing with `--quiet`): `template` is markup written here in
    the CLI; each `{}` is filled with a value from outside (a name, a path, a message),
    shown literally. Outside text never goes into the template itself."""
    if output.quiet:
        return
    _say(_console(), template, *values)


def literal_block(text: str) -> None:
    """Outside text for people, its lines shown exactly as written (nothing with
    `--quiet`)."""
    if output.quiet:
        return
    con = _console()
    for part in text.removesuffix("\n").split("\n"):
        _say(con, "{}", part)


def kv_table(rows: list[tuple[str, str]], title: str | None = None) -> None:
    """A two-column key/value table; every cell literal."""
    _show_table(
        ("key", "value"), [list(r) for r in rows], title=title, header=False, first_bold=True
    )


def table(columns: list[str], rows: list[list[str]], title: str | None = None) -> None:
    """A generic table; every cell (and the title) literal."""
    _show_table(columns, rows, title=title)


def _printable(text: Any) -> str:
    """No terminal control codes: each unprintable character shown as its escape."""
    return "".join(
        ch if ch.isprintable() or ch in " \t" else ch.encode("unicode_escape").decode("ascii")
        for ch in str(text)
    )


def _esc(text: Any) -> str:
    """Outside text made inert for a markup line: no rich markup, no control codes."""
    return _escape(_printable(text))


def _escape(text: str) -> str:
    """rich markup made literal: each tag-like bracket escaped (as `rich.markup.escape`)."""
    text = _TAG.sub(lambda m: f"{m.group(1)}{m.group(1)}\\{m.group(2)}", text)
    return text + "\\" if text.endswith("\\") and not text.endswith("\\\\") else text


def problems(items: list[LineupError], *, limit: int = 50) -> None:
    """Each problem as `error code: message`; each code's hint once; at most `limit`."""
    con = _console(stderr=True)
    hinted: set[str] = set()
    for p in items[:limit]:
        _problem(con, p, hint=bool(p.hint) and p.code not in hinted)
        hinted.add(p.code)
    if len(items) > limit:
        _say(con, "[dim]... and {} more problem(s); use --json for all[/]", len(items) - limit)


def verify_report(report: Any, source: Any = None) -> None:
    """`lineup verify`: the problems, then one verdict line (naming `source` when the
    bundle was also checked against a fresh build of it)."""
    problems(report.problems)
    if report.ok:
        m = report.model
        label = f" ({report.signer.label})" if report.signer and report.signer.label else ""
        matches = f" and matches the source {source}" if source is not None else ""
        line(
            "[green]verified[/] {}: {} {}, {}, signed by {}{}{}",
            report.bundle,
            m.app.scope,
            m.app.version,
            counts(len(m.tools), len(m.files), len(m.ui_actions)),
            report.key_id,
            label,
            matches,
        )
    else:
        first = report.problems[0].code if report.problems else "not verified"
        line("[red]rejected[/] {}: {}", report.bundle, first)


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
        if m.surface is not None:  # the Surface as one signed document (SPEC 18.2)
            csp = "; ".join(f"{k} {' '.join(v)}" for k, v in m.surface.csp) or "host default"
            rows += [
                ("surface", f"{m.surface.document} ({m.surface.size} bytes)"),
                ("surface sha256", m.surface.sha256),
                ("surface csp", csp),
            ]
    signature = doc["signature"] + (f" ({doc['signer_label']})" if doc["signer_label"] else "")
    rows += [("key id", doc["key_id"] or "-"), ("signature", signature)]
    rows.append(("manifest sha256", doc["manifest_sha256"] or "-"))
    kv_table([(k, str(v)) for k, v in rows])
    if m is not None:
        tools_table(m.tools, "tools")
        if m.ui_actions:
            actions_table(m.ui_actions, "UI Actions")
        table(["path", "size"], [[f.path, str(f.size)] for f in m.files], "files")
    problems(report.problems)


def trust_keys(doc: dict[str, Any]) -> None:
    """`lineup trust list`: every key with its scopes, label and status."""
    rows = [
        [
            k["key_id"],
            ", ".join(k["scopes"]),
            ", ".join(k["allow"]) or "-",
            k["label"] or "",
            k["status"],
        ]
        for k in doc["keys"]
    ]
    rows += [[kid, "", "", "", "revoked"] for kid in doc["revoked_unknown"]]
    table(["key id", "scopes", "allow", "label", "status"], rows, title=str(doc["store"]))


def _short(value: Any) -> str:
    """A value in a timeline cell, whole: a string as written, anything else as JSON; a
    timestamp as its time of day (the date is in the `at` column)."""
    if isinstance(value, str) and len(value) == 24 and value[10] == "T" and value.endswith("Z"):
        return value[11:19]
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _pairs(value: Any) -> str:
    if isinstance(value, dict):
        return " ".join(f"{k}={_short(v)}" for k, v in value.items() if k != "operation_id")
    return _short(value)


def _error_text(err: dict[str, Any]) -> str:
    """`code: message`, then each detail that points into the params (`invalid_params`):
    `/pointer: message`."""
    text = f"{err.get('code')}: {err.get('message')}"
    details = err.get("details")
    if isinstance(details, list):
        for d in details:
            if isinstance(d, dict) and "path" in d:
                text += f"; {d['path'] or '/'}: {d.get('message', '')}"
    return text


def _summary(msg: dict[str, Any]) -> str:
    if "stage" not in msg:
        return _pairs(msg)
    parts = [f"{msg['call_id']} {msg['stage']}"]
    for key in ("activation", "reason", "started_at", "ends_at"):
        if key in msg:
            parts.append(f"{key}={_short(msg[key])}")
    if "result" in msg:
        parts.append(_pairs(msg["result"]))
    if isinstance(msg.get("error"), dict):
        parts.append(_error_text(msg["error"]))
    return " ".join(parts)


def _verdict(report: Any) -> str:
    """What a step's expectation said: `ok` when it had one and it held, `-` when it had
    none, else the failure."""
    if not report.ok:
        return f"FAIL: {report.problem}"
    return "ok" if getattr(report, "checked", False) else "-"


def timeline(reports: list[Any]) -> None:
    """The `lineup run` timeline: step, time, action, what it emitted, expectation."""
    rows = [
        [
            str(r.index),
            r.at[:10] + " " + r.at[11:19],
            r.description,
            "\n".join(_summary(m) for m in r.messages) or "-",
            _verdict(r),
        ]
        for r in reports
    ]
    _show_table(("#", "at", "step", "emitted", "expect"), rows, title="timeline")
