"""Control groups for sandboxed process trees (SPEC 13.3).

The parent side, in the runtime's (or the build's) own process: no MiniApp code runs here.
Each sandboxed process gets a `pids` and a `memory` group, children of this process's own
groups as `/proc/self/cgroup` names them — never the hierarchy's root, never anything above
— inside one folder per runtime process:

    <own group>/lineup-<pid>/<box>

The sandboxed child writes itself into `cgroup.procs` of its groups before it unshares
anything (`lineup_sdk.sandbox.launch`), so everything it starts is counted. When the tree
is gone the groups are removed; whatever a killed runtime left (`lineup-<pid>` of a process
that no longer exists) is removed by `sweep()` at the next open.

Where a mechanism is missing (no hierarchy mounted, cgroup v2 without the controller
delegated, no permission) the group is simply not made and `rt.sandbox` says so: nothing is
faked.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import os
import signal
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CONTROLLERS", "BoxGroups", "Hierarchy", "available", "create", "sweep"]

CONTROLLERS = ("memory", "pids")
_PREFIX = "lineup-"
_seq = itertools.count(1)


@dataclass(frozen=True)
class Hierarchy:
    """Where one controller's groups of this process live: `base` is this process's own
    group folder in it."""

    controller: str
    version: int
    base: Path
    own: str  # this process's group as `/proc/self/cgroup` names it

    @property
    def runtime_dir(self) -> Path:
        return self.base / f"{_PREFIX}{os.getpid()}"


def _own_groups() -> dict[str, str]:
    """Controller (or `""` for the v2 unified hierarchy) → this process's group path."""
    out: dict[str, str] = {}
    try:
        text = Path("/proc/self/cgroup").read_text()
    except OSError:
        return out
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, names, path = parts
        for name in names.split(",") if names else [""]:
            out[name] = path
    return out


def _mounts() -> list[tuple[str, str, str, set[str]]]:
    """(fstype, root within the hierarchy, mount point, super options) per cgroup mount."""
    out: list[tuple[str, str, str, set[str]]] = []
    try:
        text = Path("/proc/self/mountinfo").read_text()
    except OSError:
        return out
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        fields, tail = left.split(), right.split()
        if len(fields) < 5 or len(tail) < 3 or tail[0] not in ("cgroup", "cgroup2"):
            continue
        root, point = fields[3], fields[4].replace("\\040", " ")
        out.append((tail[0], root, point, set(tail[2].split(","))))
    return out


def _inside(own: str, root: str, point: str) -> Path | None:
    """The folder of group `own` under a mount of the hierarchy's `root` at `point`."""
    if root == "/":
        rel = own.lstrip("/")
    elif own == root or own.startswith(root.rstrip("/") + "/"):
        rel = own[len(root) :].lstrip("/")
    else:
        return None  # our group is not visible through this mount
    folder = Path(point) / rel if rel else Path(point)
    return folder if folder.is_dir() else None


_FOUND: dict[str, Hierarchy | None] | None = None


def available() -> dict[str, Hierarchy]:
    """The controllers this process can create child groups for (looked up once)."""
    global _FOUND
    if _FOUND is None:
        _FOUND = dict.fromkeys(CONTROLLERS)
        own, mounts = _own_groups(), _mounts()
        for controller in CONTROLLERS:
            _FOUND[controller] = _v1(controller, own, mounts) or _v2(controller, own, mounts)
    return {k: v for k, v in _FOUND.items() if v is not None}


def _v1(
    controller: str, own: dict[str, str], mounts: list[tuple[str, str, str, set[str]]]
) -> Hierarchy | None:
    if controller not in own:
        return None
    for fstype, root, point, opts in mounts:
        if fstype != "cgroup" or controller not in opts:
            continue
        base = _inside(own[controller], root, point)
        if base is not None and os.access(base, os.W_OK | os.X_OK):
            return Hierarchy(controller, 1, base, own[controller])
    return None


def _v2(
    controller: str, own: dict[str, str], mounts: list[tuple[str, str, str, set[str]]]
) -> Hierarchy | None:
    """A v2 group is usable when our own group delegates the controller to its children:
    it is listed in our `cgroup.subtree_control` (v2 forbids enabling it in a group that
    has processes, so it is never enabled here) and our folder is writable."""
    if "" not in own:
        return None
    for fstype, root, point, _ in mounts:
        if fstype != "cgroup2":
            continue
        base = _inside(own[""], root, point)
        if base is None or not os.access(base, os.W_OK | os.X_OK):
            continue
        with contextlib.suppress(OSError):
            if controller in (base / "cgroup.subtree_control").read_text().split():
                return Hierarchy(controller, 2, base, own[""])
    return None


def _write(path: Path, value: str) -> None:
    with open(path, "w") as fh:
        fh.write(value)


