"""Plain-text and GitHub-annotation output of `lineup diff` (no rich: the gate starts fast).

Manifest text (descriptions, enum values, patterns) is shown literally: control
characters are escaped so a hostile bundle cannot drive the terminal or forge an
annotation line.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, TextIO

__all__ = ["github", "inert", "text"]


def inert(value: Any) -> str:
    """`value` as one printable line (control characters and line breaks escaped)."""
    return "".join(
        ch if ch.isprintable() or ch == " " else ch.encode("unicode_escape").decode("ascii")
        for ch in str(value)
    )


def _where(change: Any) -> str:
    field = change.field
    return f"{field} ({change.pointer})" if field and change.pointer else change.pointer or ""


def _summary(report: Any) -> str:
    n, total = len(report.breaking), len(report.changes)
    versions = f"{report.old_version} -> {report.new_version}, {report.bump}"
    if not total:
        return f"ok: no changes for Agents ({versions})"
    if not n:
        return f"ok: {total} change(s), none breaking ({versions})"
    if report.ok:
        return f"ok: {n} breaking change(s) under a major version bump ({versions})"
    return f"fail: {n} breaking change(s) without a major version bump ({versions})"


def _text_line(out: TextIO, c: Any, subject: str, indent: str = "  ") -> None:
    mark = "BREAKING" if c.breaking else "ok      "
    where = f" {inert(_where(c))}" if _where(c) else ""
    out.write(f"{indent}{mark} {subject}{where}: {c.kind}: {inert(c.message)}\n")


def text(report: Any, out: TextIO | None = None) -> None:
    """The report for people: one line per change, then the verdict."""
    out = out or sys.stdout
    out.write(
        f"{inert(report.scope)}: {inert(report.old_source)} {report.old_version} -> "
        f"{inert(report.new_source)} {report.new_version}\n"
    )
    actions = report.action_changes
    for c in report.changes:
        if c.action is None:
            _text_line(out, c, inert(c.tool) if c.tool else "app")
    if actions:  # their own section (SPEC 17): what an open Surface meets
        out.write("  UI Actions:\n")
        for c in actions:
            _text_line(out, c, inert(c.action), indent="    ")
    out.write(_summary(report) + "\n")
    verdict = report.verdict()
    if verdict is not None and verdict.hint:
        out.write(f"  hint: {inert(verdict.hint)}\n")


def _data(value: str) -> str:
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _prop(value: str) -> str:
    return _data(value).replace(":", "%3A").replace(",", "%2C")


def github(
    report: Any,
    out: TextIO | None = None,
    *,
    locate: Callable[[Any], tuple[str, int]] | None = None,
) -> None:
    """Workflow commands: `::error` for a breaking change that fails the gate,
    `::warning` for one a major bump allows, `::notice` for a compatible change; each at
    `file=`/`line=` when `locate` says (given a change, or None for the verdict)."""
    out = out or sys.stdout

    def at(change: Any) -> str:
        if locate is None:
            return ""
        file, line = locate(change)
        return f"file={_prop(inert(file))},line={line},"

    for c in report.changes:
        subject = c.tool or (f"UI Action {c.action}" if c.action else f"app {report.scope}")
        if c.breaking and not report.ok:
            level, title = "error", f"Breaking change in {subject}"
        elif c.breaking:
            level, title = "warning", f"Breaking change in {subject} (major bump)"
        else:
            level, title = "notice", f"Change in {subject}"
        where = _where(c)
        body = f"{where}: {c.kind}: {c.message}" if where else f"{c.kind}: {c.message}"
        out.write(f"::{level} {at(c)}title={_prop(inert(title))}::{_data(inert(body))}\n")
    out.write(_summary(report) + "\n")
    verdict = report.verdict()
    if verdict is not None:
        out.write(f"::error {at(None)}title=lineup diff::{_data(inert(verdict.message))}\n")
