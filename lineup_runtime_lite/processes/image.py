"""The warm image of an app version (decision record 0007), the runtime's side.

Under `isolation="session"` each app version gets one image: a sandboxed process that
imported the entry once and forks a worker per App session (`lineup_sdk._image`). The
runtime starts it, reads its checks' verdict, and for each session asks it for a fork;
then, from outside and with its own authority, it finds the worker's global pid (`NSpid`
among the image's children), takes the worker's ends of its pipes (`pidfd_getfd`), asks
the launcher — the session helper, which never listens to the image — for the worker's id
maps, tmpfs and procfs, moves the worker into the session's control groups, checks that
it holds nothing but its own pipes and no shared mapping, and only then lets it go.
An image that fails its checks, or a platform without a mechanism the path needs, leaves
the version's sessions to cold starts (`state` `cold`, `reason` why).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import os
import signal
import socket
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lineup_runtime_lite.processes.logs import LogPipe
from lineup_sdk.sandbox import Sandbox, SharedMemory, stop_tree
from lineup_sdk.sandbox.forks import (
    BRIDGE_R,
    CAP_SYS_PTRACE,
    INBOX_W,
    LOG_R,
    NAMESPACES,
    SESSION_TMP,
    has_capability,
    risky_shared_mappings,
)

__all__ = ["Forked", "Image", "ImageError", "stop_forked"]

#: How long an image may take to import its entry and run its checks, and a fork to
#: come back ready.
START_TIMEOUT_S = 30.0
FORK_TIMEOUT_S = 10.0
#: Forks an image keeps ready ahead of new sessions (each an idle worker's memory).
SPARES = 2
#: The descriptors a forked worker holds before `go`: its own and the runtime's ends.
_WORKER_FDS = frozenset(range(10))


class ImageError(Exception):
    """A fork that could not be made or checked: the session starts cold instead."""


@dataclass
class Forked:
    """A session worker forked from an image, ready for its `go`."""

    pid: int  # global
    pidfd: int
    inbox_w: int
    bridge_r: int
    log_r: int
    report: dict[str, Any]
    box: Sandbox  # its control groups

    def discard(self) -> None:
        """Close what the runtime holds of a worker never let go (it dies with the image,
        or at the end of its inbox)."""
        for fd in (self.inbox_w, self.bridge_r, self.log_r):
            with contextlib.suppress(OSError):
                os.close(fd)
        stop_forked(self.pidfd)
        self.box.cleanup()


class Image:
    """One app version's image, its session helper, and the forks it makes."""

    def __init__(
        self,
        app_dir: Path,
        entry: str,
        log_path: Path,
        *,
        sandbox: str,
        memory_mb: int | None,
        processes: int | None,
        tmp_mb: int = 64,
        network: bool = False,
        shared_memory: SharedMemory | None = None,
    ) -> None:
        self.app_dir, self.entry, self.log_path = app_dir, entry, log_path
        self._box = Sandbox(
            sandbox,
            app_dir,
            network=network,
            memory_mb=memory_mb,
            processes=processes,
            tmp_mb=tmp_mb,
            shared=shared_memory,
            image=True,
        )
        self.state = "cold"
        self.reason: str | None = "not started"
        self.report: dict[str, Any] | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._ctl: int | None = None
        self._replies: asyncio.StreamReader | None = None
        self._helper: socket.socket | None = None
        self._helper_r: asyncio.StreamReader | None = None
        self._helper_w: asyncio.StreamWriter | None = None
        self._transports: list[asyncio.BaseTransport] = []
        self._lock = asyncio.Lock()
        #: Forks made ahead, each ready for its `go` (the fork, the helper, the
        #: control-group move and the worker's own narrowing are then off a new
        #: session's first call); a new session takes one and they are made up again.
        self._ready: collections.deque[Forked] = collections.deque()
        self._making: asyncio.Task[None] | None = None
        self._userns: int | None = None
        self._image_pid: int | None = None
        self.forked: set[int] = set()

    @property
    def warm(self) -> bool:
        return self.state == "warm"

    @property
    def pid(self) -> int | None:
        """The launcher's (the session helper's) pid; the image is its child."""
        return self._proc.pid if self._proc else None

    @property
    def making(self) -> bool:
        """Whether a spare is being made now (forked, moved, checked): `take` then
        refills in the background."""
        return self._making is not None

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None and self._ctl is not None

    def status(self) -> dict[str, Any]:
        """`rt.sandbox["image"]`: `{"state": "warm" | "cold", "reason": ...}`."""
        return {"state": self.state, "reason": self.reason}

    # -- start ---------------------------------------------------------------------------
    async def start(self) -> bool:
        """Start the image and read its verdict; True if it is warm. Whatever goes wrong
        (an import error included: the cold start that follows reports it) leaves it cold,
        stopped, with the reason."""
        if not has_capability(CAP_SYS_PTRACE):
            return self._cold(NO_PTRACE)
        loop = asyncio.get_running_loop()
        p2c_r, p2c_w = os.pipe()
        c2p_r, c2p_w = os.pipe()
        log_r, log_w = os.pipe()
        ours, theirs = socket.socketpair()
        self._box.helper = theirs.fileno()
        self._box.prepare()
        tmp = str(self._box.tmp)
        # seen from the host too (inside, the image makes it in its own tmpfs)
        os.makedirs(self._session_tmp(), mode=0o700, exist_ok=True)
        try:
            self._proc = subprocess.Popen(
                self._box.argv(
                    "lineup_sdk._image",
                    [
                        self.entry,
                        str(p2c_r),
                        str(c2p_w),
                        str(self.app_dir),
                        tmp,
                        "1" if self._box.network else "0",
                    ],
                ),
                pass_fds=(p2c_r, c2p_w, theirs.fileno()),
                stdin=subprocess.DEVNULL,
                stdout=log_w,
                stderr=subprocess.STDOUT,
                cwd=str(self.app_dir),
                env=self._box.env({"HOME": self._session_tmp(), "TMPDIR": self._session_tmp()}),
                start_new_session=True,
            )
        except OSError as exc:
            for fd in (p2c_w, c2p_r, log_r):
                os.close(fd)
            ours.close()
            self._box.cleanup()
            return self._cold(f"cannot start the image: {exc}")
        finally:
            for fd in (p2c_r, c2p_w, log_w):
                os.close(fd)
            theirs.close()
        self._ctl = p2c_w
        log_t, _ = await loop.connect_read_pipe(
            lambda: LogPipe(self.log_path, 1 << 20), os.fdopen(log_r, "rb", buffering=0)
        )
        self._replies = asyncio.StreamReader(limit=1 << 20)
        read_t, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(self._replies),  # type: ignore[arg-type]
            os.fdopen(c2p_r, "rb", buffering=0),
        )
        self._transports = [log_t, read_t]
        self._helper = ours
        self._helper_r, self._helper_w = await asyncio.open_connection(sock=ours)
        try:
            verdict = await asyncio.wait_for(self._handshake(), START_TIMEOUT_S)
        except (TimeoutError, OSError, ValueError, KeyError, TypeError) as exc:
            verdict = f"the image did not report in time ({exc or type(exc).__name__})"
        if verdict is not None:
            await self.stop()
            return self._cold(verdict)
        try:
            self._image_pid = _children(self.pid)[0]
            self._userns = os.stat(f"/proc/{self._image_pid}/ns/user").st_ino
        except (OSError, IndexError):
            await self.stop()
            return self._cold("the image is not the helper's child")
        self.state, self.reason = "warm", None
        self.refill()
        return True

    def _session_tmp(self) -> str:
        """Each session's tmp path: its own tmpfs there (the image's HOME and TMPDIR)."""
        return os.path.join(str(self._box.tmp), SESSION_TMP)

    def _cold(self, reason: str) -> bool:
        self.state, self.reason = "cold", reason
        return False

    async def _reply(self) -> dict[str, Any]:
        assert self._replies is not None
        line = await self._replies.readline()
        if not line:
            raise OSError(0, "the image exited")
        msg: dict[str, Any] = json.loads(line)
        return msg

    async def _handshake(self) -> str | None:
        """None if the image may serve, else why not."""
        msg = await self._reply()
        if msg.get("t") != "sandbox":
            return "the image did not report its sandbox"
        self.report = msg["report"]
        msg = await self._reply()
        if msg.get("t") == "fatal":
            return f"the image could not start: {str(msg.get('message'))[:200]}"
        if msg.get("t") != "hello":
            return "the image did not say hello"
        msg = await self._reply()
        if msg.get("t") != "image":
            return "the image did not run its checks"
        if not msg.get("ok"):
            return str(msg.get("reason") or "refused")[:300]
        return None

    # -- forks ---------------------------------------------------------------------------
    def _session_box(self) -> Sandbox:
        b = self._box
        return Sandbox(
            b.mode,
            b.app_dir,
            network=b.network,
            memory_mb=b.memory_mb,
            processes=b.processes,
            tmp_mb=b.tmp_mb,
            shared=b.shared,
        )

    async def take(self) -> Forked:
        """A session worker ready for `go`: a spare if one is ready, else the one being
        made (waited for); then the spares are made up again, one at a time.

        Raises:
            ImageError: as `fork` (the image is then cold).
        """
        while True:
            if self._ready:
                forked = self._ready.popleft()
                self.refill()
                return forked
            if not self.warm:
                raise ImageError(self.reason or "stopped")
            self.refill()
            assert self._making is not None
            await asyncio.shield(self._making)

    def refill(self) -> None:
        """Make spares, one at a time, until `SPARES` are ready."""
        if self.warm and self._making is None and len(self._ready) < SPARES:
            self._making = asyncio.get_running_loop().create_task(self._make())
            self._making.add_done_callback(_retrieved)

    async def _make(self) -> None:
        try:
            forked = await self.fork(self._session_box())
        finally:
            self._making = None
        if self.warm:
            self._ready.append(forked)
            self.refill()
        else:
            forked.discard()

    async def fork(self, box: Sandbox) -> Forked:
        """One session worker, its groups `box`'s (prepared here), ready for `go`.

        Raises:
            ImageError: the image or the helper failed, or the fork is not what it must
                be (the image is then stopped: it is no longer trusted to fork).
        """
        async with self._lock:
            try:
                return await asyncio.wait_for(self._fork(box), FORK_TIMEOUT_S)
            except (ImageError, OSError, ValueError, KeyError, TypeError, TimeoutError) as exc:
                box.cleanup()
                if not self.warm:  # stopped meanwhile
                    raise ImageError(self.reason or "stopped") from None
                reason = f"a fork failed: {exc or type(exc).__name__}"
                await self.stop()
                self._cold(reason)
                raise ImageError(reason) from None
            except BaseException:  # cancelled (the image is being stopped)
                box.cleanup()
                raise

    async def _fork(self, box: Sandbox) -> Forked:
        assert self._ctl is not None and self._helper_r is not None
        assert self._helper_w is not None and self.pid is not None
        os.write(self._ctl, b'{"t":"fork"}\n')
        msg = await self._reply()
        if msg.get("t") != "forked" or "pid" not in msg:
            raise ImageError(str(msg.get("error") or "no worker"))
        nspid = int(msg["pid"])
        pid = self._find(nspid)
        pidfd = os.pidfd_open(pid)
        fds: list[int] = []
        try:
            if _nspid(pid) != [pid, nspid, 1]:  # the pid was not reused meanwhile
                raise ImageError("the worker is gone")
            for fd in (INBOX_W, BRIDGE_R, LOG_R):
                from lineup_sdk.sandbox.forks import pidfd_getfd

                fds.append(pidfd_getfd(pidfd, fd))
                if not stat.S_ISFIFO(os.fstat(fds[-1]).st_mode):
                    raise ImageError("the worker's descriptors are not its pipes")
            loop = asyncio.get_running_loop()
            box.prepare(folder=False)
            if box.groups is not None:
                await loop.run_in_executor(None, _move, box, pid)
            req = {
                **{"nspid": nspid, "uid": os.getuid(), "gid": os.getgid()},
                **{"tmp": self._session_tmp(), "tmp_mb": self._box.tmp_mb},
            }
            ns = self._namespaces(pid, pidfd)
            try:
                assert self._helper is not None
                socket.send_fds(self._helper, [json.dumps(req).encode() + b"\n"], ns)
            finally:
                for fd in ns:
                    os.close(fd)
            reply = json.loads(await self._helper_r.readline() or b"{}")
            if not reply.get("ok"):
                raise ImageError(f"the helper: {reply.get('error') or 'no answer'}")
            self._check_worker(pid)
            os.write(fds[0], b'{"t":"prepared"}\n')  # it narrows itself, then waits for go
        except BaseException:
            for fd in (pidfd, *fds):
                os.close(fd)
            raise
        self.forked.add(pid)
        report = {**(self.report or {})}
        report["tmp"] = f"private tmpfs {self._box.tmp_mb} MiB"
        report["process_tree"] = "pid namespace"
        if box.groups is not None:  # else the image's per-process limits, inherited
            report["processes"] = report["memory"] = None
            report.update(box.groups.describe(box.shared))
        return Forked(pid, pidfd, fds[0], fds[1], fds[2], report, box)

    def _namespaces(self, pid: int, pidfd: int) -> list[int]:
        """The worker's user, mount and PID namespaces, from the descriptors it opened
        itself, each checked to be what `/proc/<pid>/ns` says (not the image's)."""
        from lineup_sdk.sandbox.forks import pidfd_getfd

        out: list[int] = []
        try:
            for name, fd in NAMESPACES:
                out.append(pidfd_getfd(pidfd, fd))
                if os.fstat(out[-1]).st_ino != os.stat(f"/proc/{pid}/ns/{name}").st_ino:
                    raise ImageError(f"the worker's {name} namespace is not its own")
        except BaseException:
            for fd in out:
                os.close(fd)
            raise
        return out

    def _find(self, nspid: int) -> int:
        """The global pid of the image's child numbered `nspid` in its namespace."""
        assert self._image_pid is not None
        for child in _children(self._image_pid):
            got = _nspid(child)
            if len(got) == 3 and got[1] == nspid and child not in self.forked:
                return child
        raise ImageError(f"no new child {nspid} of the image")

    def _check_worker(self, pid: int) -> None:
        """What the runtime sees of the worker before `go`, whatever code ran in it: its own
        user namespace, its own pipes and nothing else, no shared mapping to write."""
        if self._userns is not None and os.stat(f"/proc/{pid}/ns/user").st_ino == self._userns:
            raise ImageError("the worker is in the image's user namespace")
        links = {
            int(fd): os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")
        }
        if set(links) != _WORKER_FDS:
            raise ImageError(f"the worker holds descriptors {sorted(set(links) - _WORKER_FDS)}")
        if not (links[3] == links[4] and links[5] == links[6] and links[1] == links[2] == links[7]):
            raise ImageError("the worker's descriptors are not its own pipes")
        for name, fd in NAMESPACES:
            if links[fd] != os.readlink(f"/proc/{pid}/ns/{name}"):
                raise ImageError(f"the worker holds a namespace not its own ({name})")
        with open(f"/proc/{pid}/maps") as fh:
            shared = risky_shared_mappings(fh.read(), (str(self._box.tmp),))
        if shared:
            raise ImageError(f"the worker holds a shared mapping ({shared[0]})")

    # -- stop ----------------------------------------------------------------------------
    async def stop(self) -> None:
        """Stop the image, its helper and every worker forked from it (they live in its
        PID namespace), and remove its folder and groups."""
        if self.warm:
            self._cold("stopped")
        making, self._making = self._making, None
        if making is not None and making is not asyncio.current_task():
            making.cancel()
            with contextlib.suppress(BaseException):
                await making
        while self._ready:
            self._ready.popleft().discard()
        if self._ctl is not None:
            with contextlib.suppress(OSError):
                os.close(self._ctl)
            self._ctl = None
        if self._helper_w is not None:
            self._helper_w.close()
            self._helper_w = None
        proc = self._proc
        if proc is not None:
            await asyncio.get_running_loop().run_in_executor(None, stop_tree, proc)
        for t in self._transports:
            t.close()
        self._transports = []
        self._box.cleanup()


