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


def _setflags(fd: int) -> None:
    fcntl.ioctl(fd, SETFLAGS, struct.pack("l", APPEND_FL))


def _fssetxattr(fd: int) -> None:
    fcntl.ioctl(fd, FSSETXATTR, bytes(28))


def attempts(path: str) -> dict[str, str]:
    """Every metadata change SPEC 13.3 refuses, tried on `path`."""
    return {
        "chmod": outcome(lambda: os.chmod(path, 0o6777)),
        "fchmod": outcome(lambda: _with_fd(path, lambda fd: os.fchmod(fd, 0o6777))),
        "chown": outcome(lambda: os.chown(path, 0, 0)),
        "fchown": outcome(lambda: _with_fd(path, lambda fd: os.fchown(fd, 0, 0))),
        "lchown": outcome(lambda: os.lchown(path, 0, 0)),
        "utime": outcome(lambda: os.utime(path, (1, 1))),
        "futime": outcome(lambda: _with_fd(path, lambda fd: os.utime(fd, (1, 1)))),
        "setxattr": outcome(lambda: _setxattr(path)),
        "removexattr": outcome(lambda: os.removexattr(path, "user.lineup")),
        "setflags": outcome(lambda: _with_fd(path, _setflags)),
        "fssetxattr": outcome(lambda: _with_fd(path, _fssetxattr)),
    }
