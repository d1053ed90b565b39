"""The apps cache belongs to the runtime's user (SPEC 16.1).

The runtime makes its folders 0700 and its files 0644, whatever the umask. A folder or file
it owns that others may write is tightened (`chmod go-w`) before it is read, so the full
check that follows (strays, sizes, hashes) sees what stays; a folder or file owned by
another uid, or a symlink, is never used. Every ancestor of the apps folder is owned by
root or by the runtime's uid: the runtime's own are tightened like its folders, and a
root-owned one others may write must be sticky (as `/tmp`). One cache per uid: runtimes of
one user share it; those of another user need their own.

Raises `install_tampered` whose hint names the path it refused.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
from collections.abc import Iterable
from pathlib import Path

from lineup_sdk.errors import LineupError

__all__ = [
    "FOLDER_MODE",
    "check_ancestors",
    "check_database_file",
    "check_own",
    "check_tree",
    "make_folder",
    "prepare_apps_dir",
    "read_listed",
]

#: What the runtime creates: folders only its user can enter, files anyone may read.
FOLDER_MODE = 0o700
FILE_MODE = 0o644
_OTHERS_WRITE = stat.S_IWGRP | stat.S_IWOTH


def _refused(what: str, path: Path, why: str) -> LineupError:
    if what == "database":
        hint = (
            f"{path} names the code the runtime runs: it must be the runtime's user's own "
            "and writable by that user only (chown or chmod go-w it, or use a database of "
            "your own)"
        )
    else:
        hint = (
            f"remove {path} (the runtime unpacks the app again from its bundle); the apps "
            "cache belongs to the runtime's user: one cache per uid"
        )
    return LineupError(
        "install_tampered", f"{what}: {path} {why}; the runtime does not use it", hint=hint
    )


def _own(path: Path, st: os.stat_result, what: str) -> None:
    """`path` (already lstat'ed as `st`) is the runtime user's and not a symlink; others'
    write bits are cleared."""
    if stat.S_ISLNK(st.st_mode):
        raise _refused(what, path, "is a symlink")
    if st.st_uid != os.geteuid():
        raise _refused(what, path, f"belongs to uid {st.st_uid}, not to the runtime's user")
    if st.st_mode & _OTHERS_WRITE:
        try:
            os.chmod(path, stat.S_IMODE(st.st_mode) & ~_OTHERS_WRITE, follow_symlinks=False)
        except OSError as exc:
            raise _refused(
                what, path, f"is writable by others and cannot be tightened ({exc.strerror})"
            ) from None


def check_own(path: Path, what: str) -> None:
    """`path` exists, is the runtime user's and not a link (others' write bits cleared).

    Raises:
        LineupError: `install_tampered` naming it.
    """
    try:
        st = path.lstat()
    except OSError:
        raise _refused(what, path, "is missing") from None
    _own(path, st, what)


def check_database_file(path: Path) -> None:
    """An SQLite database file (resolved: a link to it is followed, as its lock does) and
    its `-wal` and `-shm` beside it are the runtime user's own, others' write bits cleared:
    manifests and key ids come from its rows.

    Raises:
        LineupError: `install_tampered` naming the file.
    """
    real = Path(os.path.realpath(path))
    for file in (real, real.with_name(real.name + "-wal"), real.with_name(real.name + "-shm")):
        try:
            st = file.lstat()
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise _refused("database", file, f"cannot be read ({exc.strerror})") from None
        _own(file, st, "database")


def make_folder(path: Path) -> None:
    """Create `path` as a 0700 folder of the runtime's user (the umask aside)."""
    os.mkdir(path, FOLDER_MODE)
    os.chmod(path, FOLDER_MODE)


def check_ancestors(path: Path) -> None:
    """Every folder above `path` (resolved: a link on the way is followed) is root's or
    the runtime user's; the user's own lose others' write bits; a root-owned one others
    may write must be sticky.

    Raises:
        LineupError: `install_tampered` naming the first ancestor that fails.
    """
    uid = os.geteuid()
    chain = Path(os.path.realpath(path.parent))
    for folder in [*reversed(chain.parents), chain]:
        st = folder.stat()
        sticky = bool(st.st_mode & stat.S_ISVTX)
        if st.st_uid == 0 and sticky:
            continue  # /tmp: nobody removes or renames what is not theirs
        if st.st_uid == uid:
            _own(folder, st, "apps folder")
            continue
        if st.st_uid != 0:
            raise _refused(
                "apps folder", folder, f"(above the apps folder) belongs to uid {st.st_uid}"
            )
        if st.st_mode & _OTHERS_WRITE:
            raise _refused(
                "apps folder",
                folder,
                "(above the apps folder) is writable by others and not sticky",
            )


