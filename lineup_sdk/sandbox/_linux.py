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
    "drop_capabilities",
    "install_filter",
    "install_session_filter",
    "landlock_abi",
    "mount_proc",
    "mount_tmpfs",
    "no_new_privs",
    "pidfd_getfd",
    "seccomp_program",
    "session_program",
    "set_dumpable",
    "set_parent_death_signal",
    "setns",
    "unshare",
    "write_id_maps",
]

CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000

_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4
_PR_SET_SECCOMP = 22
_PR_CAPBSET_DROP = 24
_PR_SET_NO_NEW_PRIVS = 38
_PR_CAP_AMBIENT = 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4
_SECCOMP_MODE_FILTER = 2

_MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_REC, _MS_PRIVATE = 0x2, 0x4, 0x8, 0x4000, 0x40000
#: pidfd_getfd: the same number on every architecture (5.6).
_SYS_PIDFD_GETFD = 438

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


def setns(fd: int, nstype: int) -> None:
    """Move this (single-threaded) process into the namespace `fd` names."""
    _check(_c().setns(ctypes.c_int(fd), ctypes.c_int(nstype)), "setns")


def set_dumpable(on: bool) -> None:
    """A non-dumpable process: no `process_vm_readv`, `/proc/<pid>/mem` or ptrace of it by a
    process without CAP_SYS_PTRACE over its memory's user namespace."""
    _prctl(_PR_SET_DUMPABLE, 1 if on else 0)


def write_id_maps(uid: int, gid: int, *, pid: int | str = "self") -> None:
    """Map `uid` and `gid` onto themselves (and nothing else) in the fresh user namespace
    of process `pid` (this process by default; another from its parent namespace)."""
    with open(f"/proc/{pid}/setgroups", "w") as fh:
        fh.write("deny")
    with open(f"/proc/{pid}/uid_map", "w") as fh:
        fh.write(f"{uid} {uid} 1")
    with open(f"/proc/{pid}/gid_map", "w") as fh:
        fh.write(f"{gid} {gid} 1")


def mount_proc(path: str = "/proc") -> None:
    """Mount a fresh procfs of this process's PID namespace over `path`."""
    libc = _c()
    libc.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_char_p]
    flags = _MS_NOSUID | _MS_NODEV | _MS_NOEXEC
    _check(libc.mount(b"proc", path.encode(), b"proc", flags, None), "mount proc")


def pidfd_getfd(pidfd: int, fd: int) -> int:
    """A copy of descriptor `fd` of the process `pidfd` names (close-on-exec)."""
    fn = _c().syscall
    fn.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.c_int, ctypes.c_uint]
    fn.restype = ctypes.c_long
    return _check(int(fn(_SYS_PIDFD_GETFD, pidfd, fd, 0)), "pidfd_getfd")


def mount_tmpfs(path: str, size_mb: int, *, private: bool = True) -> None:
    """Make mounts private to our mount namespace (unless `private` is False: they are
    already), then mount a bounded tmpfs at `path`."""
    libc = _c()
    libc.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_char_p]
    if private:
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


#: CAP_SYS_PTRACE's bit: what lets a runtime take a non-dumpable worker's pipes.
CAP_SYS_PTRACE = 19


