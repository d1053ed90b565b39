"""The validator process: validates values against schemas it is sent, one at a time.

Frames on stdin and stdout are a 4-byte big-endian length and UTF-8 JSON. The parent
sends `{"k": key, "s": schema}` the first time this process sees a schema (answered
`{"p": []}` once compiled), then `{"k": key, "v": value}` per value, and reads
`{"p": problems}` or `{"e": message}`. It kills this
process when a value is over its time budget, so nothing here needs to be interruptible.
"""

from __future__ import annotations

import json
import os
import struct
import sys
from typing import Any

_HEAD = struct.Struct(">I")


def _read_exact(fd: int, n: int) -> bytes | None:
    parts, left = [], n
    while left:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            return None
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def _write(fd: int, msg: dict[str, Any]) -> None:
    data = json.dumps(msg, ensure_ascii=False).encode("utf-8", "surrogatepass")
    view = memoryview(_HEAD.pack(len(data)) + data)
    while view:
        view = view[os.write(fd, view) :]


def main() -> None:
    """Serve frames until stdin closes."""
    from lineup_runtime_lite.validation.checks import Validator

    sys.setrecursionlimit(20_000)  # a deep schema walks deep; this process may crash safely
    rd, wr = sys.stdin.fileno(), sys.stdout.fileno()
    known: dict[str, Validator] = {}
    _write(wr, {"ready": True})
    while True:
        head = _read_exact(rd, _HEAD.size)
        if head is None:
            return
        body = _read_exact(rd, _HEAD.unpack(head)[0])
        if body is None:
            return
        try:
            msg = json.loads(body)
            key = msg["k"]
            if "s" in msg:  # a schema to compile, answered at once
                if len(known) >= 256:
                    known.clear()
                known[key] = Validator(msg["s"])
                _write(wr, {"p": []})
                continue
            validator = known.get(key)
            if validator is None:
                _write(wr, {"e": "unknown schema"})
                continue
            _write(wr, {"p": validator.problems(msg["v"])})
        except Exception as exc:
            _write(wr, {"e": f"{type(exc).__name__}: {exc}"[:500]})


if __name__ == "__main__":
    main()
