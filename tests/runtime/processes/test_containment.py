"""Containment of MiniApp code at run time (SPEC 8): a hostile MiniApp tries every escape.

Each tool of `apps/hostile` tries one escape and reports what happened; each test asserts
the escape is closed (and the stable code where there is one), and that the runtime and
other conversations carry on beyond the documented recycle. Real-time mechanisms
(handler timeouts, the heartbeat) run with small settings, and the tests poll for their
observable effect with a bounded loop instead of sleeping for a deadline.
"""

from __future__ import annotations

import colorsys
import concurrent.futures
import contextlib
import json
import os
import shutil
import socket
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from lineup_build.signing import SigningKey
from lineup_build.trust import TrustedKey, TrustStore
from lineup_build.verify import check_bundle
from lineup_runtime_lite import HostSimulator, Runtime, VirtualClock
from lineup_runtime_lite.internals import engine_of
from lineup_sdk.errors import LineupError
from lineup_sdk.sandbox import REPORT_KEYS, describe, probe, simulate_unavailable
from tests.runtime.conftest import APPS, build_app
from tests.runtime.processes.containment_kit import (
    SCOPE,
    VERSION,
    _ids,
    error_code,
    final,
    host_pid,
    log_line,
    log_path,
    result,
    worker,
)
from tests.sandbox_kit import io_uring_enabled, pid_alive, poll

#: What may reach a worker's environment besides `LC_*` and `worker_env` (SPEC 8).
ENV_ALLOWED = {"PATH", "LANG", "TZ", "HOME", "TMPDIR"}
REFUSED = ("EACCES", "EPERM")
TRUNCATION_NOTE = b"[lineup: worker log truncated at its size limit]"


# -- fixtures and helpers --------------------------------------------------------------
@pytest.fixture(scope="module")
def hostile_bundle(tmp_path_factory: pytest.TempPathFactory, rt_key: SigningKey) -> Path:
    return build_app(APPS / "hostile", tmp_path_factory.mktemp("hostile") / "hostile", rt_key)


@pytest.fixture(scope="module")
def net_bundle(tmp_path_factory: pytest.TempPathFactory, rt_key: SigningKey) -> Path:
    """The same app asking for the network (`[app.permissions] network = true`)."""
    root = tmp_path_factory.mktemp("hostile-net") / "hostile"
    shutil.copytree(APPS / "hostile", root)
    toml = root / "lineup.toml"
    toml.write_text(toml.read_text() + "\n[app.permissions]\nnetwork = true\n")
    return build_app(root, tmp_path_factory.mktemp("hostile-net-build") / "hostile", rt_key)


def trusted(
    key: SigningKey, scopes: tuple[str, ...] = ("*",), allow: tuple[str, ...] = ()
) -> TrustStore:
    return TrustStore.from_keys([TrustedKey(key.key_id, key.public_raw, scopes, "t", allow)])


def open_rt(tmp_path: Path, trust: Any, **options: Any) -> Runtime:
    return Runtime.open(
        tmp_path / "rt.db",
        trust=trust,
        clock=VirtualClock(),
        host=HostSimulator(policy="manual"),
        **options,
    )


@pytest.fixture()
def open_runtime(tmp_path: Path) -> Iterator[Callable[..., Runtime]]:
    """Open runtimes on files under `tmp_path` (each closed at the end of the test)."""
    opened: list[Runtime] = []

    def go(trust: Any, *bundles: Path, sub: str = "rt", **options: Any) -> Runtime:
        folder = tmp_path / sub
        folder.mkdir()
        rt = open_rt(folder, trust, **options)
        opened.append(rt)
        for bundle in bundles:
            rt.install(bundle)
        return rt

    yield go
    for rt in opened:
        rt.close()


#: The battery runs under both `isolation` values where its rule holds for every worker,
#: however conversations are split among them (decision record 0007, "Tests").
both_isolations = pytest.mark.parametrize("isolation", ["app", "session"])


@pytest.fixture()
def isolation() -> str:
    """The `isolation` the fixtures' runtimes use (`both_isolations` runs a test under each)."""
    return "app"


@pytest.fixture()
def hostile(
    open_runtime: Callable[..., Runtime],
    trust: TrustStore,
    hostile_bundle: Path,
    probe_bundle: Path,
    isolation: str,
) -> Runtime:
    """A runtime with the hostile app and the probe app installed, on files."""
    return open_runtime(trust, hostile_bundle, probe_bundle, isolation=isolation)


