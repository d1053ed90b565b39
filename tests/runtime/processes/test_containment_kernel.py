"""Containment, round 3 (SPEC 13.3): file metadata, processes and memory over the worker
tree, and what a killed runtime leaves behind.

`apps/kernel` tries each attack and reports what happened; the tests assert the refusal
and that the victim files, the database and the trust store are unchanged. The memory and
process caps are asserted where `rt.sandbox` reports the mechanism — and in CI (root, this
machine kind) it must report a memory and a pids cgroup, so nothing is skipped there.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lineup_runtime_lite import Runtime, VirtualClock
from lineup_runtime_lite.core.messages import AgentMessage
from lineup_sdk.sandbox import probe, simulate_unavailable
from tests.sandbox_kit import pid_alive, poll

SCOPE = "kernel"
IN_CI = os.environ.get("CI") == "true"
#: Every attempt `kernel_app.ops.attempts` makes.
ATTEMPTS = (
    *("chmod", "fchmod", "fchmodat", "chown", "fchown", "lchown", "utime", "futime"),
    *("setxattr", "removexattr", "setflags", "fssetxattr"),
    # flags the kernel lets an owner set: only the filter refuses them (FS_APPEND_FL above
    # is refused by the kernel anyway)
    *("setflags_nodump", "setflags_noatime"),
)
#: The attempts through a descriptor (of the file, or of its folder for `fchmodat`): on a
#: file Landlock does not let it open, the open is refused first (EACCES); on one it may
#: read, the change itself must be (EPERM).
THROUGH_FD = (
    *("fchmod", "fchmodat", "fchown", "futime"),
    *("setflags", "setflags_nodump", "setflags_noatime", "fssetxattr"),
)
_ids = iter(range(1, 1 << 30))
#: The battery runs under both `isolation` values (decision record 0007, "Tests").
both_isolations = pytest.mark.parametrize("isolation", ["app", "session"])


@pytest.fixture()
def open_runtime(file_runtime: Callable[..., Runtime]) -> Callable[..., Runtime]:
    return file_runtime


def final(rt: Runtime, method: str, params: Any, conversation: str = "conv") -> AgentMessage:
    call_id = f"k{next(_ids)}"
    msg = rt.call(call_id, conversation, method, params)
    if msg["stage"] == "accepted":
        rt.settle()
        (msg,) = [
            m for m in rt.outbox.all() if m["id"] in (f"{call_id}:result", f"{call_id}:error")
        ]
    return msg


def result(rt: Runtime, method: str, params: Any | None = None) -> Any:
    msg = final(rt, method, params or {})
    assert msg["kind"] == "result", msg
    return msg["result"]


def fingerprint(path: Path) -> tuple[Any, ...]:
    """What a metadata change could alter: mode, owner, modification time, xattrs, inode
    flags (not the access time: reading the file moves it)."""
    st = os.lstat(path)
    try:
        xattrs = sorted(os.listxattr(path))
    except OSError:
        xattrs = []
    flags: bytes | None = None
    with contextlib.suppress(OSError):
        import fcntl

        fd = os.open(path, os.O_RDONLY)
        try:
            flags = fcntl.ioctl(fd, 0x80086601, bytes(8))  # FS_IOC_GETFLAGS
        finally:
            os.close(fd)
    return (st.st_mode, st.st_uid, st.st_gid, st.st_mtime_ns, xattrs, flags)


def needs(report: dict[str, Any], key: str, word: str) -> None:
    """Skip (locally only) where this platform lacks the mechanism the test exercises."""
    got = report.get(key) or ""
    if word not in got:
        assert not IN_CI, f"CI must have {word} for {key}: {report}"
        pytest.skip(f"no {word} here ({key}: {got or 'not enforced'})")


# -- file metadata ---------------------------------------------------------------------
@pytest.fixture()
def victims(tmp_path: Path) -> dict[str, Path]:
    """Host files a handler must not touch: a private file and a root-style executable."""
    private = tmp_path / "victim" / "secret.txt"
    private.parent.mkdir()
    private.write_text("secret")
    private.chmod(0o600)
    tool = private.parent / "tool"
    shutil.copy(shutil.which("true") or "/bin/true", tool)
    tool.chmod(0o755)
    return {"private": private, "executable": tool}


@both_isolations
def test_metadata_changes_on_host_files_are_refused_and_nothing_changes(
    open_runtime: Callable[..., Runtime],
    kernel_bundle: Path,
    victims: dict[str, Path],
    trust_file: Path,
    tmp_path: Path,
    isolation: str,
) -> None:
    rt = open_runtime(kernel_bundle, isolation=isolation)
    assert rt.sandbox["metadata"] is None or "seccomp" in rt.sandbox["metadata"]
    installed = tmp_path / "rt0" / "rt.db.apps" / SCOPE / "1.0.0"
    targets = {
        **victims,
        "database": tmp_path / "rt0" / "rt.db",
        "trust store": trust_file,
        # files the worker may read: opened read-only, then changed through the descriptor
        "installed module": installed / "kernel_app" / "ops.py",
        "installed folder": installed,
    }
    before = {name: fingerprint(path) for name, path in targets.items()}
    for name, path in targets.items():
        got = result(rt, "kernel.meta", {"path": str(path)})
        readable = name.startswith("installed")
        # fchmodat opens the file's folder: the installed module's folder is readable,
        # the installed version folder's parent (the scope's folder) is not
        folder_readable = name == "installed module"
        assert got == {
            attempt: "EPERM"
            if (folder_readable if attempt == "fchmodat" else readable) or attempt not in THROUGH_FD
            else got[attempt]
            for attempt in ATTEMPTS
        }, (name, got)
        assert all(got[a] in ("EACCES", "EPERM") for a in THROUGH_FD), (name, got)
    assert rt.sandbox["metadata"] and "seccomp" in rt.sandbox["metadata"]
    after = {name: fingerprint(path) for name, path in targets.items()}
    assert after == before
    assert stat.S_IMODE(os.stat(victims["private"]).st_mode) == 0o600
    assert not os.stat(victims["executable"]).st_mode & stat.S_ISUID
    rt.close()  # the runtime reopens its own files afterwards
    reopened = Runtime.open(tmp_path / "rt0" / "rt.db", trust=trust_file, clock=VirtualClock())
    reopened.close()


@both_isolations
def test_metadata_changes_in_the_private_tmp_are_refused_too(
    open_runtime: Callable[..., Runtime], kernel_bundle: Path, isolation: str
) -> None:
    rt = open_runtime(kernel_bundle, isolation=isolation)
    got = result(rt, "kernel.tmp_meta")
    assert {k: got[k] for k in ATTEMPTS} == dict.fromkeys(ATTEMPTS, "EPERM"), got
    # what that means for authors (README): copy the bytes, not the mode
    assert got["shutil.copyfile"] == "ok" and got["shutil.copy"] == "EPERM", got


@both_isolations
def test_link_and_rename_of_host_files_are_refused(
    open_runtime: Callable[..., Runtime],
    kernel_bundle: Path,
    victims: dict[str, Path],
    isolation: str,
) -> None:
    rt = open_runtime(kernel_bundle, isolation=isolation)
    source = victims["private"]
    before = fingerprint(source)
    got = result(rt, "kernel.relink", {"source": str(source), "target": str(source) + ".moved"})
    assert set(got) == {"link", "rename", "link_into_tmp"}
    assert all(v in ("EACCES", "EPERM", "EXDEV") for v in got.values()), got
    assert source.read_text() == "secret" and fingerprint(source) == before
    assert not Path(str(source) + ".moved").exists()


def test_the_metadata_rule_is_part_of_required(
    open_runtime: Callable[..., Runtime], kernel_bundle: Path
) -> None:
    with simulate_unavailable("seccomp"):
        report = probe("required")
        rt = open_runtime(kernel_bundle, sandbox="required")
        msg = final(rt, "kernel.echo", {"text": "x"})
    assert report["metadata"] is None and "metadata" in str(report["refused"]), report
    assert msg["kind"] == "error" and msg["error"]["code"] == "activation_failed", msg
    assert msg["error"]["details"]["cause"] == "sandbox_unavailable"


# -- memory over the worker tree --------------------------------------------------------
@both_isolations
def test_a_shared_mapping_over_the_cap_ends_the_delivery_as_memory_limit(
    open_runtime: Callable[..., Runtime], kernel_bundle: Path, isolation: str
) -> None:
    rt = open_runtime(kernel_bundle, worker_memory_mb=128, isolation=isolation)
    assert result(rt, "kernel.echo", {"text": "up"}) == "up"
    needs(rt.sandbox, "memory", "memory cgroup")
    msg = final(rt, "kernel.shared_mmap", {"mb": 256})
    assert msg["kind"] == "error", msg
    assert msg["error"]["code"] == "delivery_interrupted", msg
    assert msg["error"]["details"] == {"reason": "memory_limit"}, msg
    # the app recovers with a new worker
    assert result(rt, "kernel.echo", {"text": "again"}) == "again"
    assert result(rt, "kernel.shared_mmap", {"mb": 32}) == "ok"


@both_isolations
def test_children_cannot_each_take_the_whole_cap(
    open_runtime: Callable[..., Runtime], kernel_bundle: Path, isolation: str
) -> None:
    rt = open_runtime(kernel_bundle, worker_memory_mb=128, isolation=isolation)
    assert result(rt, "kernel.echo", {"text": "up"}) == "up"
    needs(rt.sandbox, "memory", "memory cgroup")
    msg = final(rt, "kernel.children", {"count": 3, "mb": 80})
    if msg["kind"] == "error":  # the worker itself was the one the kernel killed
        assert msg["error"]["code"] == "delivery_interrupted", msg
        assert msg["error"]["details"] == {"reason": "memory_limit"}, msg
    else:  # 3 x 80 MiB never fit under 128 MiB at once: the kernel killed some children
        assert msg["result"]["alive"] <= 1, msg
    assert result(rt, "kernel.echo", {"text": "again"}) == "again"


# -- processes -------------------------------------------------------------------------
@both_isolations
@pytest.mark.parametrize("cap", [None, 32], ids=["default", "worker_processes=32"])
def test_a_fork_bomb_stops_at_the_cap_while_another_app_answers(
    open_runtime: Callable[..., Runtime],
    kernel_bundle: Path,
    probe_bundle: Path,
    cap: int | None,
    isolation: str,
) -> None:
    options = {} if cap is None else {"worker_processes": cap}
    rt = open_runtime(kernel_bundle, probe_bundle, **options, isolation=isolation)
    assert result(rt, "kernel.echo", {"text": "up"}) == "up"
    limit = cap or 64
    needs(rt.sandbox, "processes", "pids cgroup")
    assert rt.sandbox["processes"] == f"pids cgroup v1: {limit} tasks" or (
        rt.sandbox["processes"] == f"pids cgroup v2: {limit} tasks"
    )
    got = result(rt, "kernel.forks", {"limit": 10_000})
    assert got["refused"] == "EAGAIN" and 0 < got["forked"] < limit, got
    # the children are still there, holding every task the cap allows; others carry on
    assert result(rt, "probe.echo", {"text": "still here"}) == "still here"
    assert result(rt, "kernel.reap") == got["forked"]
    assert result(rt, "kernel.echo", {"text": "back"}) == "back"


ROOT = os.geteuid() == 0


@both_isolations
@pytest.mark.parametrize(
    ("missing", "says", "bound"),
    [
        (("cgroups",), "pid namespace pid_max: 300 tasks", 300),
        # the kernel ignores RLIMIT_NPROC for uid 0: a root runtime reports no cap at all
        (("cgroups", "pid_max"), None if ROOT else "RLIMIT_NPROC: 64 tasks (user namespace)", 64),
    ],
    ids=["pid_max", "rlimit"],
)
def test_without_a_pids_cgroup_the_fallback_cap_holds_and_is_reported(
    open_runtime: Callable[..., Runtime],
    kernel_bundle: Path,
    missing: tuple[str, ...],
    says: str,
    bound: int,
    isolation: str,
) -> None:
    with simulate_unavailable(*missing):
        rt = open_runtime(kernel_bundle, isolation=isolation)
        assert result(rt, "kernel.echo", {"text": "up"}) == "up"
    if says is not None and rt.sandbox["processes"] is None and not IN_CI:
        pytest.skip(f"no {missing[-1]} fallback on this kernel: {rt.sandbox}")
    assert rt.sandbox["processes"] == says, rt.sandbox
    if says is None:
        return
    got = result(rt, "kernel.forks", {"limit": 10_000})
    assert got["refused"] == "EAGAIN" and 0 < got["forked"] < bound, got
    assert result(rt, "kernel.reap") == got["forked"]


@both_isolations
def test_without_cgroups_the_memory_cap_is_reported_as_per_process(
    open_runtime: Callable[..., Runtime], kernel_bundle: Path, isolation: str
) -> None:
    with simulate_unavailable("cgroups"):
        rt = open_runtime(kernel_bundle, worker_memory_mb=256, isolation=isolation)
        assert result(rt, "kernel.echo", {"text": "up"}) == "up"
    assert rt.sandbox["memory"] == (
        "data 256 MiB per process only (no memory cgroup: not the whole tree)"
    ), rt.sandbox


@pytest.mark.parametrize("value", [0, 15, 32769, "64", True, 64.0])
def test_worker_processes_out_of_range_is_usage_invalid(
    tmp_path: Path, trust_file: Path, value: Any
) -> None:
    from lineup_sdk.errors import LineupError

    with pytest.raises(LineupError) as info:
        Runtime.open(tmp_path / "rt.db", trust=trust_file, worker_processes=value)
    assert info.value.code == "usage_invalid"
    assert "worker_processes" in info.value.message
    assert not (tmp_path / "rt.db").exists()


# -- what a killed runtime leaves -------------------------------------------------------
KILLED_RUNTIME = """
import json, sys
from pathlib import Path
from lineup_runtime_lite import HostSimulator, Runtime, VirtualClock
rt = Runtime.open(Path(sys.argv[1]) / "rt.db", trust=sys.argv[2], clock=VirtualClock(),
                  host=HostSimulator(policy="manual"), isolation=sys.argv[4])
