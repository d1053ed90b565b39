"""What a worker forked from a warm image looks like, and what makes a process unfit to be
one (decision record 0007), shared by the image (`lineup_sdk._image`) and the runtime that
checks each fork from outside: the forked worker's fixed descriptors, the session tmp's
place, the parsers of `/proc` texts the checks read, and the kernel calls the runtime
needs to take a fork's pipes."""

from __future__ import annotations

from collections.abc import Iterable

from lineup_sdk.sandbox._linux import CAP_SYS_PTRACE, has_capability, pidfd_getfd

__all__ = [
    "BRIDGE",
    "BRIDGE_R",
    "CAP_SYS_PTRACE",
    "INBOX",
    "INBOX_W",
    "LOG_R",
    "NAMESPACES",
    "NS_MNT",
    "NS_USER",
    "SESSION_TMP",
    "has_capability",
    "pidfd_getfd",
    "risky_shared_mappings",
    "stray_descriptors",
    "threads_in",
]

#: A forked worker's descriptors, the same in every worker: its ends and the runtime's
#: (taken with `pidfd_getfd`, closed by the worker at `go`). stdout and stderr are the
#: log pipe's write end; stdin is /dev/null.
INBOX, INBOX_W, BRIDGE_R, BRIDGE, LOG_R = 3, 4, 5, 6, 7
#: The worker's own user and mount namespaces, opened by itself (it is non-dumpable: no
#: one else may open them), for the runtime to take and hand to the helper.
NS_USER, NS_MNT = 8, 9
NAMESPACES = (("user", NS_USER), ("mnt", NS_MNT))
#: The session tmp, below the image's tmp root: each worker gets its own tmpfs mounted
#: there, and the image's HOME and TMPDIR point there too (what its import writes there is
#: hidden under every session's tmpfs). A folder below the root and not the root itself:
#: Landlock skips a covered mount point when it walks up from a file, so a tmpfs mounted
#: over the root would be covered by no rule of the image's layer.
SESSION_TMP = "session"


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
