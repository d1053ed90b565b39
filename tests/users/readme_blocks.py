"""The fenced code blocks of a README or a docs page and their `<!-- readme-test: ... -->` markers.

Standard library only: `.ci/run` runs this file to read the newcomer commands it executes
(`python3 tests/users/readme_blocks.py newcomer README.md` prints one command per line), and
the users suite reads the same blocks through `blocks()`.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = ["MARKERS", "Block", "blocks", "newcomer_commands"]

#: The markers a block may carry, on the line right before its opening fence.
MARKERS = ("newcomer", "syntax-only", "server", "install")

_FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")
_MARKER = re.compile(r"^\s*<!--\s*readme-test:\s*(?P<name>[\w-]+)\s*-->\s*$")


@dataclass(frozen=True)
class Block:
    """One fenced block: its info string's first word, its text, and its marker."""

    lang: str
    text: str
    line: int  # 1-based line of the opening fence
    marker: str | None

    def label(self) -> str:
        return f"line {self.line} ({self.lang or 'no language'})"


def blocks(markdown: str) -> list[Block]:
    """Every fenced block of `markdown`, in order.

    Raises:
        ValueError: a block is not closed, or a marker is unknown or is not right before a fence.
    """
    lines = markdown.splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        marker = _MARKER.match(lines[i])
        if marker is not None:
            if marker["name"] not in MARKERS:
                raise ValueError(f"line {i + 1}: unknown marker {marker['name']!r} ({MARKERS})")
            if i + 1 >= len(lines) or _FENCE.match(lines[i + 1]) is None:
                raise ValueError(f"line {i + 1}: a readme-test marker must precede a fence")
        opening = _FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        fence = opening["fence"]
        info = opening["info"].strip().split()
        before = _MARKER.match(lines[i - 1]) if i > 0 else None
        end = i + 1
        while end < len(lines):
            closing = lines[end].strip()
            if closing.startswith(fence[0] * len(fence)) and not closing.strip(fence[0]):
                break
            end += 1
        else:
            raise ValueError(f"line {i + 1}: the fenced block is never closed")
        body = [line.removeprefix(opening["indent"]) for line in lines[i + 1 : end]]
        found.append(
            Block(
                lang=info[0].lower() if info else "",
                text="\n".join(body) + "\n",
                line=i + 1,
                marker=None if before is None else before["name"],
            )
        )
        i = end + 1
    return found


def newcomer_commands(markdown: str) -> list[str]:
    """The commands of the blocks marked `newcomer`, one single-line shell block each.

    Raises:
        ValueError: a newcomer block is not a shell block of exactly one command line.
    """
    commands: list[str] = []
    for block in blocks(markdown):
        if block.marker != "newcomer":
            continue
        lines = [line for line in block.text.splitlines() if line.strip()]
        if block.lang not in ("bash", "sh") or len(lines) != 1:
            raise ValueError(f"{block.label()}: a newcomer block is one bash command line")
        commands.append(lines[0])
    return commands


def _main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] != "newcomer":
        print("usage: readme_blocks.py newcomer README.md", file=sys.stderr)
        return 2
    for command in newcomer_commands(Path(argv[1]).read_text(encoding="utf-8")):
        print(command)
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
