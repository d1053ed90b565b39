"""Write the reference to a file: the one place `lineup docs` touches the disk."""

from __future__ import annotations

from pathlib import Path

from lineup_sdk.errors import LineupError

__all__ = ["write_docs"]

_HINT = "pass a writable file path for --out, or leave it out to print to stdout"


def write_docs(path: Path, text: str) -> None:
    """Write the reference to `path` (UTF-8, `\\n` line ends).

    Raises:
        LineupError: `usage_invalid` (exit status 2) when the file cannot be written.
    """
    if path.is_dir():
        raise LineupError("usage_invalid", f"--out {path} is a folder", hint=_HINT, exit_code=2)
    try:
        path.write_text(text, encoding="utf-8", newline="\n")
    except OSError as exc:
        raise LineupError(
            "usage_invalid", f"cannot write {path}: {exc.strerror or exc}", hint=_HINT, exit_code=2
        ) from None
