"""The warm image of an app version (decision record 0007): one process per app version
that enters the app-level sandbox, imports the entry once, and forks a worker per App
session.

Started by the sandbox launcher (`lineup_sdk.sandbox.launch ... lineup_sdk._image ENTRY
READ_FD WRITE_FD APP_DIR TMP NETWORK`) as the init of its PID namespace, with the launcher
outside it as the runtime's session helper. On its control pipes, JSON lines: it reports
the sandbox, imports the entry, says hello, runs the image checks and says whether it may
serve (`{"t": "image", "ok": ...}`); then each `{"t": "fork"}` forks one session worker
(`become_worker`) and is answered `{"t": "forked", "pid": N}`, N the worker's pid in the
image's namespace. The checks read the process's own `/proc/self`; the parsers take the
text, so tests can give them fixed input.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import logging
import os
import random
import select
import signal
import sys
from collections.abc import Iterable
from typing import Any

from lineup_sdk.sandbox.forks import (
    BRIDGE,
    BRIDGE_R,
    INBOX,
    INBOX_W,
    LOG_R,
    NAMESPACES,
    NS_MNT,
    NS_USER,
    SESSION_TMP,
    risky_shared_mappings,
    stray_descriptors,
    threads_in,
)

__all__ = ["image_checks", "main"]

#: Where the worker keeps the image's fork pipe until it is ready (then closed).
_READY_FD = 255


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


# -- the image ------------------------------------------------------------------------------
def _send(fd: int, msg: dict[str, Any]) -> None:
    data = json.dumps(msg, separators=(",", ":")).encode() + b"\n"
    while data:
        data = data[os.write(fd, data) :]


def _unfit(report: dict[str, Any]) -> str | None:
    """Why this platform gives no warm image (a missing mechanism), else None."""
    if report.get("mode") == "off":
        return "the sandbox is off"
    if not sys.platform.startswith("linux"):
        return "not Linux"
    if "user namespace" not in str(report.get("privileges") or ""):
        return "no user namespaces"
    if not report.get("process_tree"):
        return "no PID namespace"
    if not str(report.get("files") or "").startswith("landlock"):
        return "no Landlock"
    if not hasattr(os, "pidfd_open"):
        return "no pidfd"
    try:
        if os.readlink("/proc/self") != "1":
            return "no procfs of its own"
    except OSError:
        return "no procfs of its own"
    return None


def main(argv: list[str], report: dict[str, Any]) -> None:
    """Image entry point, called by the sandbox launcher."""
    from lineup_sdk._worker import hello, load

    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(message)s")
    entry, rfd, wfd = argv[0], int(argv[1]), int(argv[2])
    app_dir, tmp, network = argv[3], argv[4], argv[5] == "1"
    _send(wfd, {"t": "sandbox", "report": report})  # before any author code runs
    if report.get("refused"):
        _send(wfd, {"t": "fatal", "code": "sandbox_unavailable", "message": report["refused"]})
        os._exit(5)
    session_tmp = os.path.join(tmp, SESSION_TMP)
    os.makedirs(session_tmp, mode=0o700, exist_ok=True)
    reason = _unfit(report)
    read: list[str] = []
    if reason is None:
        from lineup_sdk.sandbox.launch import _read_lists

        read = _read_lists(app_dir, network)[0]
    try:
        dispatcher = load(entry)
    except BaseException as exc:  # report any import failure, then stop
        logging.getLogger("lineup.worker").exception("cannot import %s", entry)
        _send(wfd, {"t": "fatal", "message": f"{type(exc).__name__}: {exc}"})
        os._exit(3)
    _send(wfd, hello(dispatcher))
    if reason is None:
        dispatcher.prepare()  # the forks share the handlers' models and validators
        reason = image_checks(keep=(rfd, wfd), writable_roots=(tmp,))
    if reason is not None:
        _send(wfd, {"t": "image", "ok": False, "reason": reason})
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    abi = int(str(report["files"]).rsplit(" ", 1)[-1])
    # the generators the import made: each fork seeds them again (the stdlib does it for
    # `random`'s own only), or every session would draw the same numbers
    generators = [o for o in gc.get_objects() if isinstance(o, random.Random)]
    gc.freeze()  # the pages of long-lived objects stay shared with the forks
    gc.disable()
    _send(wfd, {"t": "image", "ok": True})
    _fork_loop(
        rfd,
        wfd,
        lambda ready: become_worker(dispatcher, ready, abi, read, session_tmp, network, generators),
    )


def _fork_loop(rfd: int, wfd: int, child: Any) -> None:
    """Fork a worker per request until the runtime closes the pipe; reap as init does."""
    buf = b""
    while True:
        ready, _, _ = select.select([rfd], [], [], 1.0)
        _reap()
        if not ready:
            continue
        chunk = os.read(rfd, 1 << 16)
        if not chunk:
            os._exit(0)
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            if json.loads(line).get("t") == "fork":
                _send(wfd, _fork(child))


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _fork(child: Any) -> dict[str, Any]:
    """One worker: the middle process writes its pid, the worker `r` once its pipes and
    Landlock layer are in place; both close the pipe."""
    pid_r, pid_w = os.pipe()
    middle = os.fork()
    if middle == 0:
        try:
            os.close(pid_r)
            child(pid_w)
        except BaseException:
            logging.getLogger("lineup.worker").exception("a fork could not become a worker")
        finally:
            os._exit(70)
    os.close(pid_w)
    got = b""
    while len(got) < 64:
        chunk = os.read(pid_r, 64)
        if not chunk:
            break
        got += chunk
    os.close(pid_r)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(middle, 0)
    # the middle's `p<pid>` and the worker's `r`, in either order
    lines = sorted(got.split(b"\n"))
    if len(lines) != 3 or lines[0] or lines[2] != b"r" or not lines[1][1:].isdigit():
        return {"t": "forked", "error": "the worker could not enter its namespaces"}
    return {"t": "forked", "pid": int(lines[1][1:])}


def become_worker(
    dispatcher: Any,
    ready: int,
    abi: int,
    read: list[str],
    tmp: str,
    network: bool,
    generators: list[random.Random],
) -> None:
    """In the fork, before any delivery (decision record 0007, section 3): out of the
    image's reach (non-dumpable), its own namespaces (the worker is the init of its PID
    namespace; the middle process exits), its own pipes at fixed descriptors and nothing
    else inherited; then it waits for the runtime's `go` (which comes once the helper has
    mapped its ids and mounted its tmpfs at `tmp`, and the runtime has moved it into its
    control groups), closes the runtime's ends, narrows Landlock with a second layer (its
    own tmpfs, `/proc/self`), stacks a second seccomp filter, reseeds the generators, and
    serves."""
    from lineup_sdk._worker import serve
    from lineup_sdk.sandbox import _linux as k

    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    k.set_dumpable(False)
    flags = k.CLONE_NEWUSER | k.CLONE_NEWNS | k.CLONE_NEWIPC | k.CLONE_NEWPID
    k.unshare(flags if network else flags | k.CLONE_NEWNET)
    pid = os.fork()
    if pid:
        os.write(ready, f"p{pid}\n".encode())
        os._exit(0)
    os.dup2(ready, _READY_FD)
    os.closerange(3, _READY_FD)
    os.closerange(_READY_FD + 1, 1 << 16)
    null = os.open("/dev/null", os.O_RDWR)
    os.dup2(null, 0)
    os.close(null)
    os.pipe()  # INBOX, INBOX_W
    os.pipe()  # BRIDGE_R, BRIDGE
    log_r, log_w = os.pipe()
    assert log_r == LOG_R
    os.dup2(log_w, 1)
    os.dup2(log_w, 2)
    os.close(log_w)
    for name, fd in NAMESPACES:
        got = os.open(f"/proc/self/ns/{name}", os.O_RDONLY)
        assert got == fd
    os.write(_READY_FD, b"r\n")
    os.close(_READY_FD)
    line = b""
    while not line.endswith(b"\n"):
        chunk = os.read(INBOX, 1)
        if not chunk:
            os._exit(0)  # the runtime did not take it
        line += chunk
    if json.loads(line).get("t") != "prepared":
        os._exit(4)
    for fd in (INBOX_W, BRIDGE_R, LOG_R, NS_USER, NS_MNT):
        os.close(fd)
    k.drop_capabilities()  # the ones its own user namespace gave it
    # after the mount: a rule is on the inode its path names when it is made (the tmpfs
    # root now); `/proc/self` is this worker's entry in the image's procfs, and no other
    # process's entry is reachable from here on
    rules = k.Landlock(abi, network=network)
    for path in read:
        if path != "/proc/self":
            rules.allow(path, k.FS_READ_FILE | k.FS_READ_DIR | k.FS_EXECUTE)
    rules.allow("/proc/self", k.FS_READ_FILE | k.FS_READ_DIR)
    rules.allow("/dev/null", k.FS_READ_FILE | k.FS_WRITE_FILE | k.FS_TRUNCATE)
    rules.allow(tmp, rules.handled_fs)
    rules.restrict()
    k.install_session_filter()
    random.seed()
    for generator in generators:
        random.Random.seed(generator)
    if "tempfile" in sys.modules:  # a folder the import asked for is the image's
        sys.modules["tempfile"].tempdir = None  # type: ignore[attr-defined]
    # its command line says what a cold worker's does: the worker target, its pipes
    sys.argv[2:] = ["lineup_sdk._worker", sys.argv[3], str(INBOX), str(BRIDGE)]
    gc.enable()
    code = asyncio.run(serve(dispatcher, INBOX, BRIDGE, None, gated=True))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
