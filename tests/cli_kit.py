"""The CLI runners the suites share: `lineup ARGS` through the console script's entry, in
process, or as a real process on a pseudo-terminal (as a person at a terminal runs it)."""

from __future__ import annotations

import fcntl
import os
import select
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from lineup_build.cli import main

__all__ = ["run_cli", "run_on_terminal"]


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """`(exit status, stdout, stderr)` of `lineup ARGS`."""
    with pytest.raises(SystemExit) as info:
        main(args)
    out, err = capsys.readouterr()
    code = info.value.code
    return (code if isinstance(code, int) else 0 if code is None else 1), out, err


#: How long a terminal run may take before the test gives up on it (a hang guard only;
#: nothing waits for it to pass).
_HANG_GUARD_SECONDS = 180


def run_on_terminal(
    args: list[str], cwd: Path, typed: str = "", columns: int = 100
) -> tuple[int, str]:
    """`(exit status, everything shown)` of `lineup ARGS` run with stdin, stdout and stderr
    on one pseudo-terminal `columns` wide; `typed` is typed at it (not echoed, so what is
    shown is only what the command printed)."""
    exe = Path(sys.executable).with_name("lineup")
    command = [str(exe)] if exe.exists() else [sys.executable, "-c", _MAIN]
    leader, follower = os.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    attrs = termios.tcgetattr(follower)
    attrs[3] &= ~termios.ECHO
    termios.tcsetattr(follower, termios.TCSANOW, attrs)
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "COLUMNS", "LINES")}
    env["TERM"] = "xterm-256color"
    proc = subprocess.Popen(
        [*command, *args], stdin=follower, stdout=follower, stderr=follower, cwd=cwd, env=env
    )
    os.close(follower)
    shown = bytearray()
    try:
        if typed:
            os.write(leader, typed.encode())
        while True:
            ready, _, _ = select.select([leader], [], [], _HANG_GUARD_SECONDS)
            if not ready:
                raise AssertionError(f"lineup {args} hung; shown so far: {shown.decode()!r}")
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: every process holding the terminal has closed it
                break
            if not chunk:
                break
            shown += chunk
        return proc.wait(), shown.decode("utf-8", "replace")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(leader)


_MAIN = "from lineup_build.cli import main; main()"
