"""Worker subprocesses: one per installed app version, sandboxed, spoken to over a private
pipe, watched by a heartbeat, logging through a capped pipe the runtime owns."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import subprocess
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from lineup_sdk.bridge import MAX_MESSAGE, ProtocolError, parse_line
from lineup_sdk.sandbox import DEFAULT_PROCESSES, Sandbox, stop_tree

__all__ = ["Worker", "WorkerError", "WorkerOptions"]

HANDSHAKE_TIMEOUT_S = 30.0

SessionRequest = Callable[["Worker", dict[str, Any]], Awaitable[dict[str, Any]]]


@dataclass(frozen=True)
class WorkerOptions:
    """How workers run: sandbox mode and limits, heartbeat, log cap."""

    sandbox: str = "best_effort"
    memory_mb: int = 1024
    processes: int = DEFAULT_PROCESSES
    heartbeat_s: float = 5.0
    log_max_bytes: int = 10 * 1024 * 1024
    env: tuple[tuple[str, str], ...] = ()  # `Runtime.open(worker_env=...)`, checked there


class WorkerError(Exception):
    """The worker failed: `kind` is `crashed`, `protocol`, `start`, `hung` or `sandbox`;
    `reason`, where known, is the `details.reason` its deliveries end with
    (`memory_limit`)."""

    def __init__(self, kind: str, message: str, *, reason: str | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.reason = reason


class _LogPipe(asyncio.Protocol):
    """The worker's stdout and stderr, appended to its log file up to a byte budget."""

    def __init__(self, path: Path, max_bytes: int) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fh: IO[bytes] | None = open(path, "ab")  # noqa: SIM115 - closed on EOF
        self._left = max(0, max_bytes - self._fh.tell())
        self._noted = False

    def data_received(self, data: bytes) -> None:
        if self._fh is None:
            return
        if len(data) <= self._left:
            self._fh.write(data)
            self._left -= len(data)
        else:
            if self._left:
                self._fh.write(data[: self._left])
                self._left = 0
            if not self._noted:
                self._noted = True
                self._fh.write(b"\n[lineup: worker log truncated at its size limit]\n")
        self._fh.flush()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


