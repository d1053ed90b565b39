"""The sandbox launcher: the first code that runs in a worker or extractor process.

Started as `python -I -B -m lineup_sdk.sandbox.launch CONFIG TARGET ARGS...` (isolated: no
app folder on `sys.path`, no user site, `PYTHON*` ignored, no bytecode written). It enters
the sandbox profile of SPEC 8 — namespaces, rlimits, `no_new_privs`, a seccomp filter,
Landlock, no capabilities — and only then appends the app folder to `sys.path` and hands
over to TARGET (`lineup_sdk._worker` or `lineup_sdk._extract`), passing what is enforced.

With a PID namespace the process forks once: the parent stays as a tiny waiter outside the
namespace (a SIGTERM makes it kill the whole namespace, and it exits only once every
process in it is gone); the child is the namespace's init and runs TARGET.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import signal
import sys
from typing import Any

REPORT_KEYS = (
    *("files", "metadata", "network", "privileges"),
    *("process_tree", "processes", "memory", "tmp"),
)
#: What `required` needs before author code may run (SPEC 8, 13.3).
REQUIRED = ("files", "metadata", "network", "process_tree")


def _read_lists(app_dir: str, network: bool) -> tuple[list[str], list[str]]:
    """What the sandboxed interpreter may read — the app, the Python installation wherever
    it lives, the system files the interpreter and its extensions load — and the folders
    it may only list.

    A `sys.path` folder outside the installation (a project root an editable install put
    there, say) is neither: `enter()` takes it off `sys.path`, so author code never imports
    from it nor reads it (a project's dev key, say). The SDK's own package stays readable
    wherever it lives; it is imported before the sandbox is entered.
    """
    import lineup_sdk

    prefixes = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}

    def installed(path: str) -> bool:
        if os.path.basename(path) in ("site-packages", "dist-packages"):
            return True  # an installation folder wherever it is (a chained venv's, say)
        return any(path == q or path.startswith(q.rstrip(os.sep) + os.sep) for q in prefixes)

    entries = [os.path.realpath(p) for p in sys.path if p and os.path.isdir(p)]
    paths = [
        app_dir,
        *prefixes,
        os.path.dirname(os.path.realpath(sys.executable)),
        os.path.dirname(os.path.realpath(lineup_sdk.__file__)),
        *(p for p in entries if installed(p)),
        *("/lib", "/lib32", "/lib64", "/usr/lib", "/usr/lib32", "/usr/lib64", "/usr/local/lib"),
        *("/etc/ld.so.cache", "/etc/localtime", "/usr/share/zoneinfo", "/etc/mime.types"),
        *("/dev/urandom", "/dev/random", "/dev/zero", "/proc/self"),
    ]
    if network:  # name resolution and TLS roots for an app granted the network
        paths += [
            *("/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf", "/etc/gai.conf"),
            *("/etc/host.conf", "/etc/services", "/etc/protocols", "/etc/ssl"),
            *("/etc/ca-certificates", "/usr/share/ca-certificates", "/etc/pki"),
        ]
    read = list(dict.fromkeys(os.path.realpath(p) for p in paths))
    outside = [p for p in dict.fromkeys(entries) if not installed(p)]
    return read, outside


def _launcher(child: int, helper: int | None = None) -> None:
    """Outside the PID namespace: wait for its init; a SIGTERM ends the whole namespace.
    With a `helper` descriptor (an image's launcher, decision record 0007) it also serves
    the runtime's requests for the session workers forked below (`_helper_loop`)."""
    if helper is None:
        os.closerange(3, 1 << 16)  # the bridge belongs to the child: EOF must reach the runtime
    else:
        os.closerange(3, helper)
        os.closerange(helper + 1, 1 << 16)

    def stop(signum: int, frame: Any) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, stop)
    if helper is not None:
        _helper_loop(child, helper)
    while True:
        try:
            _, status = os.waitpid(child, 0)
            break
        except ChildProcessError:
            os._exit(70)
    # the init's exit returns only once every process of the namespace is gone
    code = os.waitstatus_to_exitcode(status)
    os._exit(code if code >= 0 else 128 - code)


def _helper_loop(child: int, helper: int) -> None:
    """Serve the runtime's requests until it closes the socket or the image exits: each
    one JSON line with the user and mount namespace descriptors of a worker forked from
    the image (`_prepare_session`). The helper never reads what the image writes."""
    import select
    import socket

    try:
        pidfd = os.pidfd_open(child)
    except OSError:
        return
    sock = socket.socket(fileno=helper)
    poller = select.poll()
    poller.register(helper, select.POLLIN)
    poller.register(pidfd, select.POLLIN)
    while True:
        try:
            ready = {fd for fd, _ in poller.poll()}
        except InterruptedError:
            continue
        if pidfd in ready:
            return  # the image exited: the waiter reaps it
        try:
            data, fds, _, _ = socket.recv_fds(sock, 1 << 16, 3)
        except InterruptedError:
            continue
        if not data:  # the runtime is gone: so is everything below
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)
            return
        try:
            req = json.loads(data)
            _prepare_session(req, fds)
            reply: dict[str, Any] = {"ok": True}
        except (OSError, ValueError, KeyError, TypeError) as exc:
            reply = {"ok": False, "error": str(exc)[:300]}
        finally:
            for fd in fds:
                os.close(fd)
        sock.sendall(json.dumps(reply).encode() + b"\n")