@dataclass
class BoxGroups:
    """The groups of one sandboxed process tree."""

    dirs: dict[str, tuple[Hierarchy, Path]]
    memory_mb: int | None
    processes: int | None

    def joins(self) -> list[tuple[str, str, str]]:
        """Per group: its `cgroup.procs` file, its hierarchy's name in `/proc/self/cgroup`
        (`""` for v2) and the path a member's line there shows: the child joins each
        group it is not in yet. (It joins itself: moving a task costs a kernel-wide
        synchronisation, about 12 ms per v1 hierarchy here, and a second writer racing
        it from this process only adds another.)"""
        out = []
        for h, folder in self.dirs.values():
            path = f"{h.own.rstrip('/')}/{folder.parent.name}/{folder.name}"
            out.append((str(folder / "cgroup.procs"), h.controller if h.version == 1 else "", path))
        return out

    def describe(self) -> dict[str, str]:
        """What the groups enforce, in `rt.sandbox`'s words (the child confirms it entered)."""
        out: dict[str, str] = {}
        if "pids" in self.dirs and self.processes:
            h = self.dirs["pids"][0]
            out["processes"] = f"pids cgroup v{h.version}: {self.processes} tasks"
        if "memory" in self.dirs and self.memory_mb:
            h = self.dirs["memory"][0]
            out["memory"] = f"memory cgroup v{h.version}: {self.memory_mb} MiB over the tree"
        return out

    def oom_kills(self) -> int:
        """How many processes of the tree the kernel killed for the memory cap."""
        entry = self.dirs.get("memory")
        if entry is None:
            return 0
        h, folder = entry
        name = "memory.oom_control" if h.version == 1 else "memory.events"
        try:
            text = (folder / name).read_text()
        except OSError:
            return 0
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                with contextlib.suppress(ValueError):
                    return int(value)
        return 0

    def remove(self) -> bool:
        """Kill whatever is still in the groups and remove them; False if some group is
        still busy (its last tasks are exiting): `sweep()` removes it later."""
        done = True
        for _, folder in self.dirs.values():
            done = _remove(folder) and done
        return done


def _kill_all(folder: Path) -> None:
    with contextlib.suppress(OSError):
        for pid in (folder / "cgroup.procs").read_text().split():
            with contextlib.suppress(OSError, ValueError):
                os.kill(int(pid), signal.SIGKILL)


def _remove(folder: Path) -> bool:
    if not folder.exists():
        return True
    for child in [p for p in folder.iterdir() if p.is_dir()]:
        _remove(child)
    _kill_all(folder)
    try:
        folder.rmdir()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True


def create(memory_mb: int | None, processes: int | None) -> BoxGroups:
    """Make the groups of one sandboxed process with their limits set (those this process
    may create; the others are left out)."""
    dirs: dict[str, tuple[Hierarchy, Path]] = {}
    name = f"box-{next(_seq)}"
    for controller, h in available().items():
        limit = memory_mb if controller == "memory" else processes
        if not limit:
            continue
        try:
            folder = _make(h, name)
            _limit(h, folder, limit)
        except OSError:
            with contextlib.suppress(OSError, UnboundLocalError):
                _remove(folder)
            continue
        dirs[controller] = (h, folder)
    return BoxGroups(dirs, memory_mb, processes)


_MADE: set[Path] = set()


def _at_exit() -> None:
    """This process's own folders go with it (a box still busy stays for `sweep()`)."""
    for parent in _MADE:
        _remove(parent)


def _make(h: Hierarchy, name: str) -> Path:
    parent = h.runtime_dir
    if not parent.exists():
        with contextlib.suppress(FileExistsError):
            parent.mkdir()
        if not _MADE:
            atexit.register(_at_exit)
        _MADE.add(parent)
        if h.version == 2:  # let the runtime's folder hand the controller to its boxes
            _write(parent / "cgroup.subtree_control", f"+{h.controller}")
    folder = parent / name
    folder.mkdir()
    return folder


def _limit(h: Hierarchy, folder: Path, limit: int) -> None:
    if h.controller == "pids":
        _write(folder / "pids.max", str(limit))
        return
    size = str(limit << 20)
    if h.version == 2:
        _write(folder / "memory.max", size)
        with contextlib.suppress(OSError):  # no swap beyond the cap either
            _write(folder / "memory.swap.max", "0")
        return
    _write(folder / "memory.limit_in_bytes", size)
    with contextlib.suppress(OSError):  # memsw exists only with swap accounting
        _write(folder / "memory.memsw.limit_in_bytes", size)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep() -> int:
    """Remove what runtimes that no longer run left behind (`lineup-<pid>` groups of dead
    processes), and this process's own boxes that are empty. Returns how many folders went."""
    removed = 0
    for h in available().values():
        with contextlib.suppress(OSError):
            for folder in h.base.iterdir():
                if not folder.name.startswith(_PREFIX) or not folder.is_dir():
                    continue
                try:
                    pid = int(folder.name[len(_PREFIX) :])
                except ValueError:
                    continue
                if pid == os.getpid() or _pid_alive(pid):
                    continue
                if _remove(folder):
                    removed += 1
    return removed