def prepare_apps_dir(apps_dir: Path) -> None:
    """Create the apps folder (and its missing parents) 0700, check it is the runtime
    user's own (tightened) and that its ancestors are safe.

    Raises:
        LineupError: `install_tampered`; OSError when a folder cannot be made.
    """
    missing: list[Path] = []
    probe = apps_dir
    while not os.path.lexists(probe) and probe != probe.parent:
        missing.append(probe)
        probe = probe.parent
    for folder in reversed(missing):
        with contextlib.suppress(FileExistsError):  # made meanwhile (a runtime beside)
            make_folder(folder)
    check_ancestors(apps_dir)
    _own(apps_dir, apps_dir.lstat(), "apps folder")
    if not apps_dir.is_dir():
        raise _refused("apps folder", apps_dir, "is not a folder")


def _unlisted(what: str, root: Path, listed: set[str]) -> None:
    """Walk `root` without following links: every entry the runtime user's (tightened),
    no symlink, nothing the manifest does not account for."""
    folders = {p.rsplit("/", 1)[0] for p in listed if "/" in p}
    folders |= {f.rsplit("/", i)[0] for f in folders for i in range(1, f.count("/") + 1)}
    pending = [(root, "")]
    while pending:
        folder, prefix = pending.pop()
        try:
            with os.scandir(folder) as entries:
                found = sorted(entries, key=lambda e: e.name)
        except OSError as exc:
            raise _refused(what, Path(folder), f"cannot be read ({exc.strerror})") from None
        for entry in found:
            rel = prefix + entry.name
            path = Path(entry.path)
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError as exc:
                raise _refused(what, path, f"cannot be read ({exc.strerror})") from None
            _own(path, st, what)
            if stat.S_ISDIR(st.st_mode):
                if rel not in folders:
                    raise LineupError(
                        "install_tampered",
                        f"{what}: {rel}/ is in the install folder but not in the manifest",
                        hint="something planted a file or bytecode there; reinstall the app "
                        f"from its bundle (or remove {path})",
                    )
                pending.append((path, rel + "/"))
            elif not stat.S_ISREG(st.st_mode) or rel not in listed:
                raise LineupError(
                    "install_tampered",
                    f"{what}: {rel} is in the install folder but not in the manifest",
                    hint="something planted a file or bytecode there; reinstall the app from "
                    f"its bundle (or remove {path})",
                )


def check_tree(
    what: str,
    root: Path,
    files: Iterable[tuple[str, int, str]],
    *,
    hashes: bool = True,
) -> None:
    """`root` holds exactly `files` (`(path, size, sha256)`), every folder and file the
    runtime user's and not a link (others' write bits cleared first); with `hashes`, each
    file's size and hash too.

    Raises:
        LineupError: `install_tampered` (the hint names what was refused).
    """
    try:
        st = root.lstat()
    except FileNotFoundError:
        if not hashes:  # nothing planted in it; a worker start reports it missing
            return
        raise LineupError(
            "install_tampered",
            f"{what}: its install folder {root} is missing",
            hint="reinstall the app from its bundle",
        ) from None
    except OSError:
        raise LineupError(
            "install_tampered",
            f"{what}: its install folder {root} is missing",
            hint="reinstall the app from its bundle",
        ) from None
    _own(root, st, what)
    if not stat.S_ISDIR(st.st_mode):
        raise _refused(what, root, "is not a folder")
    wanted = list(files)
    _unlisted(what, root, {path for path, _, _ in wanted})
    if not hashes:
        return
    for rel, size, sha256 in wanted:
        path = root / rel
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            raise LineupError(
                "install_tampered", f"{what}: {rel} is missing or unreadable"
            ) from None
        digest = hashlib.sha256()
        seen = 0
        with os.fdopen(fd, "rb") as fh:
            while chunk := fh.read(1 << 20):
                digest.update(chunk)
                seen += len(chunk)
        if seen != size or digest.hexdigest() != sha256:
            raise LineupError("install_tampered", f"{what}: {rel} changed since install")


def read_listed(what: str, root: Path, rel: str, size: int, sha256: str) -> bytes:
    """The bytes of `root/rel`, a file the manifest lists with `size` and `sha256`: a
    regular file of the runtime's user, reached without a link, whose bytes hash as
    listed (the bytes returned are the ones checked).

    Raises:
        LineupError: `install_tampered` (missing, a link, another's, or changed).
    """
    path = root / rel
    if os.path.realpath(path) != os.path.join(os.path.realpath(root), *rel.split("/")):
        raise _refused(what, path, "is reached through a link")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        raise LineupError(
            "install_tampered",
            f"{what}: {rel} is missing or unreadable",
            hint="reinstall the app from its bundle",
        ) from None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            raise _refused(what, path, "is not a file of the runtime's user")
        data = fh.read(size + 1)
    if len(data) != size or hashlib.sha256(data).hexdigest() != sha256:
        raise LineupError(
            "install_tampered",
            f"{what}: {rel} changed since install",
            hint="something rewrote the installed copy; reinstall the app from its bundle "
            "(lineup dev does at the next build)",
        )
    return data