rt.install(sys.argv[3])
msg = rt.call("c1", "conv", "kernel.tmp_meta", {})
rt.settle()
print(json.dumps({"tmp": rt.sandbox["tmp"], "pid": __import__("os").getpid()}), flush=True)
import threading
threading.Event().wait()
"""


def _leftovers(pid: int) -> list[str]:
    found = [str(p) for p in Path(tempfile.gettempdir()).glob(f"lineup-sbx-{pid}-*")]
    for root in (Path("/sys/fs/cgroup/pids"), Path("/sys/fs/cgroup/memory")):
        found += [str(p) for p in root.rglob(f"lineup-{pid}")] if root.is_dir() else []
    return found


@both_isolations
def test_a_killed_runtimes_cgroups_and_sandbox_folders_go_at_the_next_open(
    tmp_path: Path, trust_file: Path, kernel_bundle: Path, isolation: str
) -> None:
    proc = subprocess.Popen(
        [
            *(sys.executable, "-c", KILLED_RUNTIME, str(tmp_path), str(trust_file)),
            *(str(kernel_bundle), isolation),
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).parents[3],
    )
    try:
        assert proc.stdout is not None
        pid = int(json.loads(proc.stdout.readline())["pid"])
        left = _leftovers(pid)
        assert [p for p in left if "lineup-sbx-" in p], left  # its worker's private folder
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert not pid_alive(pid)
        # the worker tree follows its runtime; its folders and groups stay behind
        assert poll(lambda: _leftovers(pid) and not _busy(pid), within_s=10)
        rt = Runtime.open(tmp_path / "second.db", trust=trust_file, clock=VirtualClock())
        rt.close()
        assert _leftovers(pid) == []
    finally:
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def _busy(pid: int) -> bool:
    """Whether a group of `pid`'s runtime still holds a task (its tree still exiting)."""
    for root in (Path("/sys/fs/cgroup/pids"), Path("/sys/fs/cgroup/memory")):
        if not root.is_dir():
            continue
        for procs in root.rglob(f"lineup-{pid}/**/cgroup.procs"):
            with contextlib.suppress(OSError):
                if procs.read_text().strip():
                    return True
    return False