def _prepare_session(req: dict[str, Any], ns: list[int]) -> None:
    """The helper's part for one forked worker (`_helper_loop`): its uid and gid maps
    (`nspid` is its pid in the image's namespace: the helper's `/proc` is the image's
    procfs), then its private tmpfs, mounted by a throwaway child in its user and mount
    namespaces `ns` (the worker cannot: Landlock refuses `mount` inside a domain).

    Raises:
        OSError: a step the kernel refused (the worker is then not used).
    """
    from lineup_sdk.sandbox import _linux as k

    if len(ns) != 2:
        raise OSError(0, "no namespaces")
    err_r, err_w = os.pipe()
    try:
        k.write_id_maps(int(req["uid"]), int(req["gid"]), pid=int(req["nspid"]))
        first = os.fork()
        if first == 0:
            os.close(err_r)
            _throwaway(req, ns, err_w)
        os.close(err_w)
        err_w = -1
        why = os.read(err_r, 512).decode(errors="replace")
        _, status = os.waitpid(first, 0)
    finally:
        for fd in (err_r, err_w):
            if fd >= 0:
                os.close(fd)
    if os.waitstatus_to_exitcode(status) != 0 or why:
        raise OSError(0, why or "cannot mount the session's tmpfs and procfs")


def _throwaway(req: dict[str, Any], ns: list[int], err: int) -> None:
    """The helper's throwaway child: into the worker's user namespace (first: it grants
    the capabilities the mount needs) and mount namespace, where it mounts the session's
    tmpfs. Exits; what failed is written to `err`."""
    from lineup_sdk.sandbox import _linux as k

    try:
        k.setns(ns[0], k.CLONE_NEWUSER)
        k.setns(ns[1], k.CLONE_NEWNS)
        k.mount_tmpfs(req["tmp"], int(req["tmp_mb"]), private=False)
        os._exit(0)
    except BaseException as exc:
        os.write(err, str(exc).encode()[:500])
    finally:
        os._exit(1)


