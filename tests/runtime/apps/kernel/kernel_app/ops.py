"""The metadata attempts, shared by the runtime's app and the build's spy entry (pure
standard library: each returns "ok" or the errno's name, never raises for the attempt)."""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import struct
from collections.abc import Callable

#: FS_IOC_GETFLAGS / FS_IOC_SETFLAGS (64-bit encodings), FS_IOC_FSSETXATTR; FS_APPEND_FL.
GETFLAGS, SETFLAGS, FSSETXATTR, APPEND_FL = 0x80086601, 0x40086602, 0x401C5820, 0x20
#: Flags a file's owner may set without any capability (the kernel itself refuses
#: FS_APPEND_FL to a process without CAP_LINUX_IMMUTABLE, so only these prove the filter).
NODUMP_FL, NOATIME_FL = 0x40, 0x80


def outcome(fn: Callable[[], object]) -> str:
    try:
        fn()
    except OSError as exc:
        return errno.errorcode.get(exc.errno or 0, str(exc.errno)) if exc.errno else "OSError"
    return "ok"


def _with_fd(path: str, fn: Callable[[int], object]) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        fn(fd)
    finally:
        os.close(fd)


def _setxattr(path: str) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    value = b"x"
    if libc.setxattr(path.encode(), b"user.lineup", value, len(value), 0) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


def _setflags(fd: int, flag: int = APPEND_FL) -> None:
    current = struct.unpack("l", fcntl.ioctl(fd, GETFLAGS, bytes(8)))[0]
    fcntl.ioctl(fd, SETFLAGS, struct.pack("l", current | flag))


def _fchmodat(path: str) -> None:
    """`os.chmod(name, mode, dir_fd=)`: the `fchmodat` system call through a folder's
    descriptor."""
    folder = os.open(os.path.dirname(path) or ".", os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.chmod(os.path.basename(path), 0o6777, dir_fd=folder)
    finally:
        os.close(folder)


def _fssetxattr(fd: int) -> None:
    fcntl.ioctl(fd, FSSETXATTR, bytes(28))


def attempts(path: str) -> dict[str, str]:
    """Every metadata change SPEC 13.3 refuses, tried on `path`."""
    return {
        "chmod": outcome(lambda: os.chmod(path, 0o6777)),
        "fchmod": outcome(lambda: _with_fd(path, lambda fd: os.fchmod(fd, 0o6777))),
        "fchmodat": outcome(lambda: _fchmodat(path)),
        "chown": outcome(lambda: os.chown(path, 0, 0)),
        "fchown": outcome(lambda: _with_fd(path, lambda fd: os.fchown(fd, 0, 0))),
        "lchown": outcome(lambda: os.lchown(path, 0, 0)),
        "utime": outcome(lambda: os.utime(path, (1, 1))),
        "futime": outcome(lambda: _with_fd(path, lambda fd: os.utime(fd, (1, 1)))),
        "setxattr": outcome(lambda: _setxattr(path)),
        "removexattr": outcome(lambda: os.removexattr(path, "user.lineup")),
        "setflags": outcome(lambda: _with_fd(path, _setflags)),
        "setflags_nodump": outcome(lambda: _with_fd(path, lambda fd: _setflags(fd, NODUMP_FL))),
        "setflags_noatime": outcome(lambda: _with_fd(path, lambda fd: _setflags(fd, NOATIME_FL))),
        "fssetxattr": outcome(lambda: _with_fd(path, _fssetxattr)),
    }
