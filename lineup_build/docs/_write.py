"""Write the reference to a file: the one place `lineup docs` touches the disk."""

from __future__ import annotations

from pathlib import Path

from lineup_sdk.errors import LineupError

__all__ = ["write_docs"]


def write_docs(path: Path, text: str) -> None:
    """Write the reference to `path` (UTF-8, `\\n` line ends).

    Raises:
        LineupError: `output_unwritable` (exit status 2) when the file cannot be written.
    """
    if path.is_dir():
        raise LineupError("output_unwritable", f"--out {path} is a folder", exit_code=2)
    try:
        path.write_text(text, encoding="utf-8", newline="\n")
    except OSError as exc:
        raise LineupError(
            "output_unwritable", f"cannot write {path}: {exc.strerror or exc}", exit_code=2
        ) from None
