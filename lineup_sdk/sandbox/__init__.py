"""One sandbox profile for every process that runs MiniApp code (SPEC 8).

The parent side: the command line and environment a sandboxed process starts with, its
private temporary folder, stopping its whole process tree, and a probe of what this
platform enforces. The child side is `lineup_sdk.sandbox.launch`.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lineup_sdk.errors import LineupError
from lineup_sdk.sandbox import _cgroups
from lineup_sdk.sandbox._cgroups import SharedMemory, shared_memory

__all__ = [
    "DEFAULT_PROCESSES",
    "MODES",
    "REPORT_KEYS",
    "Captured",
    "Sandbox",
    "SharedMemory",
    "check_mode",
    "describe",
    "probe",
    "run_bounded",
    "shared_memory",
    "simulate_unavailable",
    "stop_tree",
    "summary",
    "sweep_leftovers",
]

MODES = ("best_effort", "required", "off")
REPORT_KEYS = (
    *("files", "metadata", "network", "privileges"),
    *("process_tree", "processes", "memory", "tmp"),
)
#: Default cap on the tasks (processes and threads) of one sandboxed tree (SPEC 13.3).
DEFAULT_PROCESSES = 64
_TMP_PREFIX = "lineup-sbx-"
#: Environment variables that pass into a sandbox (besides `LC_*`); nothing else does.
_ENV_ALLOWED = ("PATH", "LANG", "TZ")

# The module's own seam for tests and diagnosis: mechanisms to treat as missing.
_UNAVAILABLE: set[str] = set()
_PROBES: dict[tuple[str, bool, frozenset[str]], dict[str, Any]] = {}


def check_mode(mode: str) -> str:
    """Return `mode` if it is a sandbox mode.

    Raises:
        LineupError: `usage_invalid` for anything else.
    """
    if mode not in MODES:
        raise LineupError(
            "usage_invalid",
            f"sandbox mode {mode!r} is not one of {', '.join(MODES)}",
            hint="use best_effort (default), required, or off for debugging",
        )
    return mode


@contextlib.contextmanager
def simulate_unavailable(*mechanisms: str) -> Iterator[None]:
    """Treat `mechanisms` (`linux`, `namespaces`, `landlock`, `seccomp`, `cgroups`,
    `pid_max`) as absent on this platform for sandboxes started inside the block — how tests reproduce a platform
    without them."""
    before = set(_UNAVAILABLE)
    _UNAVAILABLE.update(mechanisms)
    try:
        yield
    finally:
        _UNAVAILABLE.clear()
        _UNAVAILABLE.update(before)


@dataclass
class Sandbox:
    """The launch of one sandboxed process: its command, environment and private folder."""

    mode: str
    app_dir: Path
    network: bool = False
    memory_mb: int | None = None
    tmp_mb: int = 64
    open_files: int = 1024
    processes: int | None = DEFAULT_PROCESSES
    tmp: Path | None = None
    groups: _cgroups.BoxGroups | None = None
    shared: _cgroups.SharedMemory | None = None  # a memory group over several sandboxes
    #: The launch of an app version's warm image (decision record 0007): its own procfs,
    #: and the launcher serves the runtime as the session helper on descriptor `helper`.
    image: bool = False
    helper: int | None = None

    def __post_init__(self) -> None:
        check_mode(self.mode)

    def prepare(self, *, folder: bool = True) -> None:
        """Create the private, empty temporary folder (it is also the process's HOME; not
        for a worker forked from an image, whose tmpfs the helper mounts) and the tree's
        control groups where this process can make them."""
        if self.tmp is None and folder:
            self.tmp = Path(tempfile.mkdtemp(prefix=f"{_TMP_PREFIX}{os.getpid()}-"))
        if self.groups is None and self.mode != "off" and "cgroups" not in _UNAVAILABLE:
            self.groups = _cgroups.create(self.memory_mb, self.processes, under=self.shared)

    def config(self) -> dict[str, Any]:
        groups = self.groups
        return {
            "mode": self.mode,
            "app_dir": str(self.app_dir),
            "network": self.network,
            "memory_mb": self.memory_mb,
            "processes": self.processes,
            "tmp": str(self.tmp) if self.tmp else None,
            "tmp_mb": self.tmp_mb,
            "open_files": self.open_files,
            "unavailable": sorted(_UNAVAILABLE),
            "parent": os.getpid(),
            "cgroups": groups.joins() if groups else [],
            "cgroups_say": groups.describe(self.shared) if groups else {},
            "image": self.image,
            "helper": self.helper,
        }

    def oom_kills(self) -> int:
        """How many processes of the tree the kernel killed for its memory cap."""
        return self.groups.oom_kills() if self.groups else 0

    def argv(self, target: str, args: list[str]) -> list[str]:
        """`python -I -B -m lineup_sdk.sandbox.launch CONFIG TARGET ARGS...`."""
        return [
            sys.executable,
            "-I",
            "-B",
            "-u",
            "-m",
            "lineup_sdk.sandbox.launch",
            json.dumps(self.config(), separators=(",", ":")),
            target,
            *args,
        ]

    def env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """An allow-list of the parent's environment; HOME and TMPDIR are the private folder."""
        out = {k: v for k, v in os.environ.items() if k in _ENV_ALLOWED or k.startswith("LC_")}
        out.setdefault("PATH", os.defpath)
        if self.tmp is not None:
            out["HOME"] = out["TMPDIR"] = str(self.tmp)
        out.update(extra or {})
        return out

    def cleanup(self) -> None:
        """Remove the private folder and the control groups (after the process tree is
        gone; a group whose last tasks are still exiting is left to `sweep_leftovers`)."""
        if self.tmp is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = None
        if self.groups is not None:
            if not self.groups.remove():
                _BUSY.append(self.groups)
            self.groups = None


