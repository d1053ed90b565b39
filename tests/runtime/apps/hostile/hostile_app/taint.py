"""What the hostile app leaves behind at import, when its build switches ask (decision
record 0007): shared memory, a descriptor pair, a file in its tmp, a thread, at-fork hooks.
Each is what one session could use to reach another if a warm image handed it down to
every session's worker. Also, always: a vault (a buffer at one address in every worker a
warm image forks) and a random generator made at import.

And the attempts: `reach` tries every way into other processes and files, and reports
each outcome (never raises)."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import mmap
import os
import random
import socket
import threading
import time
from typing import Any

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [
    ctypes.c_void_p,
    ctypes.c_size_t,
    ctypes.c_int,
    ctypes.c_int,
    ctypes.c_int,
    ctypes.c_long,
]
_libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_libc.shmat.restype = ctypes.c_void_p
_libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
_libc.shmdt.argtypes = [ctypes.c_void_p]
_libc.shmget.argtypes = [ctypes.c_int, ctypes.c_size_t, ctypes.c_int]
_libc.process_vm_readv.restype = ctypes.c_ssize_t

SIZE = 64

#: A buffer made at import: under a warm image it sits at one address in every fork.
VAULT = bytearray(SIZE)
#: A generator made at import (not the `random` module's own).
RNG = random.Random()
#: What each at-fork hook found (copied into a fork with the rest of the memory).
FINDINGS: list[dict[str, Any]] = []
#: Where the at-fork hooks aim, set by a handler before it forks.
TARGETS: dict[str, Any] = {}
#: The import-time taint the switches asked for.
REGION: mmap.mmap | None = None
FILE_MAP = 0  # the address of a read-only shared mapping of a file in the tmp
PAIR: tuple[socket.socket, socket.socket] | None = None
IMPORT_FILE: str | None = None
_HOOKS: list[Any] = []  # the C at-fork callbacks, kept alive


def _outcome(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.errno is not None:
        return errno.errorcode.get(exc.errno, str(exc.errno))
    return type(exc).__name__


def _errno() -> OSError:
    code = ctypes.get_errno()
    return OSError(code, os.strerror(code))


def address(buf: bytearray) -> int:
    return ctypes.addressof((ctypes.c_char * len(buf)).from_buffer(buf))


def setup(switches: Any) -> None:
    """Leave at import what `switches` ask for."""
    global REGION, FILE_MAP, PAIR, IMPORT_FILE
    tmp = os.environ.get("TMPDIR", "/tmp")
    if getattr(switches, "SHARED_MAP", False):  # anonymous MAP_SHARED memory
        REGION = mmap.mmap(-1, mmap.PAGESIZE)
    if getattr(switches, "SHARED_FILE", False):  # read-only now, mprotect-able later
        fd = os.open(os.path.join(tmp, "mapped-at-import"), os.O_RDWR | os.O_CREAT, 0o600)
        os.write(fd, b"\0" * mmap.PAGESIZE)
        addr = _libc.mmap(None, mmap.PAGESIZE, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        os.close(fd)
        if addr in (None, ctypes.c_void_p(-1).value):
            raise _errno()
        FILE_MAP = int(addr)
    if getattr(switches, "SOCKETPAIR", False):
        PAIR = socket.socketpair()
        for end in PAIR:
            end.setblocking(False)
    if getattr(switches, "TMP_FILE", False):
        IMPORT_FILE = os.path.join(tmp, "written-at-import")
        with open(IMPORT_FILE, "w") as fh:
            fh.write(f"written at import by {os.getpid()}\n")
    if getattr(switches, "THREAD", False):
        threading.Thread(target=time.sleep, args=(3600,), daemon=True).start()
    if getattr(switches, "AT_FORK_SPY", False):
        os.register_at_fork(
            before=lambda: spy("before"),
            after_in_parent=lambda: spy("after_in_parent"),
            after_in_child=lambda: spy("after_in_child"),
        )
        hook = ctypes.CFUNCTYPE(None)
        _HOOKS.extend(
            hook(lambda event=e: spy(event)) for e in ("c_prepare", "c_parent", "c_child")
        )
        _libc.__register_atfork(*_HOOKS, None)


# -- the shared things, written and read by handlers -----------------------------------
def put(which: str, text: str) -> str:
    """Write `text` into the import-time thing `which`: `ok` or why not."""
    data = text.encode()[:SIZE].ljust(SIZE, b"\0")
    try:
        if which == "region":
            if REGION is None:
                return "absent"
            REGION[:SIZE] = data
        elif which == "file_map":
            if not FILE_MAP:
                return "absent"
            if _libc.mprotect(FILE_MAP, mmap.PAGESIZE, mmap.PROT_READ | mmap.PROT_WRITE):
                raise _errno()
            ctypes.memmove(FILE_MAP, data, SIZE)
        elif which == "pair":
            if PAIR is None:
                return "absent"
            for end in PAIR:
                end.send(data)
        elif which == "vault":
            VAULT[:] = data
        else:
            return f"unknown {which}"
    except OSError as exc:
        return _outcome(exc)
    return "ok"


def get(which: str) -> str:
    """What the import-time thing `which` holds as this process sees it (or why not)."""
    try:
        if which == "region":
            raw = bytes(REGION[:SIZE]) if REGION is not None else b"absent"
        elif which == "file_map":
            raw = ctypes.string_at(FILE_MAP, SIZE) if FILE_MAP else b"absent"
        elif which == "pair":
            if PAIR is None:
                return "absent"
            got = b""
            for end in PAIR:
                with contextlib.suppress(BlockingIOError):
                    got += end.recv(4096)
            raw = got or b"nothing"
        elif which == "vault":
            raw = bytes(VAULT)
        else:
            return f"unknown {which}"
    except OSError as exc:
        return _outcome(exc)
    return raw.rstrip(b"\0").decode(errors="replace")


def sysv(key: int, text: str | None) -> str:
    """With `text`: make SysV segment `key` and write it there; without: attach the
    segment `key` if one exists, and read it."""
    flags = (0o1000 | 0o600) if text is not None else 0o600  # IPC_CREAT
    shmid = _libc.shmget(key, 4096, flags)
    if shmid < 0:
        return _outcome(_errno())
    addr = _libc.shmat(shmid, None, 0)
    if addr in (None, ctypes.c_void_p(-1).value):
        return _outcome(_errno())
    try:
        if text is not None:
            ctypes.memmove(addr, text.encode().ljust(SIZE, b"\0")[:SIZE], SIZE)
            return "ok"
        return ctypes.string_at(addr, SIZE).rstrip(b"\0").decode(errors="replace")
    finally:
        _libc.shmdt(addr)


# -- reaching into other processes ----------------------------------------------------
class _IoVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


def vm_read(pid: int, addr: int, size: int = SIZE) -> str:
    """`process_vm_readv` of `size` bytes at `addr` in `pid`: `ok:<text>` or the errno."""
    buf = ctypes.create_string_buffer(size)
    local, remote = _IoVec(ctypes.addressof(buf), size), _IoVec(addr, size)
    got = _libc.process_vm_readv(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
    if got < 0:
        return _outcome(_errno())
    return "ok:" + buf.raw[:got].rstrip(b"\0").decode(errors="replace")


def _read(path: str, at: int = 0) -> str:
    try:
        if os.path.isdir(path):
            return "ok:" + ",".join(sorted(os.listdir(path)))
        with open(path, "rb") as fh:
            if at:
                fh.seek(at)
            return "ok:" + fh.read(SIZE).rstrip(b"\0").decode(errors="replace")
    except (OSError, ValueError, OverflowError) as exc:
        return _outcome(exc)


def proc_listing() -> list[int] | str:
    """The processes this one's `/proc` lists (or why it cannot list them)."""
    try:
        return sorted(int(n) for n in os.listdir("/proc") if n.isdigit())
    except OSError as exc:
        return _outcome(exc)


