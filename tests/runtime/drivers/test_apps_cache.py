"""The apps cache belongs to the runtime's user (SPEC 16.1): explicit modes, its own
group-writable folders tightened and checked again, folders or files of another uid and
symlinks never used, every ancestor of the apps folder owned by root or the runtime's uid.

The tests run as root (CI does): another uid is `nobody`, made the owner with `os.chown`.
"""

from __future__ import annotations

import os
import pwd
import stat
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from lineup_build.trust import TrustStore
from lineup_runtime_lite import HostSimulator, Runtime, VirtualClock
from lineup_runtime_lite.core.messages import AgentMessage
from lineup_sdk.errors import LineupError
from tests.runtime.conftest import message

NOBODY = pwd.getpwnam("nobody").pw_uid

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="making a folder another uid's needs root (CI runs as root)"
)


@pytest.fixture()
def umask_002() -> Iterator[None]:
    old = os.umask(0o002)
    try:
        yield
    finally:
        os.umask(old)


def _open(db: Path, apps: Path, trust: TrustStore) -> Runtime:
    return Runtime.open(
        db, trust=trust, clock=VirtualClock(), host=HostSimulator("auto"), apps_dir=apps
    )


def _echo(rt: Runtime, call_id: str) -> AgentMessage:
    rt.call(call_id, f"conv-{call_id}", "probe.echo", {"text": "x"})
    rt.settle()
    found = [m for m in rt.outbox.all() if m["call_id"] == call_id and m["kind"] != "receipt"]
    assert len(found) == 1, found
    return found[0]


def _tampered(final: Mapping[str, Any]) -> None:
    assert final["kind"] == "error", final
    assert final["error"]["details"] == {"reason": "worker_failed", "cause": "install_tampered"}


def _check_app(rt: Runtime, scope: str, version: str) -> LineupError:
    with pytest.raises(LineupError) as exc:
        rt._run(rt._art._apps.check_app(scope, version))
    assert exc.value.code == "install_tampered"
    return exc.value


def _modes(root: Path) -> dict[str, int]:
    out = {".": stat.S_IMODE(root.lstat().st_mode)}
    for path in root.rglob("*"):
        out[str(path.relative_to(root))] = stat.S_IMODE(path.lstat().st_mode)
    return out


def test_the_runtime_writes_explicit_modes_whatever_the_umask(
    tmp_path: Path, trust: TrustStore, probe_bundle: Path, umask_002: None
) -> None:
    apps = tmp_path / "new" / "apps"
    with _open(tmp_path / "rt.db", apps, trust) as rt:
        rt.install(probe_bundle)  # as written, before any check could tighten them
        assert stat.S_IMODE(apps.stat().st_mode) == 0o700
        assert stat.S_IMODE((tmp_path / "new").stat().st_mode) == 0o700
        for name, mode in _modes(apps / "probe").items():
            path = apps / "probe" / name
            if path.is_dir():
                assert mode == 0o700, (name, oct(mode))
            else:
                assert mode in (0o600, 0o644), (name, oct(mode))
        assert _echo(rt, "a")["kind"] == "result"  # a worker reads what the runtime wrote
    for name, mode in _modes(apps).items():
        assert not mode & (stat.S_IWGRP | stat.S_IWOTH), (name, oct(mode))


def test_a_group_writable_folder_of_its_own_is_tightened_then_used(
    tmp_path: Path, trust: TrustStore, probe_bundle: Path, umask_002: None
) -> None:
    apps = tmp_path / "apps"
    with _open(tmp_path / "rt.db", apps, trust) as rt:
        rt.install(probe_bundle)
    version = apps / "probe" / "1.0.0"
    for path in [apps, version, *version.rglob("*")]:  # as an umask of 002 would leave them
        path.chmod(path.stat().st_mode | stat.S_IWGRP | stat.S_IWOTH)
    with _open(tmp_path / "rt.db", apps, trust) as rt:
        assert _echo(rt, "a")["kind"] == "result"
    for name, mode in _modes(apps).items():
        assert not mode & (stat.S_IWGRP | stat.S_IWOTH), (name, oct(mode))