#: Groups whose last tasks were still exiting at cleanup; removed by the next sweep.
_BUSY: list[_cgroups.BoxGroups] = []


def sweep_leftovers() -> int:
    """Remove what sandboxes of runtimes that no longer run left behind — their control
    groups and private folders (a `kill -9`ed runtime cleans nothing up) — and this
    process's own groups that were still busy at cleanup. Returns how many went."""
    removed = 0
    for groups in list(_BUSY):
        if groups.remove():
            _BUSY.remove(groups)
            removed += 1
    removed += _cgroups.sweep()
    root = Path(tempfile.gettempdir())
    with contextlib.suppress(OSError):
        for folder in root.glob(f"{_TMP_PREFIX}*-*"):
            owner = folder.name[len(_TMP_PREFIX) :].split("-", 1)[0]
            if not owner.isdigit() or int(owner) == os.getpid() or _cgroups.pid_alive(int(owner)):
                continue
            with contextlib.suppress(OSError):
                _remove_folder(folder)
                removed += 1
    return removed


def _remove_folder(folder: Path) -> None:
    """A private folder is a tmpfs only inside its sandbox's mount namespace: out here it is
    a plain folder (holding what a sandbox without the tmpfs wrote into it)."""
    if folder.is_symlink() or not folder.is_dir():
        return
    shutil.rmtree(folder)


def stop_tree(proc: subprocess.Popen[bytes], *, grace_s: float = 2.0) -> None:
    """End a sandboxed process and everything it started, and reap it.

    The launcher kills its PID namespace on SIGTERM and exits once the namespace is
    empty; without a namespace the process group is the best there is.
    """
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=grace_s)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)  # stragglers of a namespace-less tree
    if proc.poll() is None:
        proc.kill()
        proc.wait()


@dataclass
class Captured:
    """What a bounded run produced: exit status, capped streams, and whether it timed out."""

    returncode: int | None
    stdout: bytes
    stderr: bytes
    result: bytes
    timed_out: bool
    truncated: tuple[str, ...]


