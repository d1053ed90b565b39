"""A small pool of long-lived validator processes, killed and restarted at a time budget.

A schema that is not plain (`lineup_build.schema_cost`) can cost seconds per value, and
pure-Python validation can be neither interrupted nor kept from holding the interpreter
lock, so it runs in a child process (`_validator_child`): the waiting thread only reads a
pipe. A value over the budget has its process killed (the next value starts a new one;
the start is not counted in any budget). Not sandboxed: the child runs our own jsonschema
code on data. Safe from any thread; `aproblems` awaits without blocking the event loop.
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import select
import struct
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

__all__ = ["DEFAULT_BUDGET_S", "DEFAULT_SIZE", "OverBudget", "ValidatorPool"]

DEFAULT_BUDGET_S = 1.0
DEFAULT_SIZE = 2
_HEAD = struct.Struct(">I")
#: A child that does not say it is ready within this long is given up (start-up, not budget).
_START_S = 60.0


class OverBudget(Exception):
    """A value was not validated within the budget (or its validator process failed)."""

    def __init__(self, budget_s: float, why: str) -> None:
        super().__init__(why)
        self.budget_s = budget_s


class _Child:
    def __init__(self) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "lineup_runtime_lite.validation.child"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            close_fds=True,
            env=env,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.wr, self.rd = self.proc.stdin.fileno(), self.proc.stdout.fileno()
        self.known: set[str] = set()
        if self._read(time.monotonic() + _START_S) is None:
            self.kill()
            raise OverBudget(0.0, "the validator process did not start")

    def ask(self, key: str, schema: Any, value: Any, budget_s: float) -> Any:
        if key not in self.known:  # compiling a schema is once per process: not budgeted
            self._send({"k": key, "s": schema})
            answer = self._read(time.monotonic() + _START_S)
            if answer is None or "p" not in answer:
                return answer
            self.known.add(key)
        self._send({"k": key, "v": value})
        return self._read(time.monotonic() + budget_s)

    def _send(self, msg: dict[str, Any]) -> None:
        data = json.dumps(msg, ensure_ascii=False).encode("utf-8", "surrogatepass")
        view = memoryview(_HEAD.pack(len(data)) + data)
        while view:  # the child reads whole frames before it works: this cannot deadlock
            view = view[os.write(self.wr, view) :]

    def _read(self, deadline: float) -> Any:
        head = self._exact(_HEAD.size, deadline)
        if head is None:
            return None
        body = self._exact(_HEAD.unpack(head)[0], deadline)
        return None if body is None else json.loads(body)

    def _exact(self, n: int, deadline: float) -> bytes | None:
        parts: list[bytes] = []
        while n:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.rd], [], [], left)[0]:
                return None
            chunk = os.read(self.rd, min(n, 1 << 20))
            if not chunk:
                return None
            parts.append(chunk)
            n -= len(chunk)
        return b"".join(parts)

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()


class ValidatorPool:
    """Up to `size` validator processes, started on first use, each one value at a time.

    Args:
        budget_s: Real time one value may take in its validator process.
        size: How many processes validate at once (more values wait their turn).
    """

    def __init__(self, budget_s: float = DEFAULT_BUDGET_S, size: int = DEFAULT_SIZE) -> None:
        self.budget_s = budget_s
        self._slots: queue.LifoQueue[list[_Child | None]] = queue.LifoQueue()
        for _ in range(size):
            self._slots.put([None])
        self._executor = ThreadPoolExecutor(size, thread_name_prefix="lineup-validate")
        self._lock = threading.RLock()
        self._closed = False
        self._live: set[_Child] = set()

    def problems(self, key: str, schema: Any, value: Any) -> list[dict[str, Any]]:
        """The problems of `value` against `schema` (`key`: its digest), from a validator
        process; blocks this thread (waiting on a pipe, never holding the GIL long).

        Raises:
            OverBudget: the value took longer than the budget, or its process failed.
        """
        slot = self._slots.get()
        try:
            problems: list[dict[str, Any]] = self._ask(slot, key, schema, value)
            return problems
        finally:
            with self._lock:
                if self._closed and slot[0] is not None:
                    self._drop(slot)
            self._slots.put(slot)

    async def aproblems(self, key: str, schema: Any, value: Any) -> list[dict[str, Any]]:
        """`problems` awaited on the running loop (the wait is on the pool's threads)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self.problems, key, schema, value)

    def _ask(self, slot: list[_Child | None], key: str, schema: Any, value: Any) -> Any:
        for attempt in (1, 2):
            child = slot[0]
            if child is None:
                with self._lock:
                    if self._closed:
                        raise OverBudget(self.budget_s, "the runtime is closing")
                child = slot[0] = _Child()
                with self._lock:
                    self._live.add(child)
            try:
                answer = child.ask(key, schema, value, self.budget_s)
            except OSError:  # the process died between two values: one new try
                answer = None
                if attempt == 1:
                    self._drop(slot)
                    continue
            if answer is None:
                self._drop(slot)
                raise OverBudget(self.budget_s, f"not validated within {self.budget_s:g} s")
            if "p" in answer:
                return answer["p"]
            if answer.get("e") == "unknown schema" and attempt == 1:
                child.known.discard(key)
                continue
            raise OverBudget(self.budget_s, str(answer.get("e")))
        raise OverBudget(self.budget_s, "the validator process failed")

    def _drop(self, slot: list[_Child | None]) -> None:
        with self._lock:
            child, slot[0] = slot[0], None
            if child is not None:
                self._live.discard(child)
        if child is not None:
            child.kill()

    def close(self) -> None:
        """Kill every validator process (busy ones end their value as over budget)."""
        with self._lock:
            self._closed = True
        idle = []
        while True:
            try:
                idle.append(self._slots.get_nowait())
            except queue.Empty:
                break
        with self._lock:
            for slot in idle:
                self._drop(slot)
            busy = set(self._live)
        for child in busy:  # its waiting thread sees the pipe close and drops it
            child.proc.kill()
        for slot in idle:
            self._slots.put(slot)
        self._executor.shutdown(wait=False, cancel_futures=True)
