"""The checks that decide whether a process, its entry imported, may serve as the warm
image of an app version (decision record 0007): single-threaded, no shared mapping a
fork could write, no descriptor but its own, no child. The parsers on fixed texts; the
whole check in fresh interpreters that do at import what an app could."""

from __future__ import annotations

import subprocess
import sys

import pytest

from lineup_sdk.sandbox.forks import risky_shared_mappings, stray_descriptors, threads_in

MAPS = """\
55d0c0a00000-55d0c0a01000 r--p 00000000 fe:00 1234     /usr/bin/python3.11
7f71dfa05000-7f71dfa06000 rw-p 00000000 00:00 0
7f71dfa06000-7f71dfa0d000 r--s 00000000 fe:00 338846   /usr/lib/x86_64-linux-gnu/gconv/gconv-modules.cache
7ffd1c9e0000-7ffd1ca01000 rw-p 00000000 00:00 0        [stack]
"""


def test_a_plain_interpreters_maps_hold_no_risky_shared_mapping() -> None:
    # glibc maps gconv-modules.cache shared but read-only, from a file opened read-only
    assert risky_shared_mappings(MAPS) == []


@pytest.mark.parametrize(
    ("line", "named"),
    [
        ("7f00-7f01 rw-s 00000000 00:01 5356   /dev/zero (deleted)", "/dev/zero (deleted)"),
        ("7f00-7f01 r--s 00000000 00:01 5356   /dev/zero (deleted)", "/dev/zero (deleted)"),
        ("7f00-7f01 rw-s 00000000 00:01 77     /memfd:x (deleted)", "/memfd:x (deleted)"),
        ("7f00-7f01 r--s 00000000 00:01 77     /memfd:ro (deleted)", "/memfd:ro (deleted)"),
        ("7f00-7f01 rw-s 00000000 00:01 0      /SYSV00000000 (deleted)", "/SYSV00000000 (deleted)"),
        ("7f00-7f01 r--s 00000000 00:19 9      /dev/shm/region", "/dev/shm/region"),
        (
            "7f00-7f01 r--s 00000000 00:2a 4      /tmp/lineup-sbx-1-x/shared",
            "/tmp/lineup-sbx-1-x/shared",
        ),
        ("7f00-7f01 rw-s 00000000 fe:00 12     /srv/app/data.bin", "/srv/app/data.bin"),
        ("7f00-7f01 rw-s 00000000 00:00 0", "[anonymous]"),
    ],
)
def test_a_shared_mapping_a_fork_could_write_is_named(line: str, named: str) -> None:
    assert risky_shared_mappings(MAPS + line + "\n", ["/tmp/lineup-sbx-1-x"]) == [named]


def test_private_mappings_and_read_only_shared_files_outside_the_tmp_pass() -> None:
    line = "7f00-7f01 r--s 00000000 fe:00 12     /tmp/lineup-sbx-1-xy/not-under"
    assert risky_shared_mappings(MAPS + line, ["/tmp/lineup-sbx-1-x"]) == []


def test_threads_and_descriptors_are_read_as_counted() -> None:
    assert threads_in("Name:\tpython\nThreads:\t3\nSigQ:\t0/1\n") == 3
    assert threads_in("Name:\tpython\n") == 0
    assert stray_descriptors([0, 1, 2, 5, 9, 7], keep=[5]) == [7, 9]


def _checked(setup: str, cleanup: str = "") -> str:
    """What `image_checks` says in a fresh interpreter after `setup` ran (an import);
    `cleanup` runs after it (a child it started is stopped)."""
    code = (
        f"{setup}\n"
        "from lineup_sdk._image import image_checks\n"
        "print('REASON', image_checks(), flush=True)\n"
        f"{cleanup}\n"
    )
    out = subprocess.run(
        [sys.executable, "-I", "-c", code],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    return out.rsplit("REASON ", 1)[1].strip()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self")
@pytest.mark.parametrize(
    ("setup", "reason"),
    [
        ("import asyncio, json, lineup_sdk._worker", "None"),
        ("import mmap\nREGION = mmap.mmap(-1, 4096)", "a shared mapping made at import"),
        ("import socket\nPAIR = socket.socketpair()", "descriptors left open by the import"),
        ("import os\nFH = open(os.devnull)", "descriptors left open by the import"),
        (
            "import threading, time\n"
            "threading.Thread(target=time.sleep, args=(30,), daemon=True).start()",
            "2 threads after the import",
        ),
        (
            "import subprocess\nP = subprocess.Popen(['sleep', '30'], stdin=-3, stdout=-3, stderr=-3)",
            "processes started by the import",
        ),
    ],
    ids=["plain", "map-shared", "socket", "file", "thread", "child"],
)
def test_what_an_import_leaves_decides_whether_it_may_serve_as_an_image(
    setup: str, reason: str
) -> None:
    got = _checked(setup, "P.kill(); P.wait()" if "Popen" in setup else "")
    assert got.startswith(reason), got
