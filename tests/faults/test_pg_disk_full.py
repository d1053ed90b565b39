"""F21's full disk on PostgreSQL (SPEC 15, RUNTIME-NOTES fault table): the runtime's tables
live in a tablespace on a small tmpfs that is filled up, so a call's INSERT cannot extend its
table (`53100 disk_full`): the whole batch is rolled back, the caller hears
`store_unavailable` saying so, nothing changed, and the same call converges once there is
room again.

Staging it mounts a tmpfs, which needs root (as CI runs); a developer who is not root skips
this one test, saying why (never in CI).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from lineup_build.trust import TrustStore
from lineup_runtime_lite import HostSimulator, Runtime, VirtualClock
from lineup_sdk.errors import LineupError
from tests.faults import invariants
from tests.pg_kit import PgServer, fresh_database

SIZE = 4 * 1024 * 1024  # the tablespace's disk


@pytest.fixture
def small_disk() -> Iterator[Path]:
    """A 4 MiB tmpfs the `postgres` user owns (unmounted afterwards)."""
    if os.geteuid() != 0:
        reason = "staging a full disk mounts a tmpfs, which needs root"
        if os.environ.get("CI"):
            pytest.fail(f"{reason}: CI runs as root and must run this test", pytrace=False)
        pytest.skip(reason)
    mount = Path(tempfile.mkdtemp(prefix="lineup-pgdisk-", dir="/tmp"))
    mount.chmod(0o755)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={SIZE},mode=0755", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, f"mount tmpfs: {done.stderr}"
    try:
        space = mount / "space"
        space.mkdir()
        shutil.chown(space, "postgres", "postgres")
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)
        shutil.rmtree(mount, ignore_errors=True)


def _fill(mount: Path) -> Path:
    """Take every free block of the disk (a file beside the tablespace's folder)."""
    filler = mount / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        for chunk in (65536, 4096, 512):
            with contextlib.suppress(OSError):
                while True:
                    os.write(fd, b"\0" * chunk)
    finally:
        os.close(fd)
    stat = os.statvfs(mount)
    assert stat.f_bavail == 0
    return filler


def test_F21_disk_full_on_postgres_rolls_the_batch_back_and_the_retry_converges(
    pg_server: PgServer, small_disk: Path, trust: TrustStore, probe_bundle: Path, tmp_path: Path
) -> None:
    url = fresh_database(pg_server)
    database = url.rsplit("/", 1)[1]
    space = f"full_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_server.url(), autocommit=True) as admin:
        admin.execute(f"CREATE TABLESPACE {space} LOCATION '{small_disk / 'space'}'")
        admin.execute(f'ALTER DATABASE "{database}" SET default_tablespace = {space}')
    try:
        host = HostSimulator(policy="manual")
        with Runtime.open(
            url, trust=trust, clock=VirtualClock(), host=host, apps_dir=tmp_path / "apps"
        ) as rt:
            rt.install(probe_bundle)
            first = rt.call("w", "c1", "probe.echo", {"text": "up"})
            assert first["stage"] == "accepted"
            rt.settle()
            filler = _fill(small_disk)
            before = rt.store_dump()
            big = {"text": "x" * 300_000}  # its row needs new pages: the disk is full
            with pytest.raises(LineupError) as exc:
                rt.call("big", "c1", "probe.echo", big)
            assert exc.value.code == "store_unavailable"
            assert "space" in exc.value.message.lower(), exc.value.message
            rt.settle()
            invariants.assert_unchanged(before, rt.store_dump())
            filler.unlink()  # room again
            assert rt.call("big", "c1", "probe.echo", big)["result"] == big["text"]
            rt.settle()
            invariants.check(rt)
    finally:
        with psycopg.connect(pg_server.url(), autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
            admin.execute(f"DROP TABLESPACE IF EXISTS {space}")