def has_capability(cap: int) -> bool:
    """Whether this process holds capability `cap` in its effective set (`CapEff` in
    `/proc/self/status`); False where that cannot be read."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("CapEff:"):
                    return bool(int(line.split()[1], 16) >> cap & 1)
    except (OSError, ValueError, IndexError):
        pass
    return False


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
#: Per architecture: AUDIT_ARCH, whether the x32 ABI shares it, and the syscall numbers
#: the filter looks at (`socket`, `ioctl`, and the file-metadata family SPEC 13.3 refuses).
_ARCH: dict[str, tuple[int, bool, dict[str, int]]] = {
    "x86_64": (
        0xC000003E,
        True,
        {
            "socket": 41, "ioctl": 16,
            "unshare": 272, "setns": 308, "clone": 56, "clone3": 435, "ptrace": 101,
            "process_vm_readv": 310, "process_vm_writev": 311, "pidfd_getfd": 438,
            "chmod": 90, "fchmod": 91, "fchmodat": 268, "fchmodat2": 452,
            "chown": 92, "fchown": 93, "lchown": 94, "fchownat": 260,
            "utime": 132, "utimes": 235, "futimesat": 261, "utimensat": 280,
            "setxattr": 188, "lsetxattr": 189, "fsetxattr": 190, "setxattrat": 463,
            "removexattr": 197, "lremovexattr": 198, "fremovexattr": 199, "removexattrat": 466,
        },
    ),
    "aarch64": (  # the generic table: no chmod, chown, utime(s) or futimesat
        0xC00000B7,
        False,
        {
            "socket": 198, "ioctl": 29,
            "unshare": 97, "setns": 268, "clone": 220, "clone3": 435, "ptrace": 117,
            "process_vm_readv": 270, "process_vm_writev": 271, "pidfd_getfd": 438,
            "fchmod": 52, "fchmodat": 53, "fchmodat2": 452,
            "fchown": 55, "fchownat": 54, "utimensat": 88,
            "setxattr": 5, "lsetxattr": 6, "fsetxattr": 7, "setxattrat": 463,
            "removexattr": 14, "lremovexattr": 15, "fremovexattr": 16, "removexattrat": 466,
        },
    ),
}  # fmt: skip
#: The file-metadata syscalls refused with EPERM (SPEC 13.3): Landlock does not cover them.
METADATA_SYSCALLS = (
    *("chmod", "fchmod", "fchmodat", "fchmodat2"),
    *("chown", "fchown", "lchown", "fchownat"),
    *("utime", "utimes", "futimesat", "utimensat"),
    *("setxattr", "lsetxattr", "fsetxattr", "setxattrat"),
    *("removexattr", "lremovexattr", "fremovexattr", "removexattrat"),
)
#: `ioctl` requests that change inode flags or attributes: FS_IOC_SETFLAGS (its 64- and
#: 32-bit encodings) and FS_IOC_FSSETXATTR. The kernel reads the request as 32 bits.
METADATA_IOCTLS = (0x40086602, 0x40046602, 0x401C5820)
_EACCES, _EPERM = 13, 1
_LD, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_ENOSYS = 38
#: Every namespace flag `clone` takes (NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID,
#: NEWNET).
_CLONE_NAMESPACES = 0x7E020000
#: What a session worker never needs and the image did (decision record 0007, 3.6).
#: `process_vm_readv`/`writev` stay allowed: in its own PID namespace a worker can name
#: only its own session's processes, and the others are non-dumpable and in sibling
#: Landlock domains besides (refused without the filter; a session may read its own).
SESSION_REFUSED = ("unshare", "setns", "ptrace", "pidfd_getfd")
_ALLOW = 0x7FFF0000
_ERRNO = 0x00050000


#: io_uring_setup, io_uring_enter, io_uring_register: the same numbers on every
#: architecture. An io_uring SOCKET + CONNECT creates and connects a unix socket without
#: ever calling socket(), so the whole interface is refused.
_IO_URING = (425, 426, 427)


def _assemble(program: list[tuple[int, int, str | None, str | None] | str]) -> bytes:
    """Classic BPF from instructions `(code, k, jump_if_true, jump_if_false)` whose jumps
    name labels (a bare string in the list marks the next instruction); None falls through."""
    labels: dict[str, int] = {}
    insns: list[tuple[int, int, str | None, str | None]] = []
    for item in program:
        if isinstance(item, str):
            labels[item] = len(insns)
        else:
            insns.append(item)
    out = b""
    for i, (code, k, jt, jf) in enumerate(insns):
        t = labels[jt] - i - 1 if jt else 0
        f = labels[jf] - i - 1 if jf else 0
        assert 0 <= t < 256 and 0 <= f < 256, "seccomp jump out of range"
        out += struct.pack("=HBBI", code, t, f, k)
    return out


def seccomp_program(machine: str) -> bytes:
    """The filter for `machine`: `socket(AF_UNIX, ...)`, io_uring and every syscall of a
    foreign ABI (i386 `socketcall`, x32) fail with EACCES; the file-metadata syscalls and
    inode-flag `ioctl`s with EPERM; everything else is allowed.

    Raises:
        OSError: no filter for this architecture.
    """
    arch = _ARCH.get(machine)
    if arch is None:
        raise OSError(0, f"no seccomp filter for {machine}")
    audit_arch, has_x32, nrs = arch
    prog: list[tuple[int, int, str | None, str | None] | str] = [
        (_LD, 4, None, None),  # seccomp_data.arch
        (_JEQ, audit_arch, None, "eacces"),  # a foreign ABI
        (_LD, 0, None, None),  # seccomp_data.nr
    ]
    if has_x32:
        prog.append((_JGE, 0x40000000, "eacces", None))
    prog += [(_JEQ, nr, "eacces", None) for nr in _IO_URING]
    prog.append((_JEQ, nrs["socket"], "socket", None))
    prog.append((_JEQ, nrs["ioctl"], "ioctl", None))
    prog += [(_JEQ, nrs[name], "eperm", None) for name in METADATA_SYSCALLS if name in nrs]
    prog += [(_RET, _ALLOW, None, None), "socket"]
    prog += [(_LD, 16, None, None), (_JEQ, 1, "eacces", "allow")]  # args[0]: AF_UNIX?
    prog += ["ioctl", (_LD, 24, None, None)]  # args[1], low 32 bits: the request
    prog += [(_JEQ, req, "eperm", None) for req in METADATA_IOCTLS]
    prog += ["allow", (_RET, _ALLOW, None, None)]
    prog += ["eacces", (_RET, _ERRNO | _EACCES, None, None)]
    prog += ["eperm", (_RET, _ERRNO | _EPERM, None, None)]
    return _assemble(prog)


def session_program(machine: str) -> bytes:
    """The second filter a session worker forked from an image stacks on the first:
    `unshare`, `setns`, `ptrace`, `pidfd_getfd` and a `clone` with a namespace flag fail
    with EPERM; `clone3`, whose flags a filter cannot read, with
    ENOSYS (libc then falls back to `clone`). The first filter already refuses foreign ABIs.

    Raises:
        OSError: no filter for this architecture.
    """
    arch = _ARCH.get(machine)
    if arch is None:
        raise OSError(0, f"no seccomp filter for {machine}")
    audit_arch, _, nrs = arch
    prog: list[tuple[int, int, str | None, str | None] | str] = [
        (_LD, 4, None, None),
        (_JEQ, audit_arch, None, "eperm"),
        (_LD, 0, None, None),
        (_JEQ, nrs["clone3"], "enosys", None),
        (_JEQ, nrs["clone"], "clone", None),
    ]
    prog += [(_JEQ, nrs[name], "eperm", None) for name in SESSION_REFUSED]
    prog += [(_RET, _ALLOW, None, None), "clone"]
    prog += [(_LD, 16, None, None), (_JSET, _CLONE_NAMESPACES, "eperm", None)]
    prog += [(_RET, _ALLOW, None, None)]
    prog += ["enosys", (_RET, _ERRNO | _ENOSYS, None, None)]
    prog += ["eperm", (_RET, _ERRNO | _EPERM, None, None)]
    return _assemble(prog)


def install_session_filter() -> None:
    """Stack `session_program` on this process (filters intersect: the first stays).

    Raises:
        OSError: unknown architecture, or the kernel refused the filter.
    """
    _install(session_program(platform.machine()))


def install_filter() -> None:
    """Install `seccomp_program` on this process and every process it starts.

    `socketpair()` stays allowed: it connects nothing outside the process (asyncio's
    self-pipe uses it). Creating files with a mode (`open`, `mkdir`) stays allowed too;
    changing a mode, owner, times or extended attributes afterwards does not.

    Raises:
        OSError: unknown architecture, or the kernel refused the filter.
    """
    _install(seccomp_program(platform.machine()))


def _install(code: bytes) -> None:
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
