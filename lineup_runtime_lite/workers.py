"""Worker subprocesses: one per installed app version, spoken to over a private pipe."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

__all__ = ["MAX_MESSAGE", "Worker", "WorkerError"]

MAX_MESSAGE = 4 * 1024 * 1024
HANDSHAKE_TIMEOUT_S = 30.0

SessionRequest = Callable[["Worker", dict[str, Any]], Awaitable[dict[str, Any]]]


class WorkerError(Exception):
    """The worker failed: `kind` is `crashed`, `protocol` or `start`."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class Worker:
    """One worker process and its bridge."""

    def __init__(
        self,
        scope: str,
        version: str,
        app_dir: Path,
        entry: str,
        log_path: Path,
        on_session_request: SessionRequest,
    ) -> None:
        self.scope, self.version = scope, version
        self.app_dir, self.entry, self.log_path = app_dir, entry, log_path
        self._on_sd = on_session_request
        self._proc: asyncio.subprocess.Process | None = None
        self._transport: asyncio.WriteTransport | None = None
        self._read_transport: asyncio.BaseTransport | None = None
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._ids = itertools.count(1)
        self._reader_task: asyncio.Task[None] | None = None
        self._hello: asyncio.Future[dict[str, Any]] | None = None
        self.methods: list[str] | None = None
        self.dead = False
        self.death: WorkerError | None = None
        self._sd_tasks: set[asyncio.Task[None]] = set()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    async def start(self) -> list[str]:
        """Spawn the process and wait for its method list.

        Raises:
            WorkerError: the worker could not start or reported a fatal import error.
        """
        loop = asyncio.get_running_loop()
        p2c_r, p2c_w = os.pipe()
        c2p_r, c2p_w = os.pipe()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child, closed below
        env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", PYTHONUNBUFFERED="1")
        env.pop("LINEUP_SDK_COLLECT", None)
        try:
            self._proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "lineup_sdk._worker",
                str(self.app_dir),
                self.entry,
                str(p2c_r),
                str(c2p_w),
                pass_fds=(p2c_r, c2p_w),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=str(self.app_dir),
                env=env,
            )
        except OSError as exc:
            for fd in (p2c_r, p2c_w, c2p_r, c2p_w):
                os.close(fd)
            raise WorkerError("start", f"cannot start the worker: {exc}") from None
        finally:
            log.close()
        os.close(p2c_r)
        os.close(c2p_w)
        reader = asyncio.StreamReader(limit=MAX_MESSAGE)
        self._read_transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(c2p_r, "rb", buffering=0)
        )
        self._transport, _ = await loop.connect_write_pipe(
            asyncio.Protocol, os.fdopen(p2c_w, "wb", buffering=0)
        )
        self._hello = loop.create_future()
        self._reader_task = asyncio.create_task(self._read(reader))
        try:
            hello = await asyncio.wait_for(asyncio.shield(self._hello), HANDSHAKE_TIMEOUT_S)
        except TimeoutError:
            await self.kill()
            raise WorkerError("start", "the worker did not report its methods in time") from None
        except WorkerError:
            await self.kill()
            raise
        methods = hello.get("methods")
        if not isinstance(methods, list) or not all(isinstance(m, str) for m in methods):
            await self.kill()
            raise WorkerError("protocol", "the worker's hello has no method list")
        self.methods = sorted(methods)
        return self.methods

    def _die(self, err: WorkerError) -> None:
        if self.dead:
            return
        self.dead, self.death = True, err
        if self._hello is not None and not self._hello.done():
            self._hello.set_exception(err)
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(err)
        self._pending.clear()

    async def _read(self, reader: asyncio.StreamReader) -> None:
        try:
            while True:
                try:
                    line = await reader.readline()
                except (asyncio.LimitOverrunError, ValueError):
                    self._die(WorkerError("protocol", "the worker sent an oversized message"))
                    break
                if not line:
                    self._die(WorkerError("crashed", "the worker exited"))
                    break
                try:
                    msg = json.loads(line)
                    if not isinstance(msg, dict):
                        raise ValueError("not an object")
                except ValueError:
                    self._die(WorkerError("protocol", "the worker sent a malformed message"))
                    break
                kind = msg.get("t")
                if kind == "hello" and self._hello is not None and not self._hello.done():
                    self._hello.set_result(msg)
                elif kind == "fatal":
                    self._die(WorkerError("start", str(msg.get("message", "import failed"))))
                    break
                elif kind == "result":
                    fut = self._pending.pop(msg.get("id"), None)  # type: ignore[arg-type]
                    if fut is None:
                        self._die(
                            WorkerError("protocol", "the worker answered a call it was not given")
                        )
                        break
                    if not fut.done():
                        fut.set_result(msg)
                elif kind == "sd":
                    task = asyncio.create_task(self._session_request(msg))
                    self._sd_tasks.add(task)
                    task.add_done_callback(self._sd_tasks.discard)
                else:
                    self._die(WorkerError("protocol", f"unknown bridge message {kind!r}"))
                    break
        finally:
            if self.dead:
                await self.kill()

    async def _session_request(self, msg: dict[str, Any]) -> None:
        reply = await self._on_sd(self, msg)
        self._send({"t": "sd_reply", "id": msg.get("id"), **reply})

    def _send(self, msg: dict[str, Any]) -> None:
        if self.dead or self._transport is None or self._transport.is_closing():
            raise WorkerError("crashed", "the worker is not running")
        data = json.dumps(msg, separators=(",", ":"), ensure_ascii=False)
        self._transport.write(data.encode("utf-8") + b"\n")

    def send_delivery(
        self, method: str, params: Any, ctx: dict[str, Any]
    ) -> asyncio.Future[dict[str, Any]]:
        """Send one call; the future resolves with the worker's `result` message.

        Raises:
            WorkerError: the worker is not running.
        """
        rid = next(self._ids)
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[rid] = fut
        try:
            self._send({"t": "deliver", "id": rid, "method": method, "params": params, "ctx": ctx})
        except WorkerError:
            self._pending.pop(rid, None)
            raise
        return fut

    def forget(self, fut: asyncio.Future[dict[str, Any]]) -> None:
        """Stop waiting for a delivery (after a timeout); a late answer is then ignored."""
        for rid, f in list(self._pending.items()):
            if f is fut:
                self._pending[rid] = asyncio.get_running_loop().create_future()
                self._pending[rid].cancel()

    async def kill(self) -> None:
        """Close the pipe and make sure the process is gone."""
        self._die(WorkerError("crashed", "the worker was stopped"))
        if self._transport is not None:
            self._transport.close()
        proc = self._proc
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            with contextlib.suppress(Exception):
                await proc.wait()
        if self._read_transport is not None:
            self._read_transport.close()
        if self._reader_task is not None and self._reader_task is not asyncio.current_task():
            self._reader_task.cancel()
