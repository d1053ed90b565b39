"""Helpers shared by the containment batteries (tests/runtime, tests/build)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["io_uring_enabled", "pid_alive", "poll"]


def io_uring_enabled() -> bool:
    """Whether this kernel lets unprivileged processes use io_uring."""
    try:
        return Path("/proc/sys/kernel/io_uring_disabled").read_text().strip() == "0"
    except OSError:
        return False


def pid_alive(pid: int) -> bool:
    """Whether host pid `pid` is a live (not zombie) process."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:  # gone (ENOENT), or exiting while we read (ESRCH)
        return False


def poll(what: Callable[[], Any], *, within_s: float = 10.0) -> Any:
    """The first truthy value of `what()`, asked again until `within_s` has passed (then
    its last value): how tests wait for a real-time effect without sleeping a deadline."""
    deadline = time.monotonic() + within_s
    while True:
        value = what()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.02)