def reach(pids: list[int], addr: int, files: list[str], tmp: str | None) -> dict[str, Any]:
    """Try every way at each of `pids` (signal 0, `process_vm_readv` at `addr`,
    `/proc/<pid>/mem` at `addr`, its environment, its root's `tmp`) and at each of
    `files`; the outcome of each attempt, data included when one worked. Pid 0 is this
    process (the control: every attempt works on itself)."""
    out: dict[str, Any] = {"pid": os.getpid(), "pids": {}, "files": {}}
    for pid in (p or os.getpid() for p in pids):
        tried: dict[str, str] = {}
        try:
            os.kill(pid, 0)
            tried["kill"] = "ok"
        except OSError as exc:
            tried["kill"] = _outcome(exc)
        tried["vm_read"] = vm_read(pid, addr)
        tried["mem"] = _read(f"/proc/{pid}/mem", addr)
        tried["environ"] = _read(f"/proc/{pid}/environ")
        if tmp:
            tried["root_tmp"] = _read(f"/proc/{pid}/root{tmp}")
        out["pids"][str(pid)] = tried
    for path in files:
        out["files"][path] = _read(path)
    return out


def spy(event: str) -> None:
    """An at-fork hook: aim at `TARGETS` and at every other process `/proc` lists, at the
    vault's address (the same in every fork of one image); note what came back."""
    try:
        listed = proc_listing()
        found = [p for p in listed if p != os.getpid()][:20] if isinstance(listed, list) else []
        pids = [*TARGETS.get("pids", []), *(p for p in found if p not in TARGETS.get("pids", []))]
        addr = int(TARGETS.get("addr") or address(VAULT))
        got = reach(pids, addr, list(TARGETS.get("files", [])), TARGETS.get("tmp"))
        got["event"] = event
        FINDINGS.append(got)
    except BaseException as exc:  # a hook must never break a fork
        FINDINGS.append({"event": event, "failed": repr(exc)})


def fork_and_report() -> dict[str, Any]:
    """Fork (every at-fork hook runs), let the child report what its hooks found; return
    this process's findings and the child's."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            os.write(w, json.dumps(FINDINGS).encode())
        finally:
            os._exit(0)
    os.close(w)
    chunks = []
    while chunk := os.read(r, 1 << 16):
        chunks.append(chunk)
    os.close(r)
    os.waitpid(pid, 0)
    return {"here": FINDINGS, "child": json.loads(b"".join(chunks) or b"[]")}