def enter(cfg: dict[str, Any]) -> dict[str, Any]:
    """Enter the profile `cfg` describes; returns what is enforced (None = not enforced)."""
    report: dict[str, Any] = dict.fromkeys(REPORT_KEYS)
    report["mode"] = cfg["mode"]
    if cfg["mode"] == "off":
        return report
    missing = set(cfg.get("unavailable", ()))  # the test seam: mechanisms to treat as absent
    network = bool(cfg.get("network"))
    _enter_groups(cfg, report)
    outside = set(_read_lists(cfg["app_dir"], network)[1])
    sys.path[:] = [p for p in sys.path if not p or os.path.realpath(p) not in outside]
    import resource

    if sys.platform.startswith("linux") and "linux" not in missing:
        _enter_linux(cfg, report, missing, network)
    limits = []
    for which, value in (
        (resource.RLIMIT_CORE, 0),
        (resource.RLIMIT_NOFILE, int(cfg.get("open_files", 1024))),
    ):
        try:
            _lower(which, value)
            limits.append(which)
        except (OSError, ValueError):
            pass
    if cfg.get("memory_mb"):
        try:
            _lower(resource.RLIMIT_DATA, int(cfg["memory_mb"]) << 20)
            per_process = f"data {int(cfg['memory_mb'])} MiB per process"
            report["memory"] = (
                f"{report['memory']}; {per_process}"
                if report["memory"]
                else f"{per_process} only (no memory cgroup: not the whole tree)"
            )
        except (OSError, ValueError):
            pass
    if report["tmp"] is None and cfg.get("tmp_mb"):
        try:  # no private tmpfs: at least no single file beyond the bound
            _lower(resource.RLIMIT_FSIZE, int(cfg["tmp_mb"]) << 20)
            report["tmp"] = f"files up to {int(cfg['tmp_mb'])} MiB each"
        except (OSError, ValueError):
            pass
    if network:
        report["network"] = report["network"] or "granted"
    return report


def _enter_groups(cfg: dict[str, Any], report: dict[str, Any]) -> None:
    """Be in the control groups the parent made for this tree before anything is unshared
    (a user namespace could no longer join them): everything started from here on is
    counted and capped."""
    joined = True
    joins = cfg.get("cgroups", ())
    current = _current_groups() if joins else {}
    for procs, hierarchy, path in joins:
        if current.get(hierarchy) == path:
            continue
        try:
            with open(procs, "w") as fh:
                fh.write(str(os.getpid()))
        except OSError:
            joined = False
    if joined:
        for key, says in cfg.get("cgroups_say", {}).items():
            report[key] = says


def _current_groups() -> dict[str, str]:
    """Hierarchy name (`""` for v2) → this process's group, from `/proc/self/cgroup`."""
    out: dict[str, str] = {}
    try:
        with open("/proc/self/cgroup") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return out
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) == 3:
            for name in parts[1].split(",") if parts[1] else [""]:
                out[name] = parts[2]
    return out


def _cap_processes(
    cfg: dict[str, Any], report: dict[str, Any], missing: set[str], *, userns: bool, uid: int
) -> None:
    """Without a pids cgroup: the PID namespace's own `pid_max` (kernels >= 6.14; its floor
    is 301), else, for a runtime that is not root, RLIMIT_NPROC inside the user namespace
    (counted per namespace; outside one it would count every process of the uid). The
    kernel ignores RLIMIT_NPROC for uid 0, so a root runtime without either is reported as
    having no cap."""
    import resource

    cap = cfg.get("processes")
    if report["processes"] or not cap:
        return
    if report["process_tree"] and "pid_max" not in missing:
        value = max(int(cap), 301)
        try:
            with open("/proc/sys/kernel/pid_max", "w") as fh:
                fh.write(str(value))
            with open("/proc/sys/kernel/pid_max") as fh:
                if int(fh.read()) == value:
                    report["processes"] = f"pid namespace pid_max: {value - 1} tasks"
                    return
        except (OSError, ValueError):
            pass
    if not userns or uid == 0:
        return
    try:
        _lower(resource.RLIMIT_NPROC, int(cap))
        report["processes"] = f"RLIMIT_NPROC: {int(cap)} tasks (user namespace)"
    except (OSError, ValueError):
        pass


def _lower(which: int, value: int) -> None:
    import resource

    _, hard = resource.getrlimit(which)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(which, (value, value))


