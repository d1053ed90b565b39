"""Run a README's or a docs page's blocks as a user would: in one fresh folder, in order,
exactly as written.

A shell block runs with `bash -e -o pipefail`, stdin closed, under a timeout; a Python block
runs with this interpreter as a script file in the folder; a `server` block starts each line,
waits for its ready line on stderr and stops it; data blocks and `syntax-only` blocks are
parsed; an `install` block (it would replace the toolchain under test) is checked to be an
install line that works from a checkout or from the wheel, with extras the package has. Every
spawned process group is killed when its block ends, however it ends.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import yaml

from tests.users.readme_blocks import Block

__all__ = ["SHELL", "Folder", "check_install", "check_syntax", "plan", "run_block"]

SHELL = ("bash", "sh", "shell", "console")
PYTHON = ("python", "py")
DATA = ("toml", "json", "yaml", "yml")
IGNORED = ("text",)

#: Seconds one block (or one server's start) may take before the test fails.
BLOCK_TIMEOUT_S = 300.0
SERVER_READY_TIMEOUT_S = 90.0
#: `serve`'s start line names the served apps first (`todo 1.0.0 (3 tools): 3 tools at ...`).
_READY = re.compile(
    r"^lineup (serve: (.+: )?\d+ tools (over stdio|at http\S+)|dev: Host page: http\S+)"
)


@dataclass(frozen=True)
class Folder:
    """Where a README's blocks run: the working folder and the environment they see."""

    cwd: Path
    env: dict[str, str]
    scripts: Path  # block scripts live here, outside the working folder

    @classmethod
    def fresh(cls, root: Path, *, wheels: Path | None = None) -> Folder:
        """A working folder under `root`, with HOME and XDG_STATE_HOME beside it, this
        venv's `lineup` first on PATH, and no LINEUP_* variable from the caller's shell.
        `wheels`: a folder with this checkout's wheel, where pip finds `lineup-sdk==<this
        version>` (unpublished yet) as a user will find it on the index; pip keeps the
        caller's cache, so other packages come from it or the index."""
        for name in ("work", "home", "state", "scripts"):
            (root / name).mkdir(parents=True, exist_ok=True)
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("LINEUP_", "PYTEST_")) and k != "PYTHONPATH"
        }
        env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
        env.setdefault("PIP_CACHE_DIR", str(Path.home() / ".cache" / "pip"))
        env["HOME"] = str(root / "home")
        env["XDG_STATE_HOME"] = str(root / "state")
        env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
        if wheels is not None:
            links = [str(wheels), os.environ.get("PIP_FIND_LINKS", "")]
            env["PIP_FIND_LINKS"] = " ".join(filter(None, links))
        return cls(root / "work", env, root / "scripts")

    def inside(self, sub: str) -> Folder:
        return Folder(self.cwd / sub, self.env, self.scripts)


def plan(block: Block) -> str:
    """What the suite does with `block`: run, server, syntax, newcomer, ignore, or untested."""
    if block.marker == "newcomer":
        return "newcomer" if block.lang in SHELL else "untested"
    if block.marker == "syntax-only":
        return "syntax" if block.lang in (*SHELL, *PYTHON, *DATA) else "untested"
    if block.marker == "server":
        return "server" if block.lang in SHELL else "untested"
    if block.marker == "install":
        return "install" if block.lang in SHELL else "untested"
    if block.lang in (*SHELL, *PYTHON):
        return "run"
    if block.lang in DATA:
        return "syntax"
    if block.lang in IGNORED:
        return "ignore"
    return "untested"


def _shell_source(block: Block) -> str:
    if block.lang != "console":
        return block.text
    # A console block shows `$ command` lines and their output; the commands are what runs.
    return "".join(line[2:] + "\n" for line in block.text.splitlines() if line.startswith("$ "))


