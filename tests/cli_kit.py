"""The CLI runners the suites share: `lineup ARGS` through the console script's entry, in
process, or as a real process on a pseudo-terminal (as a person at a terminal runs it); and
long-running `lineup serve --http` / `lineup dev` processes: started, their start lines read,
stopped."""

from __future__ import annotations

import fcntl
import os
import select
import struct
import subprocess
import sys
import termios
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from lineup_build.cli import main

__all__ = [
    "LINEUP",
    "Served",
    "lineup_process",
    "run_cli",
    "run_on_terminal",
    "served_url",
    "serving_http",
    "start_lines",
    "stop_process",
]


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
#: `lineup` as a real process, from this interpreter (whether or not the script is installed).
LINEUP = [sys.executable, "-c", _MAIN]


def stop_process(proc: subprocess.Popen[str]) -> None:
    """End `proc`: SIGTERM, SIGKILL if it is not gone within 20 s; its pipes closed."""
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


@contextmanager
def lineup_process(
    args: list[str], cwd: Path | None, env: dict[str, str] | None = None
) -> Iterator[subprocess.Popen[str]]:
    """`lineup ARGS` as a real process (stdin and stdout closed off, stderr a text pipe for
    `start_lines`), stopped on leaving."""
    proc = subprocess.Popen(
        [*LINEUP, *args],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        yield proc
    finally:
        stop_process(proc)


def start_lines(proc: subprocess.Popen[str], last: Callable[[str], bool]) -> list[str]:
    """The lines `proc` writes to stderr, up to and including the first for which `last`
    holds (all of them if its stderr ends first)."""
    said: list[str] = []
    assert proc.stderr is not None
    for line in proc.stderr:
        said.append(line)
        if last(line):
            break
    return said


def served_url(said: list[str]) -> str:
    """The URL `lineup serve --http` names on its start line (`… tools at URL`), or ""."""
    url = ""
    for line in said:
        if " tools at " in line:
            url = line.rsplit(" ", 1)[-1].strip()
    return url


@dataclass
class Served:
    """A started `lineup serve --http`: its process, URL and start lines."""

    proc: subprocess.Popen[str]
    url: str
    said: list[str]

    @property
    def text(self) -> str:
        return "".join(self.said)


@contextmanager
def serving_http(
    args: list[str], cwd: Path, token: str, env: dict[str, str] | None = None
) -> Iterator[Served]:
    """`lineup serve ARGS` (ARGS with `--http`) with `token` as LINEUP_SERVE_TOKEN in `env`
    (default: this environment), read up to its token line; stopped on leaving."""
    env = {**(os.environ if env is None else env), "LINEUP_SERVE_TOKEN": token}
    with lineup_process(["serve", *args], cwd, env) as proc:
        said = start_lines(proc, lambda line: f"token {token}" in line)
        yield Served(proc, served_url(said), said)
