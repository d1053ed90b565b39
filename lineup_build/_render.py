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
    if as_json:  # one line, so it also ends a JSON-lines stream (`lineup run --json`)
        doc = {"ok": False, "error": exc.to_dict()}
        sys.stdout.write(json.dumps(doc, sort_keys=True, ensure_ascii=False) + "\n")
        return
    con = _console(stderr=True)
    con.print(f"[bold red]error[/] [bold]{exc.code}[/]: {_esc(exc.message)}", markup=True)
    if exc.hint:
        con.print(f"  [dim]hint:[/] {_esc(exc.hint)}")


def diagnostics(diags: list[Diagnostic]) -> None:
    """Each diagnostic as `file:line: severity code: message` plus its hint."""
    con = _console(stderr=True)
    for d in diags:
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


def tools_table(tools: list[dict[str, Any]], title: str, *, limit: int = TOOLS_TABLE_ROWS) -> None:
    """A table of tools: method, activation, delivery, long-running (the first `limit`)."""
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for col in ("method", "activation", "delivery", "long-running", "hints"):
        table.add_column(col)
    ordered = sorted(tools, key=lambda t: t["method"])
    for t in ordered[:limit]:
        hints = ", ".join(k if v else f"not {k}" for k, v in sorted(t.get("hints", {}).items()))
        table.add_row(
            t["method"],
            t["activation"],
            t["delivery"],
            "yes" if t.get("long_running") else "no",
            hints,
        )
    if len(ordered) > limit:
        table.add_row(f"… and {len(ordered) - limit} more (--json lists all)", "", "", "", "")
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


def _esc(text: Any) -> str:
    """Bundle-controlled text made inert: no rich markup, no terminal control codes."""
    from rich.markup import escape

    shown = "".join(
        ch if ch.isprintable() or ch == " " else ch.encode("unicode_escape").decode("ascii")
        for ch in str(text)
    )
    return escape(shown)


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


def verify_report(report: Any) -> None:
    """`lineup verify`: the problems, then one verdict line."""
    problems(report.problems)
    if report.ok:
        app = report.manifest["app"]
        label = f" ({report.signer.label})" if report.signer and report.signer.label else ""
        line(
            f"[green]verified[/] {_esc(report.bundle)}: {app['scope']} {_esc(app['version'])}, "
            f"{len(report.manifest['tools'])} tools, {len(report.manifest['files'])} files, "
            f"signed by {report.key_id}{_esc(label)}"
        )
    else:
        first = report.problems[0].code if report.problems else "not verified"
        line(f"[red]rejected[/] {_esc(report.bundle)}: {first}")


def inspect_report(report: Any) -> None:
    """`lineup inspect`: app, key, signature status, tools and files."""
    doc = report.to_dict()
    rows = [("bundle", doc["bundle"])]
    if doc["app"]:
        app = doc["app"]
        rows += [
            ("app", f"{app['scope']} {app['version']} ({app['name']})"),
            ("entry", app["entry"]),
            ("permissions", ", ".join(sorted(app.get("permissions", {}))) or "none"),
        ]
        rows.append(("sdk", report.manifest["sdk"]["version"]))
    signature = doc["signature"] + (f" ({doc['signer_label']})" if doc["signer_label"] else "")
    rows += [("key id", doc["key_id"] or "-"), ("signature", signature)]
    rows.append(("manifest sha256", doc["manifest_sha256"] or "-"))
    kv_table([(k, _esc(v)) for k, v in rows])
    if doc["app"]:
        tools_table(report.manifest["tools"], "tools")
        table(["path", "size"], [[_esc(f["path"]), str(f["size"])] for f in doc["files"]], "files")
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
    _console().print(t)