def test_a_tightened_folder_is_checked_again_in_full(
    tmp_path: Path, trust: TrustStore, probe_bundle: Path
) -> None:
    apps = tmp_path / "apps"
    with _open(tmp_path / "rt.db", apps, trust) as rt:
        rt.install(probe_bundle)
    version = apps / "probe" / "1.0.0"
    version.chmod(0o777)
    (version / "probe_app" / "planted.py").write_text("X = 1\n")
    with _open(tmp_path / "rt.db", apps, trust) as rt:
        _tampered(_echo(rt, "a"))
    assert not stat.S_IMODE(version.stat().st_mode) & 0o022


@pytest.mark.parametrize("what", ["folder", "file"])
def test_a_cache_entry_of_another_uid_is_never_used(
    pg_url: str, tmp_path: Path, trust: TrustStore, todo_bundle: Path, what: str
) -> None:
    """One cache, two nodes (one uid's runtimes share it): a version folder another user
    made (or a file in it) is refused, the hint naming it."""
    apps = tmp_path / "cache"
    with Runtime.open(pg_url, trust=trust, apps_dir=apps, node_id="a") as rt:
        rt.install(todo_bundle)
        digest = rt.store_dump()["app_versions"][0][3]
    folder = apps / digest
    if what == "folder":
        target = folder
        os.chown(folder, NOBODY, NOBODY)
    else:
        target = next(p for p in folder.rglob("*.py"))
        os.chown(target, NOBODY, NOBODY)
    with Runtime.open(pg_url, trust=trust, apps_dir=apps, node_id="b") as rt:
        rt.call("a1", "conv", "todo.add", {"title": "milk"})
        rt.settle()
        _tampered(message(rt, "a1:error"))
        err = _check_app(rt, "todo", rt.apps()[0]["version"])
        assert str(target) in (err.hint or ""), err.to_dict()


def test_a_version_folder_that_is_a_symlink_is_never_used(
    tmp_path: Path, trust: TrustStore, probe_bundle: Path
) -> None:
    apps = tmp_path / "apps"
    with _open(tmp_path / "rt.db", apps, trust) as rt:
        rt.install(probe_bundle)
    version = apps / "probe" / "1.0.0"
    copy = tmp_path / "copy"
    version.rename(copy)  # the same files, but reached through a link
    version.symlink_to(copy)
    with _open(tmp_path / "rt.db", apps, trust) as rt:
        _tampered(_echo(rt, "a"))
        assert str(version) in (_check_app(rt, "probe", "1.0.0").hint or "")


def test_a_parent_of_the_apps_folder_owned_by_another_uid_is_refused(
    tmp_path: Path, trust: TrustStore
) -> None:
    parent = tmp_path / "theirs"
    parent.mkdir(mode=0o755)
    os.chown(parent, NOBODY, NOBODY)  # they can swap `apps` for a folder of theirs
    with pytest.raises(LineupError) as exc:
        _open(tmp_path / "rt.db", parent / "apps", trust)
    assert exc.value.code == "install_tampered"
    assert str(parent) in (exc.value.hint or "")


def test_ancestors_own_are_tightened_and_sticky_ones_accepted(
    tmp_path: Path, trust: TrustStore
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)  # as /tmp: sticky, so nobody removes or renames what is not theirs
    mine = shared / "mine"
    mine.mkdir()
    mine.chmod(0o777)
    with _open(tmp_path / "rt.db", mine / "apps", trust):
        pass
    assert stat.S_IMODE(shared.stat().st_mode) == 0o1777
    assert stat.S_IMODE(mine.stat().st_mode) == 0o755


def test_an_sqlite_database_of_another_uid_is_refused(tmp_path: Path, trust: TrustStore) -> None:
    """On SQLite the manifest and key id come from the database's rows: the file is the
    runtime user's own, as its apps folder is."""
    db = tmp_path / "rt.db"
    _open(db, tmp_path / "apps", trust).close()
    os.chown(db, NOBODY, NOBODY)
    with pytest.raises(LineupError) as exc:
        _open(db, tmp_path / "apps", trust)
    assert exc.value.code == "install_tampered"
    assert str(db) in (exc.value.hint or "")


def test_an_sqlite_database_others_may_write_is_tightened(
    tmp_path: Path, trust: TrustStore
) -> None:
    db = tmp_path / "rt.db"
    _open(db, tmp_path / "apps", trust).close()
    db.chmod(0o666)
    with _open(db, tmp_path / "apps", trust):
        for path in tmp_path.glob("rt.db*"):
            if path.is_file():
                assert not path.stat().st_mode & 0o022, (path, oct(path.stat().st_mode))
