"""The running worker of each installed app version, started on demand (with retries)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from lineup_runtime_lite.drivers import WORKER_START_TRIES
from lineup_runtime_lite.drivers.install import InstalledApp
from lineup_runtime_lite.drivers.shell import Shell
from lineup_runtime_lite.processes.image import Image
from lineup_runtime_lite.processes.proctree import Memory, tree_memory
from lineup_runtime_lite.processes.worker import Worker, WorkerError, WorkerOptions
from lineup_sdk.sandbox import SharedMemory

__all__ = ["CAUSE_MAX", "WorkerPool", "WorkerPort", "failure_cause", "process_port"]

#: Where a worker that failed to start is reported, once per app version and runtime, with
#: its cause and its log's path; `lineup run`, `test`, `serve` and `dev` print it on stderr.
failures = logging.getLogger("lineup.runtime.workers")

#: The longest `cause` an `activation_failed` error carries.
CAUSE_MAX = 500


def failure_cause(text: str) -> str:
    """The first line of what a worker reported (`RuntimeError: boom`), its control
    characters escaped, at most `CAUSE_MAX` characters."""
    line = text.strip().split("\n", 1)[0]
    shown = "".join(
        ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in line
    )
    return shown if len(shown) <= CAUSE_MAX else shown[: CAUSE_MAX - 1] + "…"


#: A worker's key in the pool: `(scope, version)`, and the App session under `session`.
Key = tuple[str, ...]

#: The worker port: what the pool asks for the worker of an app version, called with
#: `Worker`'s arguments (the shape of httpx's transports: the pool never knows what
#: answers). `Worker` — a sandboxed process — in production; the tests' in-process fake
#: answers deliveries by calling the handlers here (tests/runtime/inprocess_worker.py).
WorkerPort = Callable[..., Worker]

#: The port a pool uses when it is given none (tests swap it with `monkeypatch`).
process_port: WorkerPort = Worker

#: The internal switch of the warm image (decision record 0007): under
#: `isolation="session"` with the process port, session workers are forked from an image
#: of their app version when it passes its checks; off, every session starts cold.
WARM_IMAGE = True


class WorkerPool:
    """Workers by app version (`isolation="app"`) or by App session (`"session"`: a worker
    per session, recycled after `session_idle_s` idle and started again for its next
    delivery — no new activation, receipt, instance or Host intent)."""

    def __init__(
        self,
        shell: Shell,
        logs_dir: Path,
        options: WorkerOptions,
        check_app: Callable[[str, str], Awaitable[InstalledApp]],
        on_session_request: Callable[[Worker, dict[str, Any]], Awaitable[dict[str, Any]]],
        *,
        shared_memory: SharedMemory | None = None,
        port: WorkerPort | None = None,
    ) -> None:
        self.shell = shell
        self.port = port if port is not None else process_port
        self.logs_dir = logs_dir
        self.options = options
        self.check_app = check_app
        self.on_session_request = on_session_request
        self.shared_memory = shared_memory
        self.workers: dict[Key, Worker] = {}
        self._used: dict[Key, float] = {}
        self._sweeper: asyncio.TimerHandle | None = None
        #: Workers replaced while draining: each stops itself once its deliveries end.
        self.draining: set[Worker] = set()
        self._locks: dict[Key, asyncio.Lock] = {}
        self.sandbox_report: dict[str, Any] | None = None  # what the last worker enforced
        self._reported: set[tuple[str, str]] = set()
        #: Under `session`: each app version's image (warm, or the cold verdict kept
        #: while the version has sessions) and the app it was checked as.
        self.images: dict[tuple[str, str], Image] = {}
        self._image_apps: dict[tuple[str, str], InstalledApp] = {}
        self._image_locks: dict[tuple[str, str], asyncio.Lock] = {}

    def log_path(self, scope: str, version: str) -> Path:
        """The worker log of an app version (it may not exist yet)."""
        return self.logs_dir / f"{scope}-{version}.log"

    def report_failure(self, scope: str, version: str, cause: str) -> None:
        """Say once per app version that its worker failed to start, where its log is."""
        if (scope, version) in self._reported:
            return
        self._reported.add((scope, version))
        failures.warning(
            "%s %s: the worker failed to start: %s\n  log: %s",
            scope,
            version,
            cause,
            self.log_path(scope, version),
            extra={"scope": scope, "version": version, "cause": cause},
        )

    def key(self, scope: str, version: str, session: str) -> Key:
        """The pool key of the worker that serves App session `session`."""
        return (
            (scope, version, session) if self.options.isolation == "session" else (scope, version)
        )

    def _touch(self, key: Key) -> None:
        # a step deciding on the store thread asks too (`live`), where no loop runs: the
        # clock is the monotonic one, and the loop's next touch arms the sweeper
        if self.options.isolation == "session":
            self._used[key] = time.monotonic()
            if self._sweeper is None and _on_a_loop():
                self._arm_sweeper()

    def live(self, scope: str, version: str, session: str) -> Worker | None:
        """The worker that takes new deliveries of this session's app, if one is up."""
        key = self.key(scope, version, session)
        worker = self.workers.get(key)
        if worker is None or worker.dead or worker.draining:
            return None
        self._touch(key)
        return worker

    def sendable(self, scope: str, version: str, session: str) -> Worker | None:
        """The worker a delivery decided on a moment ago may still be sent to: one that
        began to drain since is not yet replaced, and stops only after it (at most once:
        a committed delivery is sent now or never)."""
        key = self.key(scope, version, session)
        worker = self.workers.get(key)
        if worker is None or worker.dead:
            return None
        self._touch(key)
        return worker

    # -- idle session workers ------------------------------------------------------------
    def _arm_sweeper(self) -> None:
        every = max(0.05, min(self.options.session_idle_s / 4, 30.0))
        self._sweeper = asyncio.get_running_loop().call_later(every, self._sweep)

    def _sweep(self) -> None:
        """Recycle session workers idle for `session_idle_s` with nothing in flight."""
        self._sweeper = None
        now = time.monotonic()
        for key, worker in list(self.workers.items()):
            if worker.busy:  # idle time counts from the end of its last delivery
                self._used[key] = now
                continue
            idle = now - self._used.get(key, now)
            if worker.dead or idle < self.options.session_idle_s:
                continue
            del self.workers[key]
            self._used.pop(key, None)
            lock = self._locks.get(key)
            if lock is not None and not lock.locked():
                del self._locks[key]
            self.shell.spawn(worker.kill())
        self._stop_unused_images()
        if self.workers:
            self._arm_sweeper()

    # -- images (isolation="session", decision record 0007) ----------------------------------
    def _warm_path(self) -> bool:
        return self.options.isolation == "session" and WARM_IMAGE and self.port is Worker

    def _stop_unused_images(self) -> None:
        """Stop the image of each version none of whose sessions has a worker left."""
        used = {(w.scope, w.version) for w in [*self.workers.values(), *self.draining]}
        for vkey in list(self.images):
            lock = self._image_locks.get(vkey)
            if vkey in used or (lock is not None and lock.locked()):
                continue
            image = self.images.pop(vkey)
            self._image_apps.pop(vkey, None)
            self.shell.spawn(image.stop())

    async def _image(self, scope: str, version: str) -> tuple[Image, InstalledApp]:
        """The version's image, started (after `check_app`, which is not repeated per fork)
        if it has none or its image died; a cold verdict is kept while the version has
        sessions."""
        vkey = (scope, version)
        async with self._image_locks.setdefault(vkey, asyncio.Lock()):
            image = self.images.get(vkey)
            if image is not None and (not image.warm or image.alive()):
                return image, self._image_apps[vkey]
            if image is not None:
                await image.stop()
                del self.images[vkey]
            app = await self.check_app(scope, version)  # the folder, once per image
            image = Image(
                app.root,
                app.model.app.entry,
                self.log_path(scope, version),
                sandbox=self.options.sandbox,
                memory_mb=self.options.memory_mb,
                processes=self.options.processes,
                network=app.model.app.network,
                shared_memory=self.shared_memory,
            )
            try:
                await image.start()
            except asyncio.CancelledError:
                await asyncio.shield(image.stop())
                raise
            self.images[vkey], self._image_apps[vkey] = image, app
            return image, app

    async def ensure(self, scope: str, version: str, session: str) -> Worker:
        """The running worker of this session's app (of its own session under
        `isolation="session"`), started (with retries) if needed.

        Raises:
            WorkerError: the worker cannot start (`sandbox` when the mode refuses).
            LineupError: the installed app fails its checks (`install_tampered`, trust).
        """
        key = self.key(scope, version, session)
        self._touch(key)
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            worker = self.workers.get(key)
            if worker is not None and not worker.dead and not worker.draining:
                return worker
            self.draining = {w for w in self.draining if not w.dead}
            if worker is not None and not worker.dead:  # draining: it stops on its own
                self.draining.add(worker)
                del self.workers[key]
            elif worker is not None:  # a recycled worker: its whole tree goes first
                await worker.kill()
                del self.workers[key]
            image: Image | None = None
            checked: InstalledApp | None = None
            if self._warm_path():
                image, app = await self._image(scope, version)
                checked = app if not image.warm else None
            last: WorkerError | None = None
            for _ in range(WORKER_START_TRIES):
                warm = image is not None and image.warm
                if not warm and checked is None:
                    checked = await self.check_app(scope, version)  # the folder to use
                    app = checked
                worker = self.port(
                    scope,
                    version,
                    app.root,
                    app.model.app.entry,
                    self.log_path(scope, version),
                    self.on_session_request,
                    options=self.options,
                    network=app.model.app.network,
                    shared_memory=self.shared_memory,
                    **({"image": image} if warm else {}),
                )
                try:
                    methods = await worker.start()
                except WorkerError as exc:
                    if exc.kind == "sandbox":
                        raise  # the platform will not change on a retry
                    last = exc
                    continue
                except asyncio.CancelledError:  # nobody waits for it: no orphan process
                    await asyncio.shield(worker.kill())
                    raise
                if worker.sandbox is not None:
                    self.sandbox_report = dict(worker.sandbox)
                    if image is not None:
                        self.sandbox_report["image"] = image.status()
                expected = sorted(
                    t.method
                    for t in self.shell.tools_of(scope, version).values()
                    if t.delivery == "miniapp_sdk"
                )
                if methods != expected:
                    await worker.kill()
                    raise WorkerError(
                        "method_mismatch",
                        f"the worker serves {methods}, the manifest declares {expected}",
                    )
                # the UI Actions likewise, listed apart (SPEC 17)
                actions = sorted(self.shell.actions_of(scope, version))
                served = sorted(getattr(worker, "actions", None) or [])
                if served != actions:
                    await worker.kill()
                    raise WorkerError(
                        "method_mismatch",
                        f"the worker serves the actions {served}, the manifest declares {actions}",
                    )
                self.workers[key] = worker
                return worker
            assert last is not None
            raise last

    def memory(self) -> dict[str, Any] | None:
        """What the running workers hold now, summed over each one's process tree (its
        launcher included): `workers`, `pss_kib`, `uss_kib`, and `rss_kib` beside them
        (RSS counts a page two processes share twice). None while no worker runs, or
        where `/proc/<pid>/smaps_rollup` cannot be read (not Linux)."""
        pids = [getattr(w, "pid", None) for w in [*self.workers.values(), *self.draining]]
        total, counted = Memory(), 0
        for pid in pids:
            got = tree_memory(pid) if pid else None
            if got is not None:
                total += got
                counted += 1
        if not counted:
            return None
        return {"workers": counted, **total.as_kib()}

    async def close(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        for worker in [*self.workers.values(), *self.draining]:
            await worker.kill()
        self.workers.clear()
        self.draining.clear()
        for image in self.images.values():
            await image.stop()
        self.images.clear()
        self._image_apps.clear()
        if self.shared_memory is not None:
            self.shared_memory.remove()


def _on_a_loop() -> bool:
    """Whether this thread runs an event loop (the store thread does not)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