#: Why sessions start cold for a runtime without CAP_SYS_PTRACE (not run as root): a forked
#: worker is non-dumpable, so only a runtime holding it may take its pipes (`pidfd_getfd`).
NO_PTRACE = (
    "a warm image needs CAP_SYS_PTRACE (a runtime run as root) to take a forked worker's"
    " pipes with pidfd_getfd; sessions start cold, each its own contained process"
)


def _retrieved(task: asyncio.Task[None]) -> None:
    if not task.cancelled():
        task.exception()  # a failed spare: the image is cold, the next take says why


def _children(pid: int | None) -> list[int]:
    out: list[int] = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/children") as fh:
            out += [int(p) for p in fh.read().split()]
    return out


def _nspid(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("NSpid:"):
                    return [int(p) for p in line.split()[1:]]
    except (OSError, ValueError):
        pass
    return []


def _move(box: Sandbox, pid: int) -> None:
    """Move the worker into the session's control groups (it cannot: cgroupfs is outside
    its Landlock). What it inherited stays charged to the image's groups."""
    assert box.groups is not None
    for procs, _, _ in box.groups.joins():
        with open(procs, "w") as fh:
            fh.write(str(pid))


def stop_forked(pidfd: int) -> None:
    """End a forked worker and its whole PID namespace (it is its init), and wait for it."""
    import select

    with contextlib.suppress(ProcessLookupError, OSError):
        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    with contextlib.suppress(OSError):
        select.select([pidfd], [], [], 5.0)
    os.close(pidfd)
