"""The Linux kernel mechanisms the sandbox uses, through libc (ctypes): namespaces,
Landlock, a seccomp filter, capabilities, rlimits.

Every function raises `OSError` when the kernel refuses; the launcher decides what a refusal
means (skip and report under `best_effort`, stop under `required`). Nothing here runs in
the runtime's own process: only the freshly started, still single-threaded sandbox child
calls these.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import platform
import struct

__all__ = [
    "CLONE_NEWIPC",
    "CLONE_NEWNET",
    "CLONE_NEWNS",
    "CLONE_NEWPID",
    "CLONE_NEWUSER",
    "Landlock",
    "deny_unix_sockets",
    "drop_capabilities",
    "landlock_abi",
    "mount_tmpfs",
    "no_new_privs",
    "set_parent_death_signal",
    "unshare",
    "write_id_maps",
]

CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000

_PR_SET_PDEATHSIG = 1
_PR_SET_SECCOMP = 22
_PR_CAPBSET_DROP = 24
_PR_SET_NO_NEW_PRIVS = 38
_PR_CAP_AMBIENT = 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4
_SECCOMP_MODE_FILTER = 2

_MS_NOSUID, _MS_NODEV, _MS_REC, _MS_PRIVATE = 0x2, 0x4, 0x4000, 0x40000

# Landlock's syscall numbers are the same on every architecture.
_SYS_LANDLOCK_CREATE_RULESET, _SYS_LANDLOCK_ADD_RULE, _SYS_LANDLOCK_RESTRICT_SELF = 444, 445, 446
_LANDLOCK_CREATE_RULESET_VERSION = 1
_LANDLOCK_RULE_PATH_BENEATH = 1

# Filesystem access rights, by the ABI that introduced them.
FS_EXECUTE = 1 << 0
FS_WRITE_FILE = 1 << 1
FS_READ_FILE = 1 << 2
FS_READ_DIR = 1 << 3
FS_REFER = 1 << 13  # ABI 2
FS_TRUNCATE = 1 << 14  # ABI 3
FS_IOCTL_DEV = 1 << 15  # ABI 5
_FS_ABI1 = (1 << 13) - 1
_FILE_ONLY = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE | FS_IOCTL_DEV
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1  # ABI 4
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1  # ABI 6

_libc: ctypes.CDLL | None = None


def _c() -> ctypes.CDLL:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
    return _libc


def _check(result: int, what: str) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return result


def _prctl(option: int, arg2: int = 0, arg3: int = 0) -> int:
    fn = _c().prctl
    fn.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    return _check(fn(option, arg2, arg3, 0, 0), f"prctl({option})")


def unshare(flags: int) -> None:
    """Move this (single-threaded) process into new namespaces."""
    _check(_c().unshare(ctypes.c_int(flags)), "unshare")


def write_id_maps(uid: int, gid: int) -> None:
    """Map our own uid and gid into a fresh user namespace (and nothing else)."""
    with open("/proc/self/setgroups", "w") as fh:
        fh.write("deny")
    with open("/proc/self/uid_map", "w") as fh:
        fh.write(f"{uid} {uid} 1")
    with open("/proc/self/gid_map", "w") as fh:
        fh.write(f"{gid} {gid} 1")


def mount_tmpfs(path: str, size_mb: int) -> None:
    """Make mounts private to our mount namespace, then mount a bounded tmpfs at `path`."""
    libc = _c()
    libc.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_char_p]
    _check(libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None), "mount --make-rprivate")
    opts = f"size={size_mb}m,mode=0700,uid={os.getuid()},gid={os.getgid()}".encode()
    _check(
        libc.mount(b"tmpfs", path.encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV, opts), "mount tmpfs"
    )


def set_parent_death_signal(sig: int) -> None:
    """Have the kernel send `sig` to us when our parent exits."""
    _prctl(_PR_SET_PDEATHSIG, sig)


def no_new_privs() -> None:
    """No execve can ever grant privileges again (setuid bits, file capabilities)."""
    _prctl(_PR_SET_NO_NEW_PRIVS, 1)


def drop_capabilities() -> None:
    """Empty the bounding, ambient, effective, permitted and inheritable sets."""
    last = 40
    try:
        with open("/proc/sys/kernel/cap_last_cap") as fh:
            last = int(fh.read().strip())
    except (OSError, ValueError):
        pass
    for cap in range(last + 1):
        try:
            _prctl(_PR_CAPBSET_DROP, cap)
        except OSError:
            break  # no CAP_SETPCAP (never had any capabilities) or past the last one
    with contextlib.suppress(OSError):
        _prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL)
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = (ctypes.c_uint32 * 6)()  # two zeroed {effective, permitted, inheritable}
    _check(_c().capset(header, data), "capset")


# -- seccomp: refuse socket(AF_UNIX, ...) -----------------------------------------------------
_ARCH = {
    "x86_64": (0xC000003E, 41, True),  # AUDIT_ARCH_X86_64, __NR_socket, has x32
    "aarch64": (0xC00000B7, 198, False),  # AUDIT_ARCH_AARCH64
}
_EACCES = 13


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


#: io_uring_setup, io_uring_enter, io_uring_register: the same numbers on every
#: architecture. An io_uring SOCKET + CONNECT creates and connects a unix socket without
#: ever calling socket(), so the whole interface is refused.
_IO_URING = (425, 426, 427)


def deny_unix_sockets() -> None:
    """Install a seccomp filter: `socket(AF_UNIX, ...)` and io_uring fail with EACCES,
    and so does every syscall of a foreign ABI (i386 `socketcall`, x32) that could get
    round it.

    `socketpair()` stays allowed: it connects nothing outside the process (asyncio's
    self-pipe uses it).

    Raises:
        OSError: unknown architecture, or the kernel refused the filter.
    """
    arch = _ARCH.get(platform.machine())
    if arch is None:
        raise OSError(0, f"no seccomp filter for {platform.machine()}")
    audit_arch, nr_socket, has_x32 = arch
    ld, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06
    deny, allow = 0x00050000 | _EACCES, 0x7FFF0000
    # Built back to front so every jump is a known distance to DENY or ALLOW (the last two
    # instructions): a jump from instruction i lands at i + 1 + offset.
    tail = [_insn(ret, deny), _insn(ret, allow)]
    body: list[bytes] = []

    def to_deny() -> int:  # offset from the instruction about to be prepended
        return len(body)

    def to_allow() -> int:
        return len(body) + 1

    body.insert(0, _insn(jeq, 1, jt=to_deny(), jf=to_allow()))  # AF_UNIX?
    body.insert(0, _insn(ld, 16))  # args[0] (low 32 bits): the address family
    body.insert(0, _insn(jeq, nr_socket, jt=0, jf=to_allow()))  # socket()?
    for nr in _IO_URING:
        body.insert(0, _insn(jeq, nr, jt=to_deny(), jf=0))
    if has_x32:
        body.insert(0, _insn(jge, 0x40000000, jt=to_deny(), jf=0))  # the x32 ABI
    body.insert(0, _insn(ld, 0))  # seccomp_data.nr
    body.insert(0, _insn(jeq, audit_arch, jt=0, jf=to_deny()))  # a foreign ABI → deny
    body.insert(0, _insn(ld, 4))  # seccomp_data.arch
    code = b"".join(body + tail)
    buf = ctypes.create_string_buffer(code, len(code))

    class _Fprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = _Fprog(len(code) // 8, ctypes.addressof(buf))
    fn = _c().prctl
    fn.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
    _check(fn(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.addressof(fprog), 0, 0), "seccomp")


# -- Landlock --------------------------------------------------------------------------------
def landlock_abi() -> int:
    """The kernel's Landlock ABI version; 0 when Landlock is absent or disabled."""
    fn = _c().syscall
    fn.argtypes = [ctypes.c_long, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint32]
    fn.restype = ctypes.c_long
    result = int(fn(_SYS_LANDLOCK_CREATE_RULESET, None, 0, _LANDLOCK_CREATE_RULESET_VERSION))
    return max(result, 0)


