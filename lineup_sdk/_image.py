"""The warm image of an app version (decision record 0007): one process per app version
that enters the app-level sandbox, imports the entry once, and forks a worker per App
session.

This module holds the first step: the checks that decide, right after the import, whether
the process may serve as an image at all. An image that fails them is not used, and the
app version's session workers start cold. The checks read the process's own `/proc/self`.
The parsers take the text, so tests can give them fixed input.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

__all__ = ["image_checks", "risky_shared_mappings", "stray_descriptors", "threads_in"]


def threads_in(status: str) -> int:
    """The `Threads:` count of a `/proc/<pid>/status` text, C threads included (0 when it
    has none)."""
    for line in status.splitlines():
        name, _, rest = line.partition(":")
        if name == "Threads" and rest.strip().isdigit():
            return int(rest.strip())
    return 0


def _under(path: str, roots: Iterable[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def risky_shared_mappings(maps: str, writable_roots: Iterable[str] = ()) -> list[str]:
    """The `MAP_SHARED` mappings of a `/proc/<pid>/maps` text that one forked worker could
    use to reach another: every writable one, and every read-only one that could be made
    writable (`mprotect`) — of memory with no file (shared anonymous memory, `memfd`, SysV
    segments: `(deleted)` or no path), of a device, or of a file under `writable_roots`
    (the image's tmp). A read-only shared mapping of a file the process could only open
    read-only (glibc's `gconv-modules.cache`, say) is not risky: `mprotect` to writable
    fails on it. Each is named by its path, or `[anonymous]`."""
    roots = list(writable_roots)
    found: list[str] = []
    for line in maps.splitlines():
        parts = line.split(None, 5)
        if len(parts) < 5 or len(parts[1]) != 4 or parts[1][3] != "s":
            continue
        path = parts[5].strip() if len(parts) == 6 else ""
        if (
            "w" in parts[1]
            or not path.startswith("/")
            or path.endswith("(deleted)")
            or _under(path, ["/dev", *roots])
        ):
            found.append(path or "[anonymous]")
    return found


def stray_descriptors(open_fds: Iterable[int], keep: Iterable[int]) -> list[int]:
    """The open descriptors beyond stdin, stdout, stderr and `keep`, sorted."""
    allowed = {0, 1, 2, *keep}
    return sorted(fd for fd in set(open_fds) if fd not in allowed)


def _open_fds() -> list[int]:
    """This process's open descriptors (the one that listed them, closed since, left out)."""
    names = os.listdir("/proc/self/fd")
    out = []
    for name in names:
        try:
            os.fstat(int(name))
        except (OSError, ValueError):
            continue
        out.append(int(name))
    return out


def _children() -> list[int]:
    """This process's live children, from every one of its threads."""
    out: list[int] = []
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/children") as fh:
                out += [int(p) for p in fh.read().split()]
        except (OSError, ValueError):
            continue
    return out


def image_checks(keep: Iterable[int] = (), writable_roots: Iterable[str] = ()) -> str | None:
    """Whether this process, its entry imported, may serve as an image: None if it may,
    else why not in one line. It must be single-threaded (a thread would not exist in the
    forks, and a lock it held would stay held there), hold no shared mapping a fork could
    write (`risky_shared_mappings`: one memory between sessions), hold no descriptor but
    its standard ones and `keep` (what the import opened), and have no child process."""
    try:
        with open("/proc/self/status") as fh:
            threads = threads_in(fh.read())
        with open("/proc/self/maps") as fh:
            shared = risky_shared_mappings(fh.read(), writable_roots)
        stray = stray_descriptors(_open_fds(), keep)
        children = _children()
    except OSError as exc:
        return f"this platform cannot tell ({exc.strerror or exc})"
    if threads != 1:
        return f"{threads} threads after the import (an image must be single-threaded)"
    if shared:
        return f"a shared mapping made at import ({', '.join(sorted(set(shared))[:3])})"
    if stray:
        return f"descriptors left open by the import ({', '.join(map(str, stray[:5]))})"
    if children:
        return f"processes started by the import ({', '.join(map(str, children[:5]))})"
    return None
