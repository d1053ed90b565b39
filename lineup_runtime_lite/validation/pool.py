"""A small pool of long-lived validator processes, killed and replaced at a time budget,
that serves apps in turn (SPEC 13.3, 16.4).

A schema that is not plain (`lineup_build.schema_cost`) can cost seconds per value, and
pure-Python validation can be neither interrupted nor kept from holding the interpreter
lock, so it runs in a child process (`_validator_child`): the waiting thread only reads a
pipe. A value over the budget has its process killed.

Fairness: every value names its app's scope and waits in that scope's queue; a free lane
(one per working process) takes the next value of the scope served longest ago, so one
app's flood of budget-long values delays another app's value by at most one budget. A warm
spare process stands ready, with the schemas seen so far compiled ahead of time: a lane
whose process was killed takes the spare at once, and a new spare starts in the background,
so process starts and compiles never count against another app. Not sandboxed: the child
runs our own jsonschema code on data. Safe from any thread; `aproblems` awaits without
blocking the event loop (and without holding a thread while it waits its turn).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import select
import struct
import subprocess
import sys
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import Any

__all__ = ["DEFAULT_BUDGET_S", "DEFAULT_SIZE", "DEFAULT_SPARES", "OverBudget", "ValidatorPool"]

DEFAULT_BUDGET_S = 1.0
DEFAULT_SIZE = 2
#: Warm processes kept ready beyond the working ones (under a flood of budget-long values
#: every value ends with its process killed: one spare per lane keeps the churn ahead).
DEFAULT_SPARES = 2
_HEAD = struct.Struct(">I")
#: A child that does not say it is ready within this long is given up (start-up, not budget).
_START_S = 60.0
#: Schemas the pool compiles into a new process ahead of time (the child keeps as many).
_KEEP_SCHEMAS = 256


#: How a validator process starts: the package `lineup_runtime_lite` is registered bare
#: (its `__init__`, which imports the whole runtime, never runs), so a process that replaces
#: a killed one is ready in about a third of the time.
_BOOT = """
import importlib.util, sys, types
spec = importlib.util.find_spec("lineup_runtime_lite")
pkg = types.ModuleType("lineup_runtime_lite")
pkg.__path__ = list(spec.submodule_search_locations)
sys.modules["lineup_runtime_lite"] = pkg
from lineup_runtime_lite.validation.child import main
main()
"""


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
            [sys.executable, "-c", _BOOT],
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

    def compile(self, key: str, schema: Any) -> Any:
        """Compile a schema (once per process; never counted in a value's budget)."""
        if key in self.known:
            return {"p": []}
        self._send({"k": key, "s": schema})
        answer = self._read(time.monotonic() + _START_S)
        if answer is not None and "p" in answer:
            self.known.add(key)
        return answer

    def ask(self, key: str, schema: Any, value: Any, budget_s: float) -> Any:
        answer = self.compile(key, schema)
        if answer is None or "p" not in answer:
            return answer
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


class _Job:
    """One value waiting for a lane; `done` is called once with (problems, error)."""

    __slots__ = ("done", "key", "schema", "scope", "value")

    def __init__(
        self,
        scope: str,
        key: str,
        schema: Any,
        value: Any,
        done: Callable[[list[dict[str, Any]] | None, BaseException | None], None],
    ) -> None:
        self.scope, self.key, self.schema, self.value, self.done = scope, key, schema, value, done


class ValidatorPool:
    """`size` lanes, each one validator process working one value at a time, plus a warm
    spare; values wait in a queue per app scope, taken round-robin (the scope served
    longest ago first). Processes start on first use.

    Args:
        budget_s: Real time one value may take in its validator process.
        size: How many processes validate at once (more values wait their turn).
        spares: How many warm processes stand ready to replace a killed one.
    """

    def __init__(
        self,
        budget_s: float = DEFAULT_BUDGET_S,
        size: int = DEFAULT_SIZE,
        spares: int = DEFAULT_SPARES,
    ) -> None:
        self.budget_s = budget_s
        self.size = size
        self._cond = threading.Condition(threading.Lock())
        self._queues: dict[str, deque[_Job]] = {}
        self._served: dict[str, int] = {}  # scope -> the turn it was last served on
        self._turn = 0
        self._schemas: OrderedDict[str, Any] = OrderedDict()
        self.spares = spares
        self._spares: list[_Child] = []
        self._live: set[_Child] = set()
        self._threads: list[threading.Thread] = []
        self._closed = False

    # -- asking ----------------------------------------------------------------------------
    def problems(self, key: str, schema: Any, value: Any, scope: str = "") -> list[dict[str, Any]]:
        """The problems of `value` against `schema` (`key`: its digest) for the app `scope`,
        from a validator process in that app's turn; blocks this thread.

        Raises:
            OverBudget: the value took longer than the budget, or its process failed.
        """
        done = threading.Event()
        out: list[Any] = [None, None]

        def finish(problems: list[dict[str, Any]] | None, error: BaseException | None) -> None:
            out[0], out[1] = problems, error
            done.set()

        self._submit(_Job(scope, key, schema, value, finish))
        done.wait()
        if out[1] is not None:
            raise out[1]
        problems: list[dict[str, Any]] = out[0]
        return problems

    async def aproblems(
        self, key: str, schema: Any, value: Any, scope: str = ""
    ) -> list[dict[str, Any]]:
        """`problems` awaited on the running loop (no thread is held while it waits)."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[list[dict[str, Any]]] = loop.create_future()

        def settle(problems: list[dict[str, Any]] | None, error: BaseException | None) -> None:
            if fut.done():
                return
            if error is not None:
                fut.set_exception(error)
            else:
                assert problems is not None
                fut.set_result(problems)

        def finish(problems: list[dict[str, Any]] | None, error: BaseException | None) -> None:
            # the loop may have closed meanwhile: then nobody waits any more
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(settle, problems, error)

        self._submit(_Job(scope, key, schema, value, finish))
        return await fut

    def prepare(self, key: str, schema: Any) -> None:
        """Remember a schema so that every new process compiles it ahead of time (an
        installed tool's schema that is not plain)."""
        with self._cond:
            self._remember(key, schema)

    def _remember(self, key: str, schema: Any) -> None:
        self._schemas[key] = schema
        self._schemas.move_to_end(key)
        while len(self._schemas) > _KEEP_SCHEMAS:
            self._schemas.popitem(last=False)

    def _submit(self, job: _Job) -> None:
        with self._cond:
            if self._closed:
                raise OverBudget(self.budget_s, "the runtime is closing")
            self._remember(job.key, job.schema)
            self._queues.setdefault(job.scope, deque()).append(job)
            if not self._threads:
                self._start_threads()
            self._cond.notify_all()

    def _start_threads(self) -> None:
        for n in range(self.size):
            lane = threading.Thread(target=self._lane, name=f"lineup-validate-{n}", daemon=True)
            self._threads.append(lane)
        self._threads.append(
            threading.Thread(target=self._keep_spare, name="lineup-validate-spare", daemon=True)
        )
        for thread in self._threads:
            thread.start()

    # -- lanes -----------------------------------------------------------------------------
    def _next(self) -> _Job | None:
        """The next value to validate: the oldest of the scope served longest ago (None
        once closed). Caller holds the lock."""
        while True:
            if self._closed:
                return None
            waiting = [s for s, q in self._queues.items() if q]
            if waiting:
                scope = min(waiting, key=lambda s: self._served.get(s, -1))
                self._turn += 1
                self._served[scope] = self._turn
                queue = self._queues[scope]
                job = queue.popleft()
                if not queue:
                    del self._queues[scope]
                return job
            self._cond.wait()

    def _lane(self) -> None:
        """Take a process first (the spare, or a new one), then the next value: a start
        delays whichever value a lane takes next, never one chosen before it."""
        child: _Child | None = None
        while True:
            failed: OverBudget | None = None
            if child is not None and child.proc.poll() is not None:
                self._drop(child)  # died while idle (killed from outside)
                child = None
            if child is None:
                try:
                    child = self._take_process()
                except OverBudget as exc:
                    failed = exc  # answered to the next value, so nobody waits forever
            with self._cond:
                job = self._next()
            if job is None:
                if child is not None:
                    self._drop(child)
                return
            if failed is not None:
                job.done(None, failed)
                continue
            try:
                child, problems = self._run(child, job)
            except OverBudget as exc:
                child = None
                job.done(None, exc)
            except Exception as exc:  # never leave a waiter without an answer
                if child is not None:
                    self._drop(child)
                child = None
                job.done(None, OverBudget(self.budget_s, f"{type(exc).__name__}: {exc}"))
            else:
                job.done(problems, None)

    def _take_process(self) -> _Child:
        """A warm spare when one stands ready (a new one starts behind it), else a new
        process started here."""
        while True:
            with self._cond:
                if self._closed:
                    raise OverBudget(self.budget_s, "the runtime is closing")
                spare = self._spares.pop(0) if self._spares else None
                self._cond.notify_all()  # the spare keeper starts the next one
            if spare is None:
                break
            if spare.proc.poll() is None:
                return spare
            self._drop(spare)  # killed while it waited: the next one
        return self._start_compiled()

    def _run(self, child: _Child | None, job: _Job) -> tuple[_Child, list[dict[str, Any]]]:
        """Validate one value on this lane's process (taking a process when it has none);
        the process is dropped when it ran over budget or failed."""
        for attempt in (1, 2):
            if child is None:
                child = self._take_process()
            try:
                answer = child.ask(job.key, job.schema, job.value, self.budget_s)
            except OSError:  # the process died between two values: one new try
                answer = None
                if attempt == 1:
                    self._drop(child)
                    child = None
                    continue
            if answer is None:
                self._drop(child)
                raise OverBudget(self.budget_s, f"not validated within {self.budget_s:g} s")
            if "p" in answer:
                problems: list[dict[str, Any]] = answer["p"]
                return child, problems
            if answer.get("e") == "unknown schema" and attempt == 1:
                child.known.discard(job.key)
                continue
            self._drop(child)  # its compiled schemas are in doubt: a clean process next
            raise OverBudget(self.budget_s, str(answer.get("e")))
        assert child is not None
        self._drop(child)
        raise OverBudget(self.budget_s, "the validator process failed")

    def _start_compiled(self) -> _Child:
        """A new process with every remembered schema compiled into it (its start and
        compiles counted against no value).

        Raises:
            OverBudget: it did not start or compile, or the pool closed meanwhile.
        """
        with self._cond:
            schemas = list(self._schemas.items())
        try:
            child = _Child()
        except OSError as exc:  # no process could start (descriptors, memory)
            raise OverBudget(self.budget_s, f"the validator process did not start: {exc}") from None
        with self._cond:
            self._live.add(child)
            closed = self._closed
        try:
            if closed:
                raise OverBudget(self.budget_s, "the runtime is closing")
            for key, schema in schemas:
                if child.compile(key, schema) is None:
                    raise OverBudget(self.budget_s, "the validator process did not compile")
        except (OverBudget, OSError) as exc:
            self._drop(child)
            if isinstance(exc, OverBudget):
                raise
            raise OverBudget(self.budget_s, "the validator process failed") from None
        return child

    def _keep_spare(self) -> None:
        """Keep `spares` warm processes ready, every remembered schema compiled into each."""
        while True:
            with self._cond:
                while not self._closed and len(self._spares) >= self.spares:
                    self._cond.wait()
                if self._closed:
                    return
            try:
                child = self._start_compiled()
            except OverBudget:
                with self._cond:
                    if self._closed:
                        return
                time.sleep(0.5)  # could not start one: the lanes start their own meanwhile
                continue
            with self._cond:
                if self._closed:
                    keep = False
                else:
                    self._spares.append(child)
                    keep = True
                    self._cond.notify_all()
            if not keep:
                self._drop(child)
                return

    def _drop(self, child: _Child) -> None:
        with self._cond:
            self._live.discard(child)
            if child in self._spares:
                self._spares.remove(child)
        child.kill()

    def processes(self) -> list[int]:
        """The pids of the live validator processes (the spare included)."""
        with self._cond:
            return [c.proc.pid for c in self._live]

    def spare_pid(self) -> int | None:
        """The pid of the next warm spare, when one stands ready."""
        with self._cond:
            return self._spares[0].proc.pid if self._spares else None

    def spare_pids(self) -> list[int]:
        """The pids of every warm spare standing ready."""
        with self._cond:
            return [c.proc.pid for c in self._spares]

    def close(self) -> None:
        """Kill every validator process (busy ones end their value as over budget; values
        still waiting their turn end the same way)."""
        with self._cond:
            self._closed = True
            waiting = [job for q in self._queues.values() for job in q]
            self._queues.clear()
            live = set(self._live)
            spares, self._spares = self._spares, []
            self._cond.notify_all()
        for job in waiting:
            job.done(None, OverBudget(self.budget_s, "the runtime is closing"))
        for child in live:  # a busy lane sees the pipe close and drops its process
            child.proc.kill()
        for spare in spares:
            self._drop(spare)
        for thread in self._threads:  # each ends at once now (its process is gone)
            if thread is not threading.current_thread():
                thread.join(timeout=5)