class _BridgeReader(asyncio.Protocol):
    """The worker → runtime pipe: lines handed to the worker as they arrive; a line over
    `MAX_MESSAGE` fails the worker (`protocol`), the end of the pipe ends it (`crashed`)."""

    def __init__(self, worker: Worker) -> None:
        self._worker = worker
        self._buffer = bytearray()

    def data_received(self, data: bytes) -> None:
        worker, buf = self._worker, self._buffer
        buf += data
        start = 0
        while not worker.dead:
            end = buf.find(b"\n", start)
            if end < 0:
                break
            worker._line(bytes(buf[start : end + 1]))
            start = end + 1
        del buf[:start]
        if len(buf) > MAX_MESSAGE and not worker.dead:
            worker._die(WorkerError("protocol", "the worker sent an oversized message"))

    def eof_received(self) -> bool | None:
        if self._buffer and not self._worker.dead:
            self._worker._line(bytes(self._buffer))  # a last line without its newline
        self._buffer.clear()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self._worker._die(self._worker.exit_error())


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
    ) -> None:
        self.scope, self.version = scope, version
        self.app_dir, self.entry, self.log_path = app_dir, entry, log_path
        self.options = options or WorkerOptions()
        self._box = Sandbox(
            self.options.sandbox,
            app_dir,
            network=network,
            memory_mb=self.options.memory_mb,
            processes=self.options.processes,
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
        self.sandbox: dict[str, Any] | None = None
        self.dead = False
        self.death: WorkerError | None = None
        self._sd_tasks: set[asyncio.Task[None]] = set()
        self._stopping: asyncio.Task[None] | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

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
        try:
            p2c_w, c2p_r, log_r = self._spawn()
        except OSError as exc:
            raise WorkerError("start", f"cannot start the worker: {exc}") from None
        log_t, _ = await loop.connect_read_pipe(
            lambda: _LogPipe(self.log_path, self.options.log_max_bytes),
            os.fdopen(log_r, "rb", buffering=0),
        )
        read_t, _ = await loop.connect_read_pipe(
            lambda: _BridgeReader(self), os.fdopen(c2p_r, "rb", buffering=0)
        )
        self._transport, _ = await loop.connect_write_pipe(
            asyncio.Protocol, os.fdopen(p2c_w, "wb", buffering=0)
        )
        self._transports = [read_t, log_t]
        self._hello = loop.create_future()
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
        threads = hello.get("threads")
        self.threads = threads if type(threads) is int and threads > 0 else 1
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
        if self._hello is not None and not self._hello.done():
            self._hello.set_exception(err)
            self._hello.exception()  # retrieved: a start that was cancelled never reads it
        interrupted = WorkerError("crashed", f"the worker failed: {err}", reason=err.reason)
        for rid, fut in self._pending.items():
            if not fut.done():
                fut.set_exception(err if rid == culprit or err.kind != "protocol" else interrupted)
        self._pending.clear()
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
            if not fut.done():
                fut.set_result(msg)
        elif kind == "sd":
            task = asyncio.create_task(self._session_request(msg))
            self._sd_tasks.add(task)
            task.add_done_callback(self._sd_tasks.discard)
        elif kind == "pong":
            if msg["id"] != self._ping_out:
                raise ProtocolError("the worker answered a heartbeat it was not sent")
            self._ping_out = None
            if self.threads and msg["stuck"] >= self.threads:
                self._die(WorkerError("hung", "every handler thread is stuck past its timeout"))

    async def _session_request(self, msg: dict[str, Any]) -> None:
        reply = await self._on_sd(self, msg)
        with contextlib.suppress(WorkerError):
            self._send({"t": "sd_reply", "id": msg["id"], **reply})

    def _send(self, msg: dict[str, Any]) -> None:
        self._write(json.dumps(msg, separators=(",", ":"), ensure_ascii=False))

    def _write(self, line: str) -> None:
        if self.dead or self._transport is None or self._transport.is_closing():
            raise WorkerError("crashed", "the worker is not running")
        self._transport.write(line.encode("utf-8") + b"\n")

    # -- heartbeat -----------------------------------------------------------------------
    def _arm_heartbeat(self) -> None:
        if self._beat is None and not self.dead:
            loop = asyncio.get_running_loop()
            self._beat = loop.call_later(self.options.heartbeat_s, self._heartbeat)

    def _heartbeat(self) -> None:
        self._beat = None
        if self.dead or not self._pending:
            return
        if self._ping_out is not None:
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

    # -- deliveries ----------------------------------------------------------------------
    def send_delivery(
        self, method: str, params_json: str, ctx: dict[str, Any]
    ) -> tuple[int, asyncio.Future[dict[str, Any]]]:
        """Send one call whose params are already JSON text (spliced in, not re-encoded);
        the future resolves with the worker's `result` message.

        Raises:
            WorkerError: the worker is not running.
        """
        rid = next(self._ids)
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[rid] = fut
        head = json.dumps(
            {"t": "deliver", "id": rid, "method": method, "ctx": ctx},
            separators=(",", ":"),
            ensure_ascii=False,
        )
        try:
            self._write(f'{head[:-1]},"params":{params_json}}}')
        except WorkerError:
            self._pending.pop(rid, None)
            raise
        self._arm_heartbeat()
        return rid, fut

    def forget(self, rid: int) -> None:
        """Stop waiting for a delivery (timed out or ended); a late answer is then ignored."""
        if rid in self._pending:
            done: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
            done.cancel()
            self._pending[rid] = done

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
        for t in self._transports:
            t.close()
        self._box.cleanup()

    async def kill(self) -> None:
        """Close the pipe and make sure the whole process tree is gone."""
        self._die(WorkerError("crashed", "the worker was stopped"))
        assert self._stopping is not None
        await asyncio.shield(self._stopping)
