"""A PostgreSQL 15 server for the tests, from the machine's own binaries (SPEC 15, "Tests").

`pg_config --bindir` (or `LINEUP_PG_BINDIR`) names the server binaries. As root, `initdb`
and `pg_ctl` run as the `postgres` user (`runuser -u postgres --`; `pg_ctl` refuses root),
in a folder under /tmp that user can traverse (not pytest's 0700 folders); as anyone else
they run directly. The server listens on loopback only, on a free port, trusting local
connections. Without the binaries the PostgreSQL tests skip, saying why, except in CI
(`CI` set), where they fail: they are never skipped there.

Under pytest-xdist every worker is its own session and so starts its own server (its own
folder, named after the worker, and its own port), stopped and removed at its session's
end; a port taken between choosing it and the server binding it is chosen again.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

__all__ = ["PgServer", "fresh_database", "pg_bindir", "start_server"]


def pg_bindir() -> Path | None:
    """The folder holding `initdb`, `pg_ctl` and `postgres`, or None."""
    named = os.environ.get("LINEUP_PG_BINDIR")
    candidates = [Path(named)] if named else []
    if not named and shutil.which("pg_config"):
        out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True)
        if out.returncode == 0 and out.stdout.strip():
            candidates.append(Path(out.stdout.strip()))
    candidates += sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)
    for folder in candidates:
        if all((folder / name).is_file() for name in ("initdb", "pg_ctl", "postgres")):
            return folder
    return None


@dataclass
class PgServer:
    """A running throwaway server: `url(db)` names one of its databases."""

    base: Path
    port: int
    bindir: Path
    as_postgres: bool

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def _run(self, *argv: str) -> subprocess.CompletedProcess[str]:
        prefix = ["runuser", "-u", "postgres", "--"] if self.as_postgres else []
        return subprocess.run(
            [*prefix, *argv], capture_output=True, text=True, timeout=120, cwd="/"
        )

    def stop(self) -> None:
        self._run(
            str(self.bindir / "pg_ctl"),
            "-D",
            str(self.base / "data"),
            "-m",
            "immediate",
            "-w",
            "stop",
        )
        shutil.rmtree(self.base, ignore_errors=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


#: How often `start_server` chooses another port when the one it chose was taken meanwhile
#: (another xdist worker's server, or anyone else's listener, bound it first).
_PORT_TRIES = 5


def start_server(*, durable: bool = False, label: str = "") -> PgServer:
    """Initialise and start a server in a fresh folder under /tmp (`lineup-pg-LABEL-...`:
    the tests pass the xdist worker's id): without `durable`, with `fsync` off (the tests');
    with it, PostgreSQL's durable defaults (the benchmarks')."""
    bindir = pg_bindir()
    assert bindir is not None
    as_postgres = os.geteuid() == 0
    prefix = f"lineup-pg-{label}-" if label else "lineup-pg-"
    base = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    base.chmod(0o755)  # the postgres user traverses it
    if as_postgres:
        shutil.chown(base, "postgres")
    server = PgServer(base, _free_port(), bindir, as_postgres)
    init = server._run(
        str(bindir / "initdb"), "-D", str(base / "data"), "-U", "postgres", "-A", "trust",
        "--locale=C", "-E", "UTF8", "--no-sync",
    )  # fmt: skip
    if init.returncode != 0:
        shutil.rmtree(base, ignore_errors=True)
        raise RuntimeError(f"initdb failed: {init.stderr or init.stdout}")
    for attempt in range(1, _PORT_TRIES + 1):
        options = f"-p {server.port} -c listen_addresses=127.0.0.1 -k {base} -c max_connections=200"
        if not durable:
            options += " -c fsync=off -c full_page_writes=off"
        log_file = base / f"log.{attempt}"
        start = server._run(
            str(bindir / "pg_ctl"), "-D", str(base / "data"), "-o", options,
            "-l", str(log_file), "-w", "-t", "60", "start",
        )  # fmt: skip
        if start.returncode == 0:
            return server
        log = log_file.read_text() if log_file.exists() else ""
        if "could not bind" not in log or attempt == _PORT_TRIES:
            shutil.rmtree(base, ignore_errors=True)
            raise RuntimeError(f"pg_ctl start failed: {start.stderr or start.stdout}\n{log}")
        server.port = _free_port()  # taken since it was chosen: another one
    raise AssertionError("unreachable")


def server_or_skip(label: str = "") -> Iterator[PgServer]:
    """The session's server (its folder named with `label`); skips (outside CI) when the
    machine has no binaries."""
    if pg_bindir() is None:
        reason = "no PostgreSQL server binaries (pg_config --bindir, LINEUP_PG_BINDIR)"
        if os.environ.get("CI"):
            pytest.fail(f"{reason}: CI must run the PostgreSQL tests", pytrace=False)
        pytest.skip(reason)
    try:
        import psycopg  # noqa: F401
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail("psycopg is not installed: CI must run the PostgreSQL tests")
        pytest.skip("psycopg is not installed (the postgres extra)")
    server = start_server(label=label)
    try:
        yield server
    finally:
        server.stop()


def fresh_database(server: PgServer) -> str:
    """A new, empty database on `server`; its URL."""
    import psycopg

    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server.url(), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE template0')
    return server.url(name)
