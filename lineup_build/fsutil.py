"""Atomic file writes and strict JSON hooks shared by the bundle, trust and manifest code."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

__all__ = ["atomic_write", "no_duplicate_keys", "reject_constant"]


def atomic_write(path: Path, chunks: Iterable[bytes], *, mode: int = 0o644) -> None:
    """Write `chunks` to a temporary file beside `path`, fsync, then rename over `path`.

    A failure at any point leaves `path` as it was and no temporary file behind.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            for chunk in chunks:
                fh.write(chunk)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """`json.loads` object hook: a key given twice is an error, not "last one wins"."""
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"duplicate key {k!r}")
        out[k] = v
    return out


def reject_constant(name: str) -> Any:
    """`json.loads` constant hook: NaN and Infinity are not JSON."""
    raise ValueError(f"{name} is not JSON")
