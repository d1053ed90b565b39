"""Polling for edits of a project folder (no new dependency): a signature of every file's
path, size and mtime, `.lineup/` and caches ignored."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from pathlib import Path

__all__ = ["IGNORED", "Watcher", "signature"]

#: Folders never looked into: the toolchain's own state, caches, VCS and environments.
IGNORED = frozenset(
    {
        ".lineup",
        "__pycache__",
        ".git",
        ".venv",
        "venv",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
    }
)


def signature(root: Path) -> frozenset[tuple[str, int, int]]:
    """`(relative path, size, mtime_ns)` of every file below `root`."""
    out: set[tuple[str, int, int]] = set()
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in IGNORED]
        for name in files:
            path = os.path.join(folder, name)
            try:
                st = os.stat(path)
            except OSError:
                continue  # removed meanwhile: the next look sees it gone
            out.add((os.path.relpath(path, root), st.st_size, st.st_mtime_ns))
    return frozenset(out)


class Watcher:
    """Calls `on_change()` (on its own thread) after the folder changed and then held
    still for one poll interval (an editor's save is often several writes)."""

    def __init__(self, root: Path, on_change: Callable[[], None], *, interval_s: float = 0.25):
        self.root, self.on_change, self.interval_s = root, on_change, interval_s
        self._stop = threading.Event()
        self._last = signature(root)
        self._thread = threading.Thread(target=self._run, name="lineup-dev-watch", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        pending: frozenset[tuple[str, int, int]] | None = None
        while not self._stop.wait(self.interval_s):
            now = signature(self.root)
            if now != self._last and now == pending:  # changed, and still since the last look
                self._last = now
                pending = None
                with contextlib.suppress(Exception):  # on_change reports its own failures
                    self.on_change()
                continue
            pending = now if now != self._last else None

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
