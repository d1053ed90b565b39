"""Text for the Markdown page: manifest strings made inert, table cells, code spans."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["DASH", "cell", "code", "html", "inert", "json_text", "paragraph"]

DASH = "—"


def inert(text: Any) -> str:
    shown = str(text)
    if shown.isprintable():  # the common case, without a pass per character
        return shown
    return "".join(
        ch if ch.isprintable() or ch in " \n" else ch.encode("unicode_escape").decode("ascii")
        for ch in shown
    )


def html(text: Any) -> str:
    return inert(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def cell(text: Any) -> str:
    """Text for one table cell: one line, pipes escaped."""
    out = " ".join(html(text).split())
    return out.replace("|", "\\|") or DASH


def code(text: str) -> str:
    text = " ".join(inert(text).split())
    fence = "``" if "`" in text else "`"
    pad = " " if fence == "``" else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def json_text(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def paragraph(text: Any) -> str:
    lines = [line.rstrip() for line in html(text).strip().splitlines()]
    return "\n".join(lines)