def run_bounded(
    box: Sandbox,
    target: str,
    args: list[str],
    *,
    cwd: Path,
    env: Mapping[str, str] | None = None,
    timeout_s: float,
    stream_max: int = 1 << 20,
    result_max: int = 64 << 20,
) -> Captured:
    """Run `target` in `box`, keeping at most `stream_max` bytes of stdout and of stderr
    (the rest is read and dropped) and `result_max` of what it writes to the result pipe
    (fd number passed as the first argument). At the deadline, or when it exits, the whole
    process tree is stopped; the call never waits on a child that outlived it.
    """
    import selectors
    import time

    res_r, res_w = os.pipe()
    box.prepare()
    try:
        proc = subprocess.Popen(
            box.argv(target, [str(res_w), *args]),
            pass_fds=(res_w,),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=str(cwd),
            env=box.env(env),
            start_new_session=True,
        )
    except BaseException:
        os.close(res_r)
        raise
    finally:
        os.close(res_w)
    assert proc.stdout is not None and proc.stderr is not None
    bufs = {"stdout": bytearray(), "stderr": bytearray(), "result": bytearray()}
    caps = {"stdout": stream_max, "stderr": stream_max, "result": result_max}
    over: set[str] = set()
    sel = selectors.DefaultSelector()
    result_file = os.fdopen(res_r, "rb", buffering=0)
    for name, fh in (("stdout", proc.stdout), ("stderr", proc.stderr), ("result", result_file)):
        sel.register(fh, selectors.EVENT_READ, name)
    deadline = time.monotonic() + timeout_s
    timed_out = draining = False
    try:
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            ready = sel.select(0.05 if draining else min(left, 1.0))
            if draining and not ready:
                break  # exited with its result in: whatever still holds a pipe is not waited on
            for key, _ in ready:
                name = key.data
                chunk = os.read(key.fd, 1 << 16)
                if not chunk:
                    sel.unregister(key.fileobj)
                    continue
                room = caps[name] - len(bufs[name])
                if len(chunk) > room:
                    over.add(name)
                bufs[name] += chunk[: max(room, 0)]
            if not draining and proc.poll() is not None:
                draining = all(k.data != "result" for k in sel.get_map().values())
    finally:
        sel.close()
        stop_tree(proc, grace_s=0.5)
        for fh in (proc.stdout, proc.stderr, result_file):
            fh.close()
        box.cleanup()
    return Captured(
        proc.returncode,
        bytes(bufs["stdout"]),
        bytes(bufs["stderr"]),
        bytes(bufs["result"]),
        timed_out,
        tuple(sorted(over)),
    )


def probe(mode: str = "best_effort", *, network: bool = False) -> dict[str, Any]:
    """What a sandbox started now would enforce (one short-lived process, cached)."""
    check_mode(mode)
    key = (mode, network, frozenset(_UNAVAILABLE))
    if key not in _PROBES:
        box = Sandbox(mode, Path(tempfile.gettempdir()), network=network, memory_mb=1024)
        box.prepare()
        try:
            proc = subprocess.run(
                box.argv("lineup_sdk.sandbox.probe", []),
                env=box.env(),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=30,
                start_new_session=True,
                check=False,
            )
            report = json.loads(proc.stdout.decode("utf-8").strip().splitlines()[-1])
        except (OSError, ValueError, IndexError, subprocess.TimeoutExpired):
            report = {**dict.fromkeys(REPORT_KEYS), "mode": mode, "refused": "probe failed"}
        finally:
            box.cleanup()
        _PROBES[key] = report
    return dict(_PROBES[key])


def describe(report: Mapping[str, Any]) -> str:
    """One line for people: what is enforced and what is not."""
    if report.get("mode") == "off":
        return "sandbox: OFF (debugging only: MiniApp code runs with this process's authority)"
    parts = [f"{key.replace('_', ' ')}: {report.get(key) or 'NOT enforced'}" for key in REPORT_KEYS]
    return f"sandbox ({report.get('mode')}): " + "; ".join(parts)


def summary(report: Mapping[str, Any]) -> str | None:
    """The one short line a terminal gets without `-v`: None when every mechanism is
    enforced, else what is off, refused or missing (the details are `describe`'s)."""
    if report.get("mode") == "off":
        return "sandbox: OFF (debugging only; -v for details)"
    if report.get("refused"):
        return f"sandbox: refused: {report['refused']} (-v for details)"
    missing = [key.replace("_", " ") for key in REPORT_KEYS if not report.get(key)]
    if not missing:
        return None
    return f"sandbox: not enforced here: {', '.join(missing)} (-v for details)"
