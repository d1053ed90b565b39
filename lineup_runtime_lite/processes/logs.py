"""A worker's log: its stdout and stderr, appended to a file the runtime owns, up to a byte
budget (cold workers, warm images and their forks alike)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import IO

__all__ = ["LogPipe"]


class LogPipe(asyncio.Protocol):
    """The worker's stdout and stderr, appended to its log file up to a byte budget."""

    def __init__(self, path: Path, max_bytes: int) -> None:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # the umask aside
        self._fh: IO[bytes] | None = open(  # noqa: SIM115 - closed on EOF
            path, "ab", opener=lambda name, flags: os.open(name, flags, 0o600)
        )
        self._left = max(0, max_bytes - self._fh.tell())
        self._noted = False

    def data_received(self, data: bytes) -> None:
        if self._fh is None:
            return
        if len(data) <= self._left:
            self._fh.write(data)
            self._left -= len(data)
        else:
            if self._left:
                self._fh.write(data[: self._left])
                self._left = 0
            if not self._noted:
                self._noted = True
                self._fh.write(b"\n[lineup: worker log truncated at its size limit]\n")
        self._fh.flush()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None
