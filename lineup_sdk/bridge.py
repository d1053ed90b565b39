"""The worker bridge protocol, shared by the runtime and the worker: JSON lines on a pair of
private pipes.

Runtime → worker: `deliver {id, method, params, ctx}`, `sd_reply {id, ...}`, `ping {id}`.
Worker → runtime: `sandbox {report}` (first, before any author code runs),
`hello {methods, pid, threads}`, `fatal {message, code?}`,
`result {id, ok, result | error}`, `sd {id, d, cap, op, ...}`, `pong {id, stuck}`.
Anything else, a line over `MAX_MESSAGE`, or a line that is not a JSON object of the
expected shape is a protocol error: the runtime fails the worker (SPEC 8).
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["MAX_MESSAGE", "READ_CHUNK", "ProtocolError", "connect_lines", "parse_line"]

MAX_MESSAGE = 4 * 1024 * 1024

#: Bytes asked of a bridge pipe per read, at either end. asyncio asks 256 KiB, which glibc
#: serves with a fresh mmap, shrinks to the bytes read (mremap) and unmaps when the line is
#: freed (so its mmap threshold never rises): three syscalls and a page fault for every
#: message, about 18 µs a read on a 2-core VM. 64 KiB stays under the 128 KiB threshold
#: (a pipe holds 64 KiB anyway; a longer line still arrives in several reads).
READ_CHUNK = 64 * 1024

_P = TypeVar("_P", bound=asyncio.BaseProtocol)


async def connect_lines(
    loop: asyncio.AbstractEventLoop, protocol_factory: Callable[[], _P], fd: int
) -> tuple[asyncio.ReadTransport, _P]:
    """Read the pipe `fd` into a new protocol, `READ_CHUNK` bytes at a time at most (a
    loop whose transports have no read size, uvloop's, reads as it does)."""
    transport, protocol = await loop.connect_read_pipe(
        protocol_factory, os.fdopen(fd, "rb", buffering=0)
    )
    if isinstance(getattr(transport, "max_size", None), int):
        transport.max_size = READ_CHUNK  # type: ignore[attr-defined]
    return transport, protocol


# kind -> the fields that must be present with their types (ids are plain ints)
_WORKER_KINDS: dict[str, dict[str, type | tuple[type, ...]]] = {
    "sandbox": {"report": dict},
    "hello": {"methods": list},
    "fatal": {"message": str},
    "result": {"id": int, "ok": bool},
    "sd": {"id": int, "d": int, "cap": str, "op": str},
    "pong": {"id": int, "stuck": int},
}


class ProtocolError(ValueError):
    """A bridge line the runtime will not accept; `delivery` names the delivery it answered."""

    def __init__(self, message: str, delivery: int | None = None) -> None:
        super().__init__(message)
        self.delivery = delivery


def parse_line(line: bytes) -> dict[str, Any]:
    """One worker → runtime message, checked for shape.

    Raises:
        ProtocolError: malformed, too deep, of an unknown kind, or missing a field.
    """
    if len(line) > MAX_MESSAGE:
        raise ProtocolError("the worker sent an oversized message")
    try:
        msg = json.loads(line)
    except RecursionError:
        raise ProtocolError("the worker sent a message nested too deeply") from None
    except ValueError:
        raise ProtocolError("the worker sent a malformed message") from None
    if not isinstance(msg, dict):
        raise ProtocolError("the worker sent a message that is not an object")
    rid = msg.get("id")
    named = rid if type(rid) is int else None
    kind = msg.get("t")
    fields = _WORKER_KINDS.get(kind) if isinstance(kind, str) else None
    if fields is None:
        raise ProtocolError(f"the worker sent a message of unknown kind {str(kind)[:40]!r}", named)
    for name, typ in fields.items():
        value = msg.get(name)
        if not isinstance(value, typ) or (typ is int and isinstance(value, bool)):
            raise ProtocolError(f"the worker's {kind} message has no valid {name!r}", named)
    return msg
