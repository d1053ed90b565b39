"""Worker subprocesses: one per installed app version, sandboxed, spoken to over a private
pipe, watched by a heartbeat, logging through a capped pipe the runtime owns.

Flow on the bridge is bounded both ways (SPEC 13.3): at most `max_requests` session-data
requests of a worker are outstanding (past it the runtime stops reading that worker, whose
heartbeat then goes unanswered), a reply waits while the worker's inbox holds more than
`INBOX_HIGH` unread bytes, and a worker whose inbox holds more than `INBOX_MAX` has stopped
reading it (`worker_lost`).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import itertools
import json
import os
import select
import struct
import subprocess
import termios
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lineup_runtime_lite.processes.logs import LogPipe
from lineup_runtime_lite.processes.proctree import tree_cpu_s
from lineup_sdk.bridge import MAX_MESSAGE, ProtocolError, connect_lines, parse_line
from lineup_sdk.sandbox import DEFAULT_PROCESSES, Sandbox, SharedMemory, stop_tree

if TYPE_CHECKING:
    from lineup_runtime_lite.processes.image import Image

__all__ = ["Worker", "WorkerError", "WorkerOptions"]

HANDSHAKE_TIMEOUT_S = 30.0
#: Unread bytes in a worker's inbox past which session-data replies wait for it to read.
INBOX_HIGH = 1 << 20
#: Unread bytes in a worker's inbox past which it has stopped reading it (`worker_lost`):
#: room for many deliveries of the largest line a worker accepts.
INBOX_MAX = 16 * MAX_MESSAGE
#: Grace after a draining worker's last deadline before it is stopped anyway.
DRAIN_GRACE_S = 1.0

SessionRequest = Callable[["Worker", dict[str, Any]], Awaitable[dict[str, Any]]]


@dataclass(frozen=True)
class WorkerOptions:
    """How workers run: sandbox mode and limits, heartbeat, CPU budget, bridge flow, log cap."""

    sandbox: str = "best_effort"
    memory_mb: int = 1024
    processes: int = DEFAULT_PROCESSES
    heartbeat_s: float = 5.0
    #: CPU-seconds of the whole worker tree between recycles (`cpu_limit` past it).
    cpu_s: float = 600.0
    #: Session-data requests of one worker outstanding at once; past it the runtime stops
    #: reading that worker until some are answered.
    max_requests: int = 64
    log_max_bytes: int = 10 * 1024 * 1024
    env: tuple[tuple[str, str], ...] = ()  # `Runtime.open(worker_env=...)`, checked there
    #: `app`: one worker per app version; `session`: one per App session (SPEC 13.3).
    isolation: str = "app"
    #: Under `session`: a session worker idle this long (real time) is recycled.
    session_idle_s: float = 300.0


class WorkerError(Exception):
    """The worker failed: `kind` is `crashed`, `protocol`, `start`, `hung`, `sandbox` or
    `recycled`; `reason`, where known, is the `details.reason` its deliveries end with
    (`memory_limit`, `cpu_limit`, `worker_lost`)."""

    def __init__(self, kind: str, message: str, *, reason: str | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.reason = reason


class _BridgeReader(asyncio.Protocol):
    """The worker → runtime pipe: lines handed to the worker as they arrive; a line over
    `MAX_MESSAGE` fails the worker (`protocol`), the end of the pipe ends it (`crashed`).
    While the worker has too many requests outstanding, lines already read wait here (at
    most one read's worth) and the pipe is not read."""

    def __init__(self, worker: Worker) -> None:
        self._worker = worker
        self._buffer = bytearray()

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        self.drain()

    def drain(self) -> None:
        """Hand over the whole lines read so far, until the worker pauses its reading."""
        worker, buf = self._worker, self._buffer
        start = 0
        while not worker.dead and not worker.reading_paused:
            end = buf.find(b"\n", start)
            if end < 0:
                break
            worker._line(bytes(buf[start : end + 1]))
            start = end + 1
        del buf[:start]
        if len(buf) > MAX_MESSAGE and not worker.dead and not worker.reading_paused:
            worker._die(WorkerError("protocol", "the worker sent an oversized message"))

    def eof_received(self) -> bool | None:
        self.drain()
        if self._buffer and not self._worker.dead and not self._worker.reading_paused:
            self._worker._line(bytes(self._buffer))  # a last line without its newline
        self._buffer.clear()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self._worker._die(self._worker.exit_error())


class _InboxWriter(asyncio.Protocol):
    """The runtime → worker pipe's flow: session-data replies wait while it is over
    `INBOX_HIGH`; its end while the worker runs is a worker that closed its inbox."""

    def __init__(self, worker: Worker) -> None:
        self._worker = worker

    def pause_writing(self) -> None:
        self._worker._writable.clear()

    def resume_writing(self) -> None:
        self._worker._writable.set()

    def connection_lost(self, exc: Exception | None) -> None:
        self._worker._writable.set()
        self._worker._inbox_closed()


class Worker:
    """One sandboxed worker process and its bridge."""

    def __init__(
        self,
        scope: str,
        version: str,
        app_dir: Path,
        entry: str,
        log_path: Path,
        on_session_request: SessionRequest,
        *,
        options: WorkerOptions | None = None,
        network: bool = False,
        shared_memory: SharedMemory | None = None,
        image: Image | None = None,
    ) -> None:
        self.scope, self.version = scope, version
        #: Under `isolation="session"`, the app version's warm image this worker is forked
        #: from (decision record 0007); None for a cold start.
        self.image = image
        self._pid: int | None = None
        self._pidfd: int | None = None
        self.app_dir, self.entry, self.log_path = app_dir, entry, log_path
        self.options = options or WorkerOptions()
        self._box = Sandbox(
            self.options.sandbox,
            app_dir,
            network=network,
            memory_mb=self.options.memory_mb,
            processes=self.options.processes,
            shared=shared_memory,
        )
        self._on_sd = on_session_request
        self._proc: subprocess.Popen[bytes] | None = None
        self._transport: asyncio.WriteTransport | None = None
        self._transports: list[asyncio.BaseTransport] = []
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._ids = itertools.count(1)
        self._hello: asyncio.Future[dict[str, Any]] | None = None
        self._beat: asyncio.TimerHandle | None = None
        self._ping_out: int | None = None
        self.threads = 1
        self.methods: list[str] | None = None
        #: The UI Actions the worker serves (its hello's `actions`, SPEC 17).
        self.actions: list[str] = []
        self.sandbox: dict[str, Any] | None = None
        self.dead = False
        self.death: WorkerError | None = None
        self._sd_tasks: set[asyncio.Task[None]] = set()
        self._stopping: asyncio.Task[None] | None = None
        #: When each delivery in flight times out (loop time), for the drain's bound.
        self._due: dict[int, float] = {}
        #: Set while the worker's inbox is under `INBOX_HIGH` (replies may be written).
        self._writable = asyncio.Event()
        self._writable.set()
        self._reader: _BridgeReader | None = None
        self._read_t: asyncio.ReadTransport | None = None
        self._bridge_fd: int | None = None
        self._inbox_fd: int | None = None
        self.reading_paused = False
        #: Taking no new deliveries: it is stopped once those in flight have ended.
        self.draining = False
        self._drain_timer: asyncio.TimerHandle | None = None

    @property
    def busy(self) -> bool:
        """Whether a delivery is in flight on it."""
        return any(not fut.done() for fut in self._pending.values())

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else self._pid

    async def _adopt(self) -> tuple[int, int, int]:
        """A worker forked from the image: its pipes' other ends and the report the
        runtime made for it.

        Raises:
            WorkerError: the fork failed (the pool starts this session cold).
        """
        from lineup_runtime_lite.processes.image import ImageError

        assert self.image is not None
        try:
            forked = await self.image.take()
        except ImageError as exc:
            raise WorkerError("start", str(exc)) from None
        self._box = forked.box  # its control groups, made with the fork
        self._pid, self._pidfd = forked.pid, forked.pidfd
        self.sandbox = forked.report
        return forked.inbox_w, forked.bridge_r, forked.log_r

    def _spawn(self) -> tuple[int, int, int]:
        p2c_r, p2c_w = os.pipe()
        c2p_r, c2p_w = os.pipe()
        log_r, log_w = os.pipe()
        self._box.prepare()
        try:
            self._proc = subprocess.Popen(
                self._box.argv("lineup_sdk._worker", [self.entry, str(p2c_r), str(c2p_w)]),
                pass_fds=(p2c_r, c2p_w),
                stdin=subprocess.DEVNULL,
                stdout=log_w,
                stderr=subprocess.STDOUT,
                cwd=str(self.app_dir),
                env=self._box.env(dict(self.options.env)),
                start_new_session=True,
            )
        except OSError:
            for fd in (p2c_r, p2c_w, c2p_r, c2p_w, log_r):
                os.close(fd)
            self._box.cleanup()
            raise
        finally:
            os.close(log_w)
        os.close(p2c_r)
        os.close(c2p_w)
        return p2c_w, c2p_r, log_r

    async def start(self) -> list[str]:
        """Spawn the process and wait for its method list.

        Raises:
            WorkerError: the worker could not start, reported a fatal import error, or
                could not be sandboxed as the mode requires (`sandbox`).
        """
        loop = asyncio.get_running_loop()
        if self.image is not None:
            p2c_w, c2p_r, log_r = await self._adopt()
        else:
            try:
                p2c_w, c2p_r, log_r = self._spawn()
            except OSError as exc:
                raise WorkerError("start", f"cannot start the worker: {exc}") from None
        log_t, _ = await loop.connect_read_pipe(
            lambda: LogPipe(self.log_path, self.options.log_max_bytes),
            os.fdopen(log_r, "rb", buffering=0),
        )
        read_t, reader = await connect_lines(loop, lambda: _BridgeReader(self), c2p_r)
        self._reader, self._read_t, self._bridge_fd = reader, read_t, c2p_r
        self._transport, _ = await loop.connect_write_pipe(
            lambda: _InboxWriter(self), os.fdopen(p2c_w, "wb", buffering=0)
        )
        self._inbox_fd = p2c_w
        self._transport.set_write_buffer_limits(high=INBOX_HIGH)
        self._transports = [read_t, log_t]
        self._hello = loop.create_future()
        if self.image is not None:
            self._transport.write(b'{"t":"go"}\n')
        try:
            hello = await asyncio.wait_for(asyncio.shield(self._hello), HANDSHAKE_TIMEOUT_S)
        except TimeoutError:
            await self.kill()
            raise WorkerError("start", "the worker did not report its methods in time") from None
        except WorkerError:
            await self.kill()
            raise
        methods = hello["methods"]
        if not all(isinstance(m, str) for m in methods):
            await self.kill()
            raise WorkerError("protocol", "the worker's hello has no method list")
        actions = hello.get("actions", [])
        if not isinstance(actions, list) or not all(isinstance(a, str) for a in actions):
            await self.kill()
            raise WorkerError("protocol", "the worker's hello has no action list")
        threads = hello.get("threads")
        self.threads = threads if type(threads) is int and threads > 0 else 1
        self.actions = sorted(actions)
        self.methods = sorted(methods)
        return self.methods

    def exit_error(self) -> WorkerError:
        """Why the worker's bridge ended: the memory cap's OOM kill, or an exit."""
        if self._box.oom_kills():
            return WorkerError(
                "crashed",
                f"the worker was killed at its memory cap ({self.options.memory_mb} MiB "
                "over its process tree)",
                reason="memory_limit",
            )
        return WorkerError("crashed", "the worker exited")

    def _die(self, err: WorkerError, *, culprit: int | None = None) -> None:
        """Fail the worker: the delivery `culprit` answered gets `err`, every other
        in-flight delivery an interruption (at most once holds), and the tree is stopped."""
        if self.dead:
            return
        self.dead, self.death = True, err
        if self._beat is not None:
            self._beat.cancel()
        if self._drain_timer is not None:
            self._drain_timer.cancel()
        self._writable.set()  # replies waiting for the inbox see the worker is gone
        if self._hello is not None and not self._hello.done():
            self._hello.set_exception(err)
            self._hello.exception()  # retrieved: a start that was cancelled never reads it
        interrupted = WorkerError("crashed", f"the worker failed: {err}", reason=err.reason)
        for rid, fut in self._pending.items():
            if not fut.done():
                fut.set_exception(err if rid == culprit or err.kind != "protocol" else interrupted)
        self._pending.clear()
        self._due.clear()
        if self._stopping is None:
            self._stopping = asyncio.get_running_loop().create_task(self._stop())

    def _line(self, line: bytes) -> None:
        """One line from the worker, handled as it arrives (no reader task between)."""
        if self.dead:
            return
        try:
            self._handle(parse_line(line))
        except ProtocolError as exc:
            self._die(WorkerError("protocol", str(exc)), culprit=exc.delivery)

    def _handle(self, msg: dict[str, Any]) -> None:
        kind = msg["t"]
        if kind == "sandbox":
            if self.sandbox is not None or self._hello is None or self._hello.done():
                raise ProtocolError("the worker reported its sandbox twice, or too late")
            self.sandbox = msg["report"]
        elif kind == "hello":
            if self._hello is None or self._hello.done():
                raise ProtocolError("the worker said hello twice")
            self._hello.set_result(msg)
        elif kind == "fatal":
            code = msg.get("code")
            err_kind = "sandbox" if code == "sandbox_unavailable" else "start"
            self._die(WorkerError(err_kind, msg["message"][:2000]))
        elif kind == "result":
            fut = self._pending.pop(msg["id"], None)
            if fut is None:
                raise ProtocolError("the worker answered a call it was not given")
            self._due.pop(msg["id"], None)
            if not fut.done():
                fut.set_result(msg)
            self._drained()
        elif kind == "sd":
            task = asyncio.create_task(self._session_request(msg))
            self._sd_tasks.add(task)
            task.add_done_callback(self._sd_done)
            if len(self._sd_tasks) >= self.options.max_requests:
                self._pause_reading()
        elif kind == "pong":
            if msg["id"] != self._ping_out:
                raise ProtocolError("the worker answered a heartbeat it was not sent")
            self._ping_out = None
            if self.threads and msg["stuck"] >= self.threads:
                self._die(WorkerError("hung", "every handler thread is stuck past its timeout"))

    async def _session_request(self, msg: dict[str, Any]) -> None:
        # the reply is made only once the inbox has room: a worker that does not read its
        # answers gets no more of them queued (each may hold 1 MiB of session data)
        while not self._writable.is_set():
            await self._writable.wait()
        if self.dead:
            return
        reply = await self._on_sd(self, msg)
        with contextlib.suppress(WorkerError):
            self._send({"t": "sd_reply", "id": msg["id"], **reply})

    def _sd_done(self, task: asyncio.Task[None]) -> None:
        self._sd_tasks.discard(task)
        if self.reading_paused and len(self._sd_tasks) < self.options.max_requests:
            self.reading_paused = False
            if not self.dead and self._read_t is not None and self._reader is not None:
                self._read_t.resume_reading()
                self._reader.drain()

    def _pause_reading(self) -> None:
        """Too many requests outstanding: read nothing more of this worker (its pong
        included, so a worker that never reads its answers misses its heartbeat)."""
        if not self.reading_paused and self._read_t is not None:
            self.reading_paused = True
            self._read_t.pause_reading()

    def _send(self, msg: dict[str, Any]) -> None:
        self._write(json.dumps(msg, separators=(",", ":"), ensure_ascii=False))

    def _write(self, line: str) -> None:
        if self.dead or self._transport is None:
            raise self._gone()
        if self._transport.is_closing():
            self._die(WorkerError("crashed", "the worker closed its inbox", reason="worker_lost"))
            raise self._gone()
        if self._transport.get_write_buffer_size() > INBOX_MAX:
            self._die(
                WorkerError("crashed", "the worker stopped reading its inbox", reason="worker_lost")
            )
            raise self._gone()
        self._transport.write(line.encode("utf-8") + b"\n")

    def _gone(self) -> WorkerError:
        reason = self.death.reason if self.death is not None else None
        return WorkerError("crashed", "the worker is not running", reason=reason)

    def _unread(self) -> int:
        """Bytes written to the worker's inbox that it has not read yet."""
        queued = self._transport.get_write_buffer_size() if self._transport else 0
        if self._inbox_fd is None:
            return queued
        try:
            raw = fcntl.ioctl(self._inbox_fd, termios.FIONREAD, b"\0\0\0\0")
        except OSError:
            return queued
        return queued + int(struct.unpack("i", raw)[0])

    def _inbox_closed(self) -> None:
        """The inbox pipe ended. A worker that exited ends its bridge too (the reader says
        `crashed`); one still running closed its inbox: it is lost (decided a moment
        later, once an exit has had time to reach the bridge)."""
        if not self.dead:
            asyncio.get_running_loop().call_later(0.05, self._inbox_verdict)

    def _inbox_verdict(self) -> None:
        if self.dead:
            return
        exited = False
        if self._bridge_fd is not None:
            poller = select.poll()
            poller.register(self._bridge_fd, select.POLLIN)
            with contextlib.suppress(OSError):
                exited = any(ev & select.POLLHUP for _, ev in poller.poll(0))
        if exited:  # the bridge's far end is gone too: the process ended
            if self.reading_paused:  # nobody reads to the end of the pipe: say it here
                self._die(self.exit_error())
            return
        self._die(WorkerError("crashed", "the worker closed its inbox", reason="worker_lost"))

    # -- heartbeat -----------------------------------------------------------------------
    def _arm_heartbeat(self) -> None:
        if self._beat is None and not self.dead:
            loop = asyncio.get_running_loop()
            self._beat = loop.call_later(self.options.heartbeat_s, self._heartbeat)

    def _heartbeat(self) -> None:
        self._beat = None
        if self.dead:
            return
        if self._over_cpu():
            return
        if not self._pending:
            self._arm_heartbeat()  # idle: the CPU budget is still watched, nothing pinged
            return
        if self._ping_out is not None:
            if self._unread():  # the ping is still in its inbox: it stopped reading it
                self._die(
                    WorkerError(
                        "hung",
                        f"the worker did not read its inbox within {self.options.heartbeat_s:g} s",
                        reason="worker_lost",
                    )
                )
                return
            self._die(
                WorkerError(
                    "hung",
                    f"the worker's loop did not answer a heartbeat within "
                    f"{self.options.heartbeat_s:g} s",
                )
            )
            return
        self._ping_out = next(self._ids)
        try:
            self._send({"t": "ping", "id": self._ping_out})
        except WorkerError:
            return
        self._arm_heartbeat()

    def _over_cpu(self) -> bool:
        """Past its CPU budget the worker is recycled at once; what it was running ends
        `delivery_interrupted`, reason `cpu_limit` (draining would let it burn on)."""
        # a table another worker's heartbeat read within a tenth of the period will do:
        # the budget is then seen at most 1.1 heartbeats late instead of 1
        age = self.options.heartbeat_s / 10
        used = tree_cpu_s(self.pid, max_age_s=age) if self.pid is not None else None
        if used is None or used <= self.options.cpu_s:
            return False
        self._die(
            WorkerError(
                "recycled",
                f"the worker used {used:.1f} CPU-seconds, over its budget of "
                f"{self.options.cpu_s:g}",
                reason="cpu_limit",
            )
        )
        return True

    # -- draining ------------------------------------------------------------------------
    def drain(self) -> None:
        """Take no new deliveries (the pool starts a replacement) and stop once the ones in
        flight have ended — at the latest when the last of them times out."""
        if self.dead or self.draining:
            return
        self.draining = True
        self._drained()

    def _drained(self) -> None:
        """A draining worker with nothing left in flight is recycled; otherwise its stop is
        due at the latest remaining deadline (re-read then: a delivery sent while it was
        being replaced may end later)."""
        if not self.draining or self.dead:
            return
        live = [self._due.get(rid, 0.0) for rid, fut in self._pending.items() if not fut.done()]
        if not live:
            self._die(WorkerError("recycled", "the worker was recycled after a timeout"))
            return
        if self._drain_timer is not None:
            self._drain_timer.cancel()
        loop = asyncio.get_running_loop()
        self._drain_timer = loop.call_at(max(live) + DRAIN_GRACE_S, self._drain_due)

    def _drain_due(self) -> None:
        self._drain_timer = None
        if self.dead:
            return
        live = [self._due.get(rid, 0.0) for rid, fut in self._pending.items() if not fut.done()]
        if live and max(live) + DRAIN_GRACE_S > asyncio.get_running_loop().time():
            self._drained()
            return
        self._die(WorkerError("recycled", "the draining worker outlived its deliveries"))

    # -- deliveries ----------------------------------------------------------------------
    def send_delivery(
        self, method: str, params_json: str, ctx: dict[str, Any], *, kind: str = "tool"
    ) -> tuple[int, asyncio.Future[dict[str, Any]]]:
        """Send one call (or, `kind="action"`, one UI Action) whose params are already
        JSON text (spliced in, not re-encoded); the future resolves with the worker's
        `result` message.

        Raises:
            WorkerError: the worker is not running.
        """
        rid = next(self._ids)
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[dict[str, Any]] = loop.create_future()
        self._pending[rid] = fut
        self._due[rid] = loop.time() + float(ctx.get("timeout_s", 0))
        delivery: dict[str, Any] = {"t": "deliver", "id": rid, "method": method, "ctx": ctx}
        if kind != "tool":
            delivery["kind"] = kind
        head = json.dumps(
            delivery,
            separators=(",", ":"),
            ensure_ascii=False,
        )
        try:
            self._write(f'{head[:-1]},"params":{params_json}}}')
        except WorkerError:
            self._pending.pop(rid, None)
            self._due.pop(rid, None)
            if fut.done() and not fut.cancelled():
                fut.exception()  # failed by the `_die` of this very write: raised instead
            raise
        self._arm_heartbeat()
        return rid, fut

    def forget(self, rid: int) -> None:
        """Stop waiting for a delivery (timed out or ended); a late answer is then ignored."""
        if rid in self._pending:
            done: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
            done.cancel()
            self._pending[rid] = done
        self._due.pop(rid, None)
        self._drained()

    def timed_out(self, rid: int) -> None:
        """A delivery outlived its timeout: its handler may still be running (a CPU-bound
        sync handler cannot be stopped inside the process), so the worker drains to a
        replacement and is recycled once its other deliveries have ended."""
        self.forget(rid)
        self.drain()

    def end_delivery(self, rid: int, message: str) -> None:
        """End one in-flight delivery now with `worker_protocol_error`; the worker lives on."""
        fut = self._pending.get(rid)
        if fut is not None and not fut.done():
            fut.set_exception(WorkerError("protocol", message))
        self.forget(rid)

    def in_flight(self, rid: int) -> bool:
        fut = self._pending.get(rid)
        return fut is not None and not fut.done()

    # -- stopping ------------------------------------------------------------------------
    async def _stop(self) -> None:
        if self._transport is not None:
            self._transport.close()
        proc = self._proc
        if proc is not None:
            await asyncio.get_running_loop().run_in_executor(None, stop_tree, proc)
        if self._pidfd is not None:
            from lineup_runtime_lite.processes.image import stop_forked

            pidfd, self._pidfd = self._pidfd, None
            await asyncio.get_running_loop().run_in_executor(None, stop_forked, pidfd)
        for t in self._transports:
            t.close()
        self._box.cleanup()

    async def kill(self) -> None:
        """Close the pipe and make sure the whole process tree is gone."""
        self._die(WorkerError("crashed", "the worker was stopped"))
        assert self._stopping is not None
        await asyncio.shield(self._stopping)