# -- what the worker starts with -------------------------------------------------------
def test_a_shadowing_json_module_in_the_bundle_never_runs(hostile: Runtime) -> None:
    got = result(hostile, "conv", "hostile.shadows")
    app_dir = engine_of(hostile).apps_dir / SCOPE / VERSION
    # the worker still serves calls, and both names resolve to the standard library
    assert got["json_ran"] is False and got["colorsys_ran"] is False
    for module in (json, colorsys):
        assert got[module.__name__] == module.__file__, got
        assert not Path(got[module.__name__]).is_relative_to(app_dir), got
    # the app folder is on sys.path only after the standard library and site-packages
    assert got["app_dir_on_path_at"] == [got["path_len"] - 1]


def test_the_worker_environment_is_the_allow_list_and_worker_env(
    open_runtime: Callable[..., Runtime],
    trust: TrustStore,
    hostile_bundle: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LINEUP_SIGNING_KEY", "-----BEGIN PRIVATE KEY----- secret")
    monkeypatch.setenv("LINEUP_SIGNING_KEY_PASSPHRASE", "hunter2")
    monkeypatch.setenv("HOSTILE_CANARY", "from the runtime's environment")
    monkeypatch.setenv("PYTHONPATH", "/nowhere")
    rt = open_runtime(trust, hostile_bundle, worker_env={"APP_MODE": "demo"})
    env = result(rt, "conv", "hostile.env")
    assert not any(name.startswith("LINEUP_SIGNING") for name in env), env
    for secret in ("secret", "hunter2", "from the runtime's environment", "/nowhere"):
        assert secret not in str(env)
    extra = {k for k in env if k not in ENV_ALLOWED and not k.startswith("LC_")}
    assert extra == {"APP_MODE"}, env
    assert env["APP_MODE"] == "demo"
    assert env["HOME"] == env["TMPDIR"] != str(Path.home())


# -- files -----------------------------------------------------------------------------
def _targets(rt: Runtime, tmp_path: Path) -> dict[str, Path]:
    apps = engine_of(rt).apps_dir
    return {
        "runtime-database": tmp_path / "rt" / "rt.db",
        "trust-store": tmp_path / "trust.toml",
        "other-app-file": apps / "probe" / VERSION / "probe_app" / "tools.py",
        "other-app-folder": apps / "probe" / VERSION / "probe_app",
        "home-folder": Path.home(),
        "etc-passwd": Path("/etc/passwd"),
        "runtime-process-environ": Path(f"/proc/{os.getpid()}/environ"),
        "host-tmp": Path(tempfile.gettempdir()),
        "dev-shm": Path("/dev/shm"),
        "logs-folder": engine_of(rt).logs_dir,
        "own-log": log_path(rt),
    }


@pytest.fixture()
def hostile_on_trust_file(
    open_runtime: Callable[..., Runtime],
    tmp_path: Path,
    rt_key: SigningKey,
    hostile_bundle: Path,
    probe_bundle: Path,
    isolation: str,
) -> Runtime:
    trusted(rt_key).save(tmp_path / "trust.toml")
    rt = open_runtime(tmp_path / "trust.toml", hostile_bundle, probe_bundle, isolation=isolation)
    result(rt, "conv", "hostile.echo", {"text": "up"})  # the worker (and its log) exist
    return rt


@both_isolations
@pytest.mark.parametrize(
    "target",
    [
        "runtime-database",
        "trust-store",
        "other-app-file",
        "other-app-folder",
        "home-folder",
        "etc-passwd",
        "runtime-process-environ",
    ],
)
def test_the_worker_cannot_read_outside_its_app(
    hostile_on_trust_file: Runtime, tmp_path: Path, target: str
) -> None:
    rt = hostile_on_trust_file
    path = _targets(rt, tmp_path)[target]
    assert path.exists()
    # (a worker with a /proc of its own PID namespace finds no such process there)
    refused = (*REFUSED, "ENOENT") if target == "runtime-process-environ" else REFUSED
    assert result(rt, "conv", "hostile.read", {"path": str(path)}) in refused
    # the control: the same tool reads the app's own files
    own = engine_of(rt).apps_dir / SCOPE / VERSION / "hostile_app" / "tools.py"
    assert result(rt, "conv", "hostile.read", {"path": str(own)}) == "ok"


@both_isolations
@pytest.mark.parametrize(
    "target",
    [
        "runtime-database",
        "trust-store",
        "other-app-file",
        "other-app-folder",
        "home-folder",
        "logs-folder",
        "own-log",
        "own-app-folder",
        "own-app-file",
        "host-tmp",
        "dev-shm",
    ],
)
def test_the_worker_cannot_write_outside_its_temp_folder(
    hostile_on_trust_file: Runtime, tmp_path: Path, target: str
) -> None:
    rt = hostile_on_trust_file
    own = engine_of(rt).apps_dir / SCOPE / VERSION
    path = {
        **_targets(rt, tmp_path),
        "own-app-folder": own / "hostile_app",
        "own-app-file": own / "hostile_app" / "tools.py",
    }[target]
    # what the worker wrote, not what the machine did (other processes touch the host's
    # temporary folder, the runtime its database and log): its write was refused, and
    # neither the file it tried to create nor its marker is there
    assert result(rt, "conv", "hostile.write", {"path": str(path)}) in REFUSED
    if path.is_dir():
        assert not (path / "hostile-was-here").exists()
    else:
        assert not path.read_bytes().endswith(b"hostile-was-here")
    # and nothing the app did trips the install check: it still serves calls
    assert result(rt, "conv2", "hostile.echo", {"text": "still"}) == "still"


@both_isolations
def test_workers_write_no_bytecode(hostile: Runtime) -> None:
    result(hostile, "conv", "hostile.shadows")
    assert not list((engine_of(hostile).apps_dir / SCOPE).rglob("__pycache__"))


# -- network ---------------------------------------------------------------------------
@contextlib.contextmanager
def listeners(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """A TCP and a UDP listener on 127.0.0.1 and a unix-socket listener, non-blocking."""
    tcp = socket.create_server(("127.0.0.1", 0))
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    path = tmp_path / "listen.sock"
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    unix.bind(str(path))
    unix.listen()
    for s in (tcp, udp, unix):
        s.setblocking(False)
    try:
        yield {"tcp": tcp, "udp": udp, "unix": unix, "unix_path": str(path)}
    finally:
        for s in (tcp, udp, unix):
            s.close()


def _reached(kind: str, socks: dict[str, Any]) -> bool:
    """Whether anything arrived (loopback delivery is done by the time send/connect return)."""
    try:
        if kind == "udp":
            socks["udp"].recvfrom(64)
        else:
            conn, _ = socks[kind].accept()
            conn.close()
    except BlockingIOError:
        return False
    return True


def _attempt(rt: Runtime, kind: str, socks: dict[str, Any]) -> str:
    if kind == "unix":
        return str(result(rt, "conv", "hostile.unix", {"path": socks["unix_path"]}))
    port = socks[kind].getsockname()[1]
    return str(result(rt, "conv", f"hostile.{kind}", {"port": port}))


@both_isolations
@pytest.mark.parametrize("kind", ["tcp", "udp", "unix"])
def test_without_the_grant_no_connection_leaves_the_worker(
    hostile: Runtime, tmp_path: Path, kind: str
) -> None:
    with listeners(tmp_path) as socks:
        outcome = _attempt(hostile, kind, socks)
        assert not _reached(kind, socks), outcome
    assert outcome != "ok" or kind == "udp", outcome  # a datagram may leave into the void
    if kind == "unix":
        assert outcome == "EACCES"  # refused by the seccomp filter, before any path lookup
    else:
        assert outcome in ("ok", "EACCES", "ENETUNREACH", "ECONNREFUSED"), outcome


@both_isolations
def test_an_abstract_unix_socket_is_refused_too(hostile: Runtime) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.bind("\0lineup-escape-test")
        s.listen()
        s.setblocking(False)
        assert result(hostile, "conv", "hostile.unix", {"path": "@lineup-escape-test"}) == "EACCES"
        with pytest.raises(BlockingIOError):
            s.accept()


def test_with_the_network_grant_tcp_and_udp_reach_the_host_but_unix_sockets_do_not(
    open_runtime: Callable[..., Runtime], rt_key: SigningKey, net_bundle: Path, tmp_path: Path
) -> None:
    rt = open_runtime(trusted(rt_key, allow=("network",)), net_bundle)
    with listeners(tmp_path) as socks:
        assert _attempt(rt, "tcp", socks) == "ok"
        assert poll(lambda: _reached("tcp", socks))
        assert _attempt(rt, "udp", socks) == "ok"
        assert poll(lambda: _reached("udp", socks))
        assert _attempt(rt, "unix", socks) == "EACCES"
        assert not _reached("unix", socks)
    assert worker(rt).sandbox["network"].startswith("granted")


needs_io_uring = pytest.mark.skipif(not io_uring_enabled(), reason="io_uring is disabled here")


@both_isolations
@needs_io_uring
def test_io_uring_cannot_connect_a_unix_socket_to_the_host(
    hostile: Runtime, tmp_path: Path
) -> None:
    with listeners(tmp_path) as socks:
        outcome = result(hostile, "conv", "hostile.uring_unix", {"path": socks["unix_path"]})
        reached = _reached("unix", socks)
    assert not reached and outcome != "ok", outcome


@both_isolations
@needs_io_uring
def test_io_uring_cannot_connect_tcp_or_abstract_unix_sockets(
    hostile: Runtime, tmp_path: Path
) -> None:
    with listeners(tmp_path) as socks:
        port = socks["tcp"].getsockname()[1]
        assert result(hostile, "conv", "hostile.uring_tcp", {"port": port}) in REFUSED  # Landlock
        assert not _reached("tcp", socks)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.bind("\0lineup-uring-test")
        s.listen()
        s.setblocking(False)
        outcome = result(hostile, "conv", "hostile.uring_unix", {"path": "@lineup-uring-test"})
        assert outcome != "ok"
        with pytest.raises(BlockingIOError):
            s.accept()


@both_isolations
def test_the_worker_cannot_signal_host_processes(hostile: Runtime) -> None:
    # the runtime's own pid names nothing in the worker's pid namespace
    assert result(hostile, "conv", "hostile.signal", {"pid": os.getpid()}) == "ESRCH"


@both_isolations
def test_the_data_memory_cap_holds(
    open_runtime: Callable[..., Runtime], trust: TrustStore, hostile_bundle: Path, isolation: str
) -> None:
    rt = open_runtime(trust, hostile_bundle, worker_memory_mb=128, isolation=isolation)
    assert result(rt, "conv", "hostile.alloc", {"mb": 256}) == "MemoryError"
    assert result(rt, "conv", "hostile.alloc", {"mb": 16}) == "ok"


# -- privileges ------------------------------------------------------------------------
@both_isolations
def test_a_worker_started_by_root_keeps_no_capabilities(hostile: Runtime) -> None:
    caps = result(hostile, "conv", "hostile.caps")
    zero = "0000000000000000"
    assert (caps["CapEff"], caps["CapPrm"], caps["CapBnd"]) == (zero, zero, zero), caps
    assert caps["CapAmb"] == caps["CapInh"] == zero, caps
    assert caps["NoNewPrivs"] == "1"


# -- temp folder -----------------------------------------------------------------------
@both_isolations
def test_filling_the_temp_folder_stops_at_its_bound_and_the_folder_goes_with_the_worker(
    open_runtime: Callable[..., Runtime], trust: TrustStore, hostile_bundle: Path, isolation: str
) -> None:
    rt = open_runtime(trust, hostile_bundle, isolation=isolation)
    got = result(rt, "conv", "hostile.fill_tmp", {"mb": 80})
    assert got["stopped"] == "ENOSPC", got
    assert got["written"] <= 64 << 20
    tmp = Path(got["tmp"])
    assert tmp.is_dir() and not (tmp / "fill").exists()  # a private tmpfs, not the host's disk
    rt.close()
    assert not tmp.exists()


# -- processes -------------------------------------------------------------------------
@both_isolations
def test_a_setsid_daemon_forked_by_a_handler_is_gone_after_close(
    open_runtime: Callable[..., Runtime], trust: TrustStore, hostile_bundle: Path, isolation: str
) -> None:
    rt = open_runtime(trust, hostile_bundle, isolation=isolation)
    named = result(rt, "conv", "hostile.daemon")  # as the worker's own /proc numbers it
    pid = host_pid(worker(rt).pid, named)
    assert pid_alive(pid) and pid != worker(rt).pid
    rt.close()
    assert poll(lambda: not pid_alive(pid), within_s=5), f"daemon {pid} survived close()"


KILLED_RUNTIME = """
import json, sys, threading
from pathlib import Path
from lineup_build.signing import key_from_seed
from lineup_build.trust import TrustedKey, TrustStore
from lineup_runtime_lite import HostSimulator, Runtime, VirtualClock
from lineup_runtime_lite.internals import engine_of
from tests.runtime.processes.containment_kit import host_pid

key = key_from_seed(bytes(range(1, 33)))
trust = TrustStore.from_keys([TrustedKey(key.key_id, key.public_raw, ("*",), "t")])
rt = Runtime.open(
    Path(sys.argv[1]) / "rt.db",
    trust=trust,
    clock=VirtualClock(),
    host=HostSimulator("manual"),
    isolation=sys.argv[5],
)
rt.install(sys.argv[2])
rt.call("w", "c", "hostile.echo", {"text": "x"})
rt.settle()
(worker,) = engine_of(rt).workers.values()  # the conversation's (its session's under session)
daemon = host_pid(worker.pid, rt.call("d", "c", "hostile.daemon", {})["result"])
print(json.dumps({"daemon": daemon, "worker": worker.pid}), flush=True)
if sys.argv[3] == "blocked":
    threading.Thread(target=rt.call, args=("b", "c", "hostile.block_loop", {})).start()
else:
    print("BLOCKING (not really)", flush=True, file=open(sys.argv[4], "a"))
threading.Event().wait()
"""


@both_isolations
@pytest.mark.parametrize(
    "loop",
    ["idle", "blocked"],
)
def test_a_killed_runtime_leaves_no_worker_tree(
    tmp_path: Path, hostile_bundle: Path, loop: str, isolation: str
) -> None:
    import signal
    import subprocess
    import sys

    log = tmp_path / "rt.db.apps" / "_logs" / f"{SCOPE}-{VERSION}.log"
    proc = subprocess.Popen(
        [
            *(sys.executable, "-c", KILLED_RUNTIME, str(tmp_path), str(hostile_bundle)),
            *(loop, str(log), isolation),
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).parents[3],
    )
    pids: dict[str, int] = {}
    try:
        assert proc.stdout is not None
        pids = json.loads(proc.stdout.readline())
        assert poll(lambda: log.exists() and b"BLOCKING" in log.read_bytes())
        proc.kill()
        proc.wait()
        survivors = poll(lambda: not [p for p in pids.values() if pid_alive(p)], within_s=5)
        assert survivors, f"still running after the runtime was killed: {pids}"
    finally:
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
        if pids:  # our own leftovers: the worker's tree ends on SIGTERM
            with contextlib.suppress(ProcessLookupError):
                os.kill(pids["worker"], signal.SIGTERM)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pids["daemon"], signal.SIGKILL)
            poll(lambda: not [p for p in pids.values() if pid_alive(p)], within_s=5)


def test_a_handler_printing_without_bound_leaves_the_log_capped(
    open_runtime: Callable[..., Runtime], trust: TrustStore, hostile_bundle: Path
) -> None:
    cap = 256 << 10
    rt = open_runtime(trust, hostile_bundle, worker_log_max_bytes=cap)
    assert result(rt, "conv", "hostile.spew", {"mb": 8}) == 8
    assert poll(lambda: TRUNCATION_NOTE in log_path(rt).read_bytes())
    assert result(rt, "conv", "hostile.echo", {"text": "after"}) == "after"
    rt.close()
    assert log_path(rt).stat().st_size <= cap + len(TRUNCATION_NOTE) + 2


# -- capabilities per delivery ---------------------------------------------------------
@pytest.mark.parametrize("own_delivery", [True, False], ids=["own-delivery-id", "old-delivery-id"])
def test_a_capability_saved_from_another_conversation_neither_reads_nor_writes(
    hostile: Runtime, own_delivery: bool
) -> None:
    assert result(hostile, "x", "hostile.put", {"secret": "x-secret"}) == 1
    assert result(hostile, "x", "hostile.save_cap") == "saved"
    result(hostile, "y", "hostile.echo", {"text": "y is up"})
    msg = final(hostile, "y", "hostile.reuse_cap", {"own_delivery": own_delivery})
    if own_delivery:  # the asking delivery is ended at once
        assert error_code(msg) == "worker_protocol_error"
    else:  # it names a delivery that has ended: refused, and the handler learns nothing
        assert msg["result"] == "worker_protocol_error; worker_protocol_error", msg
    report = log_line(hostile, "REUSE:")
    assert report is not None
    assert "x-secret" not in report and "read" not in report and "replaced" not in report
    assert report.count("worker_protocol_error") == 2
    snap = hostile.surface("x", SCOPE).get()
    assert (snap.revision, snap.data) == (1, {"secret": "x-secret"})
    assert hostile.surface("y", SCOPE).get().revision == 0
    # both conversations carry on
    assert result(hostile, "x", "hostile.echo", {"text": "x"}) == "x"
    assert result(hostile, "y", "hostile.echo", {"text": "y"}) == "y"


LIVE_CAPABILITY_GAP = (
    "GAP (design): one worker process serves every conversation of an app version, so while "
    "conversation X has a delivery in flight, a handler serving conversation Y finds X's "
    "live capability and delivery id in process memory (gc) and reads and overwrites X's "
    "session data; per-delivery capabilities (lineup_runtime_lite/drivers/delivery.py:_Grant) only "
    'narrow this to the in-flight window. `isolation="session"` closes it (a worker per '
    "App session); under the default the limit is stated in the security model guide"
)


@pytest.mark.parametrize(
    "isolation",
    [
        pytest.param("app", marks=pytest.mark.xfail(strict=True, reason=LIVE_CAPABILITY_GAP)),
        "session",  # a worker per App session: X's capability is in another process
    ],
)
def test_a_live_capability_of_another_conversation_cannot_be_used(
    open_runtime: Callable[..., Runtime],
    trust: TrustStore,
    hostile_bundle: Path,
    probe_bundle: Path,
    isolation: str,
) -> None:
    hostile = open_runtime(trust, hostile_bundle, probe_bundle, isolation=isolation)
    assert result(hostile, "x", "hostile.put", {"secret": "x-secret"}) == 1
    result(hostile, "y", "hostile.echo", {"text": "y is up"})
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        parked = _park(hostile, pool, "x")  # X's delivery is in flight
        msg = final(hostile, "y", "hostile.steal_live", {})
        snap = hostile.surface("x", SCOPE).get()
        hostile.close()  # ends the parked delivery too
        parked.result(timeout=30)
    assert (snap.revision, snap.data) == (1, {"secret": "x-secret"}), msg
    assert "x-secret" not in str(msg)


def test_what_one_session_leaves_in_its_tmp_is_out_of_another_sessions_reach(
    open_runtime: Callable[..., Runtime],
    trust: TrustStore,
    hostile_bundle: Path,
    probe_bundle: Path,
) -> None:
    """Under `isolation="session"` each session's worker has a private tmp of its own:
    a file session x leaves there is not readable by session y. (Forked from a warm image, every session sees its own tmpfs at one path:
    decision record 0007. So y may find nothing there instead of being refused. Either
    way it never reads x's file.)"""
    rt = open_runtime(trust, hostile_bundle, probe_bundle, isolation="session")
    x_tmp = result(rt, "x", "hostile.env")["TMPDIR"]
    assert result(rt, "x", "hostile.write", {"path": x_tmp}) == "ok"
    secret = f"{x_tmp}/hostile-was-here"
    assert result(rt, "x", "hostile.read", {"path": secret}) == "ok"
    assert result(rt, "y", "hostile.read", {"path": secret}) in (*REFUSED, "ENOENT")
    # and x's own file is still there for x
    assert result(rt, "x", "hostile.write", {"path": x_tmp}) == "EEXIST"


def test_a_handler_that_outlives_its_timeout_cannot_write(hostile: Runtime) -> None:
    assert result(hostile, "conv", "hostile.put", {"secret": "kept"}) == 1
    result(hostile, "other", "hostile.echo", {"text": "up"})
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        # another delivery in flight keeps the timed-out worker draining (not recycled at
        # once), so the late handler gets to try its revoked capability
        parked = _park(hostile, pool, "other")
        assert error_code(final(hostile, "conv", "hostile.late_write", {"tag": "LATE"})) == (
            "handler_timeout"
        )
        report = log_line(hostile, "LATE:")
        snap = hostile.surface("conv", SCOPE).get()
        hostile.close()  # ends the parked delivery too
        parked.result(timeout=30)
    assert report == "LATE: worker_protocol_error; worker_protocol_error", report
    assert (snap.revision, snap.data) == (1, {"secret": "kept"})


# -- worker health ---------------------------------------------------------------------
def _park(rt: Runtime, pool: concurrent.futures.Executor, conversation: str) -> Any:
    """An innocent delivery in flight in `conversation` (waits until its handler runs)."""
    future = pool.submit(final, rt, conversation, "hostile.park", {"tag": conversation})
    log_line(rt, f"PARKED {conversation}")
    return future


@pytest.mark.parametrize(
    ("kind", "culprit"),
    [
        ("not_json", "delivery_interrupted"),
        ("list_id", "delivery_interrupted"),
        ("deep", "delivery_interrupted"),
        ("oversized", "delivery_interrupted"),
        ("unknown_kind", "worker_protocol_error"),
        ("bad_result", "worker_protocol_error"),
    ],
    ids=[
        "not-json",
        "unhashable-list-id",
        "100k-deep-array",
        "oversized-line",
        "unknown-kind-naming-its-delivery",
        "result-without-valid-ok",
    ],
)
def test_a_malformed_bridge_line_fails_the_worker_loudly_and_the_app_recovers(
    open_runtime: Callable[..., Runtime],
    trust: TrustStore,
    hostile_bundle: Path,
    kind: str,
    culprit: str,
) -> None:
    rt = open_runtime(trust, hostile_bundle)
    for conv in ("a", "b"):
        result(rt, conv, "hostile.echo", {"text": "up"})
    before = worker(rt).pid
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        parked = _park(rt, pool, "b")
        # the line names its own delivery (or none): that one fails as `culprit`
        assert error_code(final(rt, "a", "hostile.bad_line", {"kind": kind})) == culprit
        assert error_code(parked.result(timeout=30)) == "delivery_interrupted"
    assert worker(rt).dead
    # no silent stall: every conversation's later calls succeed, on a new worker
    for conv in ("a", "b", "c"):
        assert result(rt, conv, "hostile.echo", {"text": conv}) == conv
    assert worker(rt).pid != before


def test_an_oversized_unfinished_line_fails_the_worker_before_any_heartbeat(
    open_runtime: Callable[..., Runtime], trust: TrustStore, hostile_bundle: Path
) -> None:
    """5 MiB with no newline: the runtime stops buffering at the bridge's limit and fails
    the worker then (not when a later heartbeat would end the line, 30 s here)."""
    rt = open_runtime(trust, hostile_bundle, worker_heartbeat_s=30)
    result(rt, "a", "hostile.echo", {"text": "up"})
    started = time.monotonic()
    msg = final(rt, "a", "hostile.bad_line", {"kind": "unterminated"})
    assert error_code(msg) == "delivery_interrupted"
    assert time.monotonic() - started < 15
    assert worker(rt).death.kind == "protocol"
    assert result(rt, "b", "hostile.echo", {"text": "b"}) == "b"


def test_a_bridge_line_left_unfinished_is_caught_by_the_heartbeat(
    open_runtime: Callable[..., Runtime], trust: TrustStore, hostile_bundle: Path
) -> None:
    rt = open_runtime(trust, hostile_bundle, worker_heartbeat_s=0.3)
    result(rt, "a", "hostile.echo", {"text": "up"})
    before = worker(rt).pid
    started = time.monotonic()
    # the pong lands after the unfinished line: the runtime reads garbage and says so
    assert error_code(final(rt, "a", "hostile.partial_line", {})) == "delivery_interrupted"
    assert time.monotonic() - started < 15
    assert worker(rt).death.kind == "protocol"
    assert result(rt, "b", "hostile.echo", {"text": "b"}) == "b"
    assert worker(rt).pid != before


def test_an_async_handler_blocking_its_loop_gets_the_worker_recycled_by_the_heartbeat(
    open_runtime: Callable[..., Runtime], trust: TrustStore, hostile_bundle: Path
) -> None:
    rt = open_runtime(trust, hostile_bundle, worker_heartbeat_s=0.3)
    for conv in ("a", "b"):
        result(rt, conv, "hostile.echo", {"text": "up"})
    before = worker(rt).pid
    started = time.monotonic()
    # the handler's own timeout is 60 s: the heartbeat, not the timeout, ends it
    assert error_code(final(rt, "a", "hostile.block_loop", {})) == "delivery_interrupted"
    assert time.monotonic() - started < 15
    assert result(rt, "b", "hostile.echo", {"text": "b"}) == "b"
    assert worker(rt).pid != before


def test_every_handler_thread_stuck_past_its_timeout_gets_the_worker_recycled(
    open_runtime: Callable[..., Runtime], trust: TrustStore, hostile_bundle: Path
) -> None:
    from lineup_sdk._worker import HANDLER_THREADS

    rt = open_runtime(trust, hostile_bundle, worker_heartbeat_s=0.3)
    convs = [f"s{i}" for i in range(HANDLER_THREADS)]
    for conv in [*convs, "after"]:
        result(rt, conv, "hostile.echo", {"text": "up"})
    stuck_worker = worker(rt)
    with concurrent.futures.ThreadPoolExecutor(HANDLER_THREADS) as pool:
        outcomes = list(pool.map(lambda c: final(rt, c, "hostile.stuck", {}), convs))
    assert {error_code(m) for m in outcomes} == {"handler_timeout"}
    assert poll(lambda: stuck_worker.dead), "the worker with every thread stuck was not recycled"
    # each timeout drains the worker (SPEC 13.3), so it is recycled once the last stuck
    # delivery timed out; a pong counting every thread stuck is the backstop ("hung")
    assert stuck_worker.death.kind in ("recycled", "hung")
    assert result(rt, "after", "hostile.sync_echo", {"text": "free"}) == "free"
    assert worker(rt) is not stuck_worker


# -- sandbox modes and report ----------------------------------------------------------
@both_isolations
def test_required_with_a_missing_mechanism_refuses_to_start_the_worker(
    open_runtime: Callable[..., Runtime], trust: TrustStore, hostile_bundle: Path, isolation: str
) -> None:
    with simulate_unavailable("landlock"):
        rt = open_runtime(trust, hostile_bundle, sandbox="required", isolation=isolation)
        assert rt.sandbox["files"] is None and rt.sandbox["refused"]
        msg = final(rt, "conv", "hostile.echo", {"text": "x"})
    assert error_code(msg) == "activation_failed"
    assert msg["error"]["details"] == {"reason": "worker_failed", "cause": "sandbox_unavailable"}
    assert not engine_of(rt).workers


@both_isolations
def test_the_sandbox_report_names_every_mechanism_and_the_missing_one_as_none(
    hostile: Runtime,
) -> None:
    before = hostile.sandbox  # a probe: no worker has started yet
    result(hostile, "conv", "hostile.echo", {"text": "x"})
    report = hostile.sandbox  # what the worker itself reported
    for rep in (before, report):
        assert rep["mode"] == "best_effort" and rep["refused"] is None
        missing = [key for key in REPORT_KEYS if not rep.get(key)]
        assert missing == [], rep
    assert "NOT enforced" not in describe(report)
    with simulate_unavailable("landlock"):
        seam = probe("best_effort")
    assert seam["files"] is None
    assert all(seam[key] for key in REPORT_KEYS if key != "files"), seam
    assert "files: NOT enforced" in describe(seam)


@both_isolations
def test_the_app_cannot_rewrite_what_rt_sandbox_reports(
    open_runtime: Callable[..., Runtime],
    trust: TrustStore,
    rt_key: SigningKey,
    tmp_path: Path,
    isolation: str,
) -> None:
    bundle = build_app(APPS / "hostile", tmp_path / "spoof", rt_key, SPOOF_REPORT=True)
    with simulate_unavailable("landlock"):
        rt = open_runtime(trust, bundle, isolation=isolation)
        assert rt.sandbox["files"] is None
        assert result(rt, "conv", "hostile.read", {"path": "/etc/passwd"}) == "ok"
        assert rt.sandbox["files"] is None, rt.sandbox


def test_sandbox_off_runs_and_says_so(
    open_runtime: Callable[..., Runtime], trust: TrustStore, hostile_bundle: Path
) -> None:
    rt = open_runtime(trust, hostile_bundle, sandbox="off")
    assert result(rt, "conv", "hostile.echo", {"text": "x"}) == "x"
    report = rt.sandbox
    assert report["mode"] == "off"
    assert all(report[key] is None for key in REPORT_KEYS)
    assert describe(report).startswith("sandbox: OFF")
    # even off, the environment is the allow-list
    assert not any(k.startswith("LINEUP_SIGNING") for k in result(rt, "conv", "hostile.env"))


# -- installed files and trust ---------------------------------------------------------
@both_isolations
@pytest.mark.parametrize(
    "planted",
    [
        "probe_app/planted.py",
        "probe_app/__pycache__/x.cpython-311.pyc",
        "__pycache__/x.cpython-311.pyc",
        "sitecustomize.py",
    ],
)
def test_a_planted_file_in_an_installed_app_fails_the_next_activation(
    open_runtime: Callable[..., Runtime],
    trust: TrustStore,
    probe_bundle: Path,
    planted: str,
    isolation: str,
) -> None:
    rt = open_runtime(trust, probe_bundle, isolation=isolation)
    target = engine_of(rt).apps_dir / "probe" / VERSION / planted
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(b"raise SystemExit('planted code ran')\n")
    msg = final(rt, "conv", "probe.echo", {"text": "x"})
    assert error_code(msg) == "activation_failed"
    assert msg["error"]["details"] == {"reason": "worker_failed", "cause": "install_tampered"}
    with pytest.raises(LineupError) as exc:
        rt._run(rt._art._apps.check_app("probe", VERSION))
    assert exc.value.code == "install_tampered"


def _untrusted_next_activation(rt: Runtime, method: str) -> dict[str, Any]:
    msg = final(rt, f"new-{next(_ids)}", method, {"text": "x"})
    assert error_code(msg) == "activation_failed"
    return dict(msg["error"]["details"])


@both_isolations
@pytest.mark.parametrize(
    ("change", "cause"),
    [
        ("revoke", "key_revoked"),
        ("narrow", "scope_not_allowed"),
        ("drop-allow", "permission_not_allowed"),
    ],
)
def test_a_trust_file_change_after_install_fails_the_next_activation(
    open_runtime: Callable[..., Runtime],
    tmp_path: Path,
    rt_key: SigningKey,
    net_bundle: Path,
    change: str,
    cause: str,
    isolation: str,
) -> None:
    path = tmp_path / "trust.toml"
    trusted(rt_key, allow=("network",)).save(path)
    rt = open_runtime(path, net_bundle, isolation=isolation)
    assert result(rt, "first", "hostile.echo", {"text": "ok"}) == "ok"
    if change == "revoke":
        store = trusted(rt_key, allow=("network",))
        store.revoke(rt_key.key_id)
    elif change == "narrow":
        store = trusted(rt_key, scopes=("other",), allow=("network",))
    else:
        store = trusted(rt_key)
    store.save(path)  # rewritten: the runtime re-reads it
    assert _untrusted_next_activation(rt, "hostile.echo") == {
        "reason": "app_untrusted",
        "cause": cause,
    }


def test_a_network_app_is_refused_at_install_and_verify_without_allow(
    open_runtime: Callable[..., Runtime], rt_key: SigningKey, net_bundle: Path
) -> None:
    store = trusted(rt_key)
    rt = open_runtime(store)
    with pytest.raises(LineupError) as exc:
        rt.install(net_bundle)
    assert exc.value.code == "permission_not_allowed"
    assert rt.inventory() == []
    report = check_bundle(net_bundle, store)
    assert not report.ok
    assert "permission_not_allowed" in [p.code for p in report.problems]
    assert check_bundle(net_bundle, trusted(rt_key, allow=("network",))).ok