def _enter_linux(
    cfg: dict[str, Any], report: dict[str, Any], missing: set[str], network: bool
) -> None:
    from lineup_sdk.sandbox import _linux as k

    # Whatever happens to the runtime (kill -9 included), this process dies with it, and
    # with it the namespace's init and so the whole tree.
    k.set_parent_death_signal(signal.SIGKILL)
    if cfg.get("parent") and os.getppid() != cfg["parent"]:
        os._exit(70)  # the runtime died before the death signal was armed
    uid, gid = os.getuid(), os.getgid()
    flags = k.CLONE_NEWNS | k.CLONE_NEWPID | k.CLONE_NEWIPC
    if not network:
        flags |= k.CLONE_NEWNET
    userns = False
    if "namespaces" not in missing:
        try:
            k.unshare(flags | k.CLONE_NEWUSER)
            k.write_id_maps(uid, gid)
            userns = True
        except OSError:
            try:  # root without user namespaces: namespaces alone, capabilities dropped below
                if os.geteuid() != 0:
                    raise
                k.unshare(flags)
            except OSError:
                flags = 0
    else:
        flags = 0
    if flags & k.CLONE_NEWNS and cfg.get("tmp") and cfg.get("tmp_mb"):
        try:
            k.mount_tmpfs(cfg["tmp"], int(cfg["tmp_mb"]))
            report["tmp"] = f"private tmpfs {int(cfg['tmp_mb'])} MiB"
        except OSError:
            pass
    helper = cfg.get("helper")
    if flags & k.CLONE_NEWPID:
        parent = os.getpid()
        pid = os.fork()
        if pid:
            _launcher(pid, helper if userns and flags & k.CLONE_NEWNS else None)
        k.set_parent_death_signal(signal.SIGKILL)
        if os.getppid() != 0 and os.getppid() != parent:
            os._exit(70)  # the waiter died before the death signal was armed
        report["process_tree"] = "pid namespace"
        if cfg.get("image") and userns:  # its /proc shows its own namespace only
            with contextlib.suppress(OSError):
                k.mount_proc("/proc")
    if helper is not None:
        with contextlib.suppress(OSError):
            os.close(helper)  # the helper's, never the image's
    _cap_processes(cfg, report, missing, userns=userns, uid=uid)
    k.no_new_privs()
    unix_blocked = False
    if "seccomp" not in missing:
        try:
            k.install_filter()
            unix_blocked = True
            report["metadata"] = "refused (seccomp: mode, owner, times, xattrs, inode flags)"
        except OSError:
            pass
    if not network and flags & k.CLONE_NEWNET and unix_blocked:
        report["network"] = "none (network namespace, no unix sockets)"
    elif network and unix_blocked:
        report["network"] = "granted (host network; no unix sockets)"
    abi = 0 if "landlock" in missing else k.landlock_abi()
    if abi:
        rules = k.Landlock(abi, network=network)
        for path in _read_lists(cfg["app_dir"], network)[0]:
            rules.allow(path, k.FS_READ_FILE | k.FS_READ_DIR | k.FS_EXECUTE)
        rules.allow("/dev/null", k.FS_READ_FILE | k.FS_WRITE_FILE | k.FS_TRUNCATE)
        if cfg.get("image"):  # its own procfs (the forks' `/proc/self` lies below it)
            rules.allow("/proc", k.FS_READ_FILE | k.FS_READ_DIR)
        if cfg.get("tmp"):
            rules.allow(cfg["tmp"], rules.handled_fs)
        rules.restrict()
        report["files"] = f"landlock abi {abi}"
    try:
        k.drop_capabilities()
        report["privileges"] = "no capabilities (user namespace)" if userns else "no capabilities"
    except OSError:
        if os.geteuid() != 0 and not userns:
            report["privileges"] = "unprivileged user"


def refusal(report: dict[str, Any], cfg: dict[str, Any]) -> str | None:
    """Under `required`: why author code must not run here (None when it may)."""
    if cfg["mode"] != "required":
        return None
    absent = [k for k in REQUIRED if report.get(k) is None]
    if not absent:
        return None
    return "the sandbox cannot contain MiniApp code on this platform: no " + ", ".join(
        a.replace("_", " ") + " containment" for a in absent
    )


def main(argv: list[str]) -> None:
    """Enter the sandbox, then run TARGET's `main(args, sandbox)`."""
    cfg = json.loads(argv[0])
    target = argv[1]
    report = enter(cfg)
    report["refused"] = refusal(report, cfg)
    if report["refused"] is None:
        sys.path.append(cfg["app_dir"])  # after the standard library and site-packages
    module = importlib.import_module(target)
    module.main(argv[2:], report)


if __name__ == "__main__":
    main(sys.argv[1:])
