"""What keeps a worker forked from a warm image to itself whatever code the image left in
it (decision record 0007, "As built"): the second seccomp filter it stacks at `go`, and
the runtime's own look at each fork from outside before `go` (its user namespace, its
descriptors, its shared mappings)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from lineup_runtime_lite import HostSimulator, Runtime
from lineup_runtime_lite.internals import engine_of
from lineup_runtime_lite.processes.image import Image, ImageError
from tests.runtime.processes.containment_kit import needs_warm_image, result
from tests.sandbox_kit import pid_alive, poll

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")

SESSION_FILTER = r"""
import ctypes, errno, json, os, threading
from lineup_sdk.sandbox import _linux as k

def attempt(fn):
    try:
        fn()
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc.errno))
    return "ok"

def clone3():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    if libc.syscall(ctypes.c_long(435), None, ctypes.c_size_t(0)) < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))

def thread():
    done = []
    t = threading.Thread(target=lambda: done.append(1))
    t.start()
    t.join()
    assert done

k.no_new_privs()
k.install_session_filter()
pidfd = os.pidfd_open(os.getpid())
print(json.dumps({
    "unshare": attempt(lambda: k.unshare(k.CLONE_NEWUSER)),
    "pidfd_getfd": attempt(lambda: k.pidfd_getfd(pidfd, 0)),
    "clone3": attempt(clone3),
    "thread": attempt(thread),
}))
"""


def test_the_session_filter_refuses_new_namespaces_and_other_descriptors_and_keeps_threads() -> (
    None
):
    """A forked worker's second filter: no new namespace (`unshare`), no descriptor of
    another process (`pidfd_getfd`); `clone3` answers ENOSYS so libc starts threads with
    `clone`, which still works."""
    got = subprocess.run(
        [sys.executable, "-c", SESSION_FILTER],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        cwd=Path(__file__).parents[3],
    )
    out = json.loads(got.stdout)
    assert out["unshare"] == "EPERM", out
    assert out["pidfd_getfd"] == "EPERM", out
    assert out["clone3"] == "ENOSYS", out
    assert out["thread"] == "ok", out


@pytest.fixture()
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    """A process holding one descriptor beyond a forked worker's ten (a pipe's)."""
    r, w = os.pipe()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(60)"], pass_fds=(r,)
        )
    finally:
        os.close(r)
        os.close(w)
    yield proc
    proc.kill()
    proc.wait()


def _image(tmp_path: Path) -> Image:
    return Image(
        tmp_path, "x", tmp_path / "log", sandbox="best_effort", memory_mb=None, processes=None
    )


def test_a_fork_holding_a_descriptor_beyond_its_own_is_refused_before_go(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    """The runtime reads the fork's descriptors itself: any beyond its own ten (one an
    at-fork hook or a patched `os.closerange` kept) refuses it."""
    image = _image(tmp_path)
    with pytest.raises(ImageError, match="descriptors"):
        image._check_worker(sleeper.pid)


def test_a_fork_left_in_the_images_user_namespace_is_refused_before_go(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    """A fork that did not enter its own user namespace (code left in the image skipped
    it) is refused, whatever it holds."""
    image = _image(tmp_path)
    image._userns = os.stat(f"/proc/{sleeper.pid}/ns/user").st_ino
    with pytest.raises(ImageError, match="user namespace"):
        image._check_worker(sleeper.pid)


def test_an_image_stops_with_its_versions_last_session_worker(
    file_runtime: Callable[..., Runtime], kernel_bundle: Path
) -> None:
    """The idle sweep that recycles a version's last session worker stops its image too
    (its launcher, the image and its spare forks); the next session starts a new one."""
    needs_warm_image()
    host = HostSimulator(policy="auto")
    rt = file_runtime(kernel_bundle, host=host, isolation="session", session_idle_s=0.2)
    result(rt, "x", "kernel.remember", {"value": "x"})
    pool = engine_of(rt).pool
    (image,) = pool.images.values()
    assert image.warm and image.pid is not None
    launcher = image.pid
    assert poll(lambda: not engine_of(rt).workers and not pool.images, within_s=10)
    assert poll(lambda: not pid_alive(launcher), within_s=5), "the image outlived its sessions"
    assert result(rt, "y", "kernel.remember", {"value": "y"})["before"] == {}
    assert rt.sandbox["image"] == {"state": "warm", "reason": None}