def check_syntax(block: Block) -> None:
    """Parse `block` in its own language; raises on a syntax error."""
    if block.lang in SHELL:
        done = subprocess.run(
            ["bash", "-n"],
            input=_shell_source(block),
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert done.returncode == 0, f"{block.label()}: bash -n: {done.stderr}"
    elif block.lang in PYTHON:
        compile(block.text, f"<README {block.label()}>", "exec")
    elif block.lang == "json":
        json.loads(block.text)
    elif block.lang == "toml":
        tomllib.loads(block.text)
    elif block.lang in ("yaml", "yml"):
        yaml.safe_load(block.text)
    else:
        raise AssertionError(f"{block.label()}: no syntax check for {block.lang!r}")


#: `pip install` from a checkout (`".[mcp]"`) or from the wheel beside the working folder
#: (`"lineup_sdk-<version>-py3-none-any.whl[mcp]"`), then plain package names.
_INSTALL = re.compile(
    r'^pip install "(?P<what>\.|lineup_sdk-(?P<version>[^-"]+)-py3-none-any\.whl)'
    r'(?:\[(?P<extras>[a-z,]+)\])?"(?P<more>(?: [a-z][a-z0-9_-]*)*)$'
)


def check_install(block: Block) -> None:
    """Each line of an `install` block installs this checkout or its wheel (of this version)
    with extras `pyproject.toml` declares: the lines users copy while the distribution is
    not on an index, which `lineup-sdk[...]` would not find."""
    from lineup_sdk import __version__

    root = Path(__file__).resolve().parents[2]
    pyproject = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    extras = set(pyproject["project"]["optional-dependencies"])
    lines = [x for x in _shell_source(block).splitlines() if x.strip() and not x.startswith("#")]
    assert lines, f"{block.label()}: an install block without a line"
    for line in lines:
        found = _INSTALL.match(line.split("  #")[0].rstrip())
        assert found is not None, f"{block.label()}: not a checkout or wheel install: {line}"
        if found["version"] is not None:
            assert found["version"] == __version__, f"{block.label()}: wheel of another version"
        wanted = set(filter(None, (found["extras"] or "").split(",")))
        assert wanted <= extras, f"{block.label()}: no such extra: {sorted(wanted - extras)}"


def _kill_group(proc: subprocess.Popen[str]) -> None:
    """Kill the process group of `proc` (it was started in a session of its own) and reap it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=30)


def _run(argv: list[str], folder: Folder, what: str) -> None:
    proc = subprocess.Popen(
        argv,
        cwd=folder.cwd,
        env=folder.env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        try:
            out, _ = proc.communicate(timeout=BLOCK_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{what}: still running after {BLOCK_TIMEOUT_S:.0f}s") from None
        assert proc.returncode == 0, f"{what}: exit {proc.returncode}\n{out}"
    finally:
        _kill_group(proc)
        if proc.stdout is not None:
            proc.stdout.close()


def _pump(stream: IO[str], lines: queue.Queue[str | None]) -> None:
    for line in stream:
        lines.put(line)
    lines.put(None)


def _serve_line(command: str, folder: Folder, what: str) -> None:
    """Start `command`, wait (bounded) for its ready line on stderr, then stop it."""
    proc = subprocess.Popen(
        ["bash", "-e", "-o", "pipefail", "-c", command],
        cwd=folder.cwd,
        env=folder.env,
        stdin=subprocess.PIPE,  # a stdio server's client holds its stdin open
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert proc.stderr is not None
    lines: queue.Queue[str | None] = queue.Queue()
    reader = threading.Thread(target=_pump, args=(proc.stderr, lines), daemon=True)
    reader.start()
    seen: list[str] = []
    deadline = time.monotonic() + SERVER_READY_TIMEOUT_S
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"{what}: no ready line within {SERVER_READY_TIMEOUT_S:.0f}s")
            try:
                line = lines.get(timeout=left)
            except queue.Empty:
                continue
            if line is None:
                proc.wait(timeout=30)
                raise AssertionError(
                    f"{what}: exited ({proc.returncode}) before it was ready\n{''.join(seen)}"
                )
            seen.append(line)
            if _READY.match(line):
                return
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        _kill_group(proc)
        reader.join(timeout=30)
        proc.stderr.close()


def run_block(block: Block, folder: Folder) -> None:
    """Do with `block` what `plan(block)` says; raises AssertionError naming the block."""
    what = f"README block at {block.label()}"
    step = plan(block)
    if step == "syntax":
        check_syntax(block)
    elif step == "install":
        check_syntax(block)
        check_install(block)
    elif step == "run" and block.lang in SHELL:
        script = folder.scripts / f"block-{block.line}.sh"
        script.write_text(_shell_source(block), encoding="utf-8")
        _run(["bash", "-e", "-o", "pipefail", str(script)], folder, what)
    elif step == "run":
        script = folder.cwd / f".readme-block-{block.line}.py"
        script.write_text(block.text, encoding="utf-8")
        try:
            _run([sys.executable, script.name], folder, what)
        finally:
            script.unlink(missing_ok=True)
    elif step == "server":
        commands = _commands(block)
        assert commands, f"{what}: a server block without a command"
        for command in commands:
            _serve_line(command, folder, f"{what}: {command}")
    elif step not in ("ignore", "newcomer"):
        raise AssertionError(f"{what} is neither run nor syntax-checked: mark it or fix it")


def _commands(block: Block) -> list[str]:
    lines = _shell_source(block).splitlines()
    return [line for line in lines if line.strip() and not line.lstrip().startswith("#")]