class Landlock:
    """One Landlock ruleset: declare what is handled, allow paths, then `restrict()`."""

    def __init__(self, abi: int, *, network: bool) -> None:
        self.abi = abi
        fs = _FS_ABI1
        if abi >= 2:
            fs |= FS_REFER
        if abi >= 3:
            fs |= FS_TRUNCATE
        if abi >= 5:
            fs |= FS_IOCTL_DEV
        self.handled_fs = fs
        self.handled_net = (NET_BIND_TCP | NET_CONNECT_TCP) if abi >= 4 and not network else 0
        self.scoped = (SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL) if abi >= 6 else 0
        attr = struct.pack("=QQQ", self.handled_fs, self.handled_net, self.scoped)
        size = 8 if abi < 4 else 16 if abi < 6 else 24
        buf = ctypes.create_string_buffer(attr[:size], size)
        fn = _c().syscall
        fn.argtypes = [ctypes.c_long, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint32]
        fn.restype = ctypes.c_long
        self.fd = _check(
            int(fn(_SYS_LANDLOCK_CREATE_RULESET, ctypes.addressof(buf), size, 0)),
            "landlock_create_ruleset",
        )

    def allow(self, path: str, access: int) -> bool:
        """Allow `access` beneath `path` (or on the file `path`); False if it does not exist."""
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            return False
        try:
            if not os.path.isdir(path):
                access &= _FILE_ONLY
            access &= self.handled_fs
            rule = struct.pack("=Qi", access, fd)
            buf = ctypes.create_string_buffer(rule, len(rule))
            fn = _c().syscall
            fn.argtypes = [
                ctypes.c_long,
                ctypes.c_int,
                ctypes.c_int,
                ctypes.c_void_p,
                ctypes.c_uint32,
            ]
            fn.restype = ctypes.c_long
            _check(
                int(
                    fn(
                        _SYS_LANDLOCK_ADD_RULE,
                        self.fd,
                        _LANDLOCK_RULE_PATH_BENEATH,
                        ctypes.addressof(buf),
                        0,
                    )
                ),
                f"landlock_add_rule {path}",
            )
        finally:
            os.close(fd)
        return True

    def restrict(self) -> None:
        """Enforce the ruleset on this process and every process it starts."""
        fn = _c().syscall
        fn.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.c_uint32]
        fn.restype = ctypes.c_long
        try:
            _check(int(fn(_SYS_LANDLOCK_RESTRICT_SELF, self.fd, 0)), "landlock_restrict_self")
        finally:
            os.close(self.fd)
