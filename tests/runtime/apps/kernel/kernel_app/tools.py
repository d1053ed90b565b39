"""Kernel-limit attempts: file metadata, memory over the tree, processes (SPEC 13.3). Each
tool reports what happened; none raises for the attempt itself."""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
import shutil
import signal
import tempfile
from typing import Any

from lineup_sdk import ToolContext, define_agent_tools

from . import ops

tools = define_agent_tools(app_scope="kernel")

#: Children forked by `forks`, kept to be reaped by `reap`.
_CHILDREN: list[int] = []
#: Names this worker process (its pid is 1 in its own PID namespace), made at its first
#: call: what the import made is the same in every worker forked from one warm image.
_PROCESS: list[str] = []


def _process() -> str:
    if not _PROCESS:
        _PROCESS.append(os.urandom(8).hex())
    return _PROCESS[0]


#: Memory `hold` keeps, until the worker ends.
_HELD: list[bytearray] = []
#: What `remember` was told last, by whichever conversation: a module global.
_REMEMBERED: dict[str, str] = {}


@tools.tool("kernel.echo", activation="app_ready")
async def echo(ctx: ToolContext, text: str) -> str:
    """Echo the text back."""
    return text


@tools.tool("kernel.meta", activation="app_ready")
def meta(ctx: ToolContext, path: str) -> dict[str, str]:
    """Try every metadata change on `path`."""
    return ops.attempts(path)


@tools.tool("kernel.tmp_meta", activation="app_ready")
def tmp_meta(ctx: ToolContext) -> dict[str, str]:
    """The same in the private temporary folder, plus what that means for `shutil`."""
    folder = tempfile.mkdtemp()
    path = os.path.join(folder, "mine.txt")
    with open(path, "w") as fh:
        fh.write("mine")
    out = ops.attempts(path)
    out["shutil.copyfile"] = ops.outcome(lambda: shutil.copyfile(path, path + ".1"))
    out["shutil.copy"] = ops.outcome(lambda: shutil.copy(path, path + ".2"))
    return out


@tools.tool("kernel.relink", activation="app_ready")
def relink(ctx: ToolContext, source: str, target: str) -> dict[str, str]:
    """Hard-link and rename `source` (a host file) onto `target`, and back."""
    return {
        "link": ops.outcome(lambda: os.link(source, target)),
        "rename": ops.outcome(lambda: os.rename(source, target)),
        "link_into_tmp": ops.outcome(lambda: os.link(source, tempfile.mktemp())),
    }


@tools.tool("kernel.shared_mmap", activation="app_ready")
def shared_mmap(ctx: ToolContext, mb: int) -> str:
    """Map `mb` MiB of shared anonymous memory (not "data") and touch every page."""
    area = mmap.mmap(-1, mb << 20, flags=mmap.MAP_SHARED | mmap.MAP_ANONYMOUS)
    for offset in range(0, mb << 20, mmap.PAGESIZE):
        area[offset] = 1
    area.close()
    return "ok"


@tools.tool("kernel.children", activation="app_ready", timeout_s=120)
def children(ctx: ToolContext, count: int, mb: int) -> dict[str, int]:
    """Fork `count` children that each allocate and touch `mb` MiB, say so, and wait.

    Returns how many got their memory, and how many still hold it once all are done (a
    child the kernel killed after it said so counts in the first, not the second)."""
    pids, pipes = [], []
    for _ in range(count):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: allocate, report, wait to be killed
            os.close(r)
            block = bytearray(mb << 20)
            for offset in range(0, len(block), 4096):
                block[offset] = 1
            os.write(w, b"held")
            signal.pause()
            os._exit(0)
        os.close(w)
        pids.append(pid)
        pipes.append(r)
    held = sum(1 for r in pipes if os.read(r, 4) == b"held")  # EOF: killed first
    alive = sum(1 for pid in pids if os.waitpid(pid, os.WNOHANG) == (0, 0))
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    for pid, r in zip(pids, pipes, strict=True):
        with contextlib.suppress(ChildProcessError):  # reaped by the liveness check
            os.waitpid(pid, 0)
        os.close(r)
    return {"held": held, "alive": alive}


@tools.tool("kernel.forks", activation="app_ready", timeout_s=120)
def forks(ctx: ToolContext, limit: int) -> dict[str, Any]:
    """Fork paused children until the kernel refuses (or `limit`); they stay alive."""
    refused = None
    while len(_CHILDREN) < limit:
        try:
            pid = os.fork()
        except OSError as exc:
            refused = errno.errorcode.get(exc.errno or 0, "OSError")
            break
        if pid == 0:
            signal.pause()
            os._exit(0)
        _CHILDREN.append(pid)
    return {"forked": len(_CHILDREN), "refused": refused}


@tools.tool("kernel.reap", activation="app_ready")
def reap(ctx: ToolContext) -> int:
    """Kill and reap the children `forks` left."""
    for pid in _CHILDREN:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
    count = len(_CHILDREN)
    _CHILDREN.clear()
    return count


@tools.tool("kernel.remember", activation="app_ready")
async def remember(ctx: ToolContext, value: str) -> dict[str, Any]:
    """Keep `value` in a module global; return what was there and who put it."""
    before = dict(_REMEMBERED)
    _REMEMBERED.update(value=value, conversation=ctx.conversation_id)
    return {"before": before, "process": _process()}


@tools.tool("kernel.nap", activation="app_ready", timeout_s=60)
async def nap(ctx: ToolContext, seconds: float) -> dict[str, Any]:
    """Stay busy `seconds` (a call in flight), then name this worker process."""
    import asyncio

    await asyncio.sleep(seconds)
    return {"process": _process()}


@tools.tool("kernel.hold", activation="app_ready")
def hold(ctx: ToolContext, mb: int) -> int:
    """Allocate and touch `mb` MiB more and keep it; return how many MiB are held."""
    block = bytearray(mb << 20)
    for offset in range(0, len(block), 4096):
        block[offset] = 1
    _HELD.append(block)
    return sum(len(b) for b in _HELD) >> 20
