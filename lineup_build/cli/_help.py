"""Help pages that keep every command's summary whole, whatever the width (click's default
cuts it to the room left on one line, mid-sentence, when no terminal says how wide it is)."""

from __future__ import annotations

import sys
import textwrap
from typing import Any

from typer.core import TyperGroup


class WholeSummaries(TyperGroup):
    """A group whose command list shows each command's whole first sentence, wrapped at
    spaces only (a hyphenated word is never split across lines)."""

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is None or command.hidden:
                continue
            rows.append((name, command.get_short_help_str(limit=sys.maxsize)))
        if not rows:
            return
        with formatter.section("Commands"):
            first = max(len(name) for name, _ in rows)
            indent = " " * formatter.current_indent
            room = max(formatter.width - formatter.current_indent - first - 2, 20)
            for name, text in rows:
                lines = textwrap.wrap(
                    text, room, break_on_hyphens=False, break_long_words=False
                ) or [""]
                formatter.write(f"{indent}{name:<{first}}  {lines[0]}\n")
                for line in lines[1:]:
                    formatter.write(f"{indent}{'':<{first}}  {line}\n")
