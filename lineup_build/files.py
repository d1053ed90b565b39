"""Select the files that go into a bundle, refusing unsafe paths and private keys."""

from __future__ import annotations

import hashlib
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from lineup_build.diagnostics import Diagnostic, Where
from lineup_build.reader import collision_key, entry_name_problem

__all__ = ["IncludedFile", "collect_files", "glob_regex", "path_problem"]

_NEVER_DIRS = frozenset({"__pycache__", ".git", ".lineup"})
_ROOT_NEVER = frozenset({"dist"})
_PEM_PRIVATE = re.compile(rb"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----")
MAX_PATH_BYTES = 512 - len("app/")


@dataclass(frozen=True)
class IncludedFile:
    """One file chosen for the bundle: its bundle path and the bytes that were hashed."""

    path: str
    data: bytes
    sha256: str

    @property
    def size(self) -> int:
        return len(self.data)


def glob_regex(pattern: str) -> re.Pattern[str]:
    """Translate a glob over POSIX paths: `**` spans folders, `*` and `?` stay in one."""
    out = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(c))
            i += 1
    return re.compile("".join(out) + r"\Z")


def path_problem(path: str) -> str | None:
    """Why a relative POSIX bundle path is unsafe, or None.

    The same rules `verify` applies to archive names (one definition, in the reader), so
    `build` never writes a bundle that `verify` would reject.
    """
    why = entry_name_problem(path)
    if why is not None:
        return why
    if len(path.encode("utf-8")) > MAX_PATH_BYTES:
        return f"path longer than {MAX_PATH_BYTES} bytes"
    return None


def _link_matches(link: Path, rel: str, patterns: list[re.Pattern[str]]) -> bool:
    """Whether a symlinked folder holds a file the globs would have taken (bounded look)."""
    seen = 0
    for dirpath, _dirs, filenames in os.walk(link):  # the link itself; nothing below it
        sub = Path(dirpath).relative_to(link).as_posix()
        prefix = rel if sub == "." else f"{rel}/{sub}"
        for name in filenames:
            if any(p.match(f"{prefix}/{name}") for p in patterns):
                return True
            seen += 1
            if seen >= 10_000:
                return True  # too big to look through: treat it as included
    return False


def collect_files(
    root: Path,
    include: tuple[str, ...],
    *,
    exclude_dirs: tuple[Path, ...] = (),
    where: Where | None = None,
) -> tuple[list[IncludedFile], list[Diagnostic]]:
    """Walk `root` and return the files matching `include`, sorted by path.

    Never included: `__pycache__/`, `*.pyc`, `.git/`, `.lineup/`, the root `dist/` and the
    build's output folder. Symlinks and non-regular files that match are `include_unsafe`;
    a PEM private key is `include_secret`. `where` locates the `include` key for a bad
    pattern.
    """
    diags: list[Diagnostic] = []
    where = where or Where("lineup.toml")
    patterns = []
    for g in include:
        if g.startswith("/") or ".." in g.split("/") or "\\" in g:
            diags.append(
                Diagnostic(
                    "include_unsafe",
                    f"include pattern {g!r} escapes the project",
                    where=where,
                    hint="use patterns relative to the project root",
                )
            )
        else:
            patterns.append(glob_regex(g))
    root = root.resolve()
    skip = {p.resolve() for p in exclude_dirs}
    chosen: list[IncludedFile] = []
    folded: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        rel_dir = here.relative_to(root).as_posix()
        rel_dir = "" if rel_dir == "." else rel_dir + "/"
        keep = []
        for d in sorted(dirnames):
            full = here / d
            if d in _NEVER_DIRS or (not rel_dir and d in _ROOT_NEVER) or full in skip:
                continue
            if full.is_symlink():
                rel = rel_dir + d
                if _link_matches(full, rel, patterns):
                    diags.append(
                        Diagnostic(
                            "include_unsafe",
                            f"{rel} is a symlink",
                            where=Where(rel),
                            hint="include the real files, not a link",
                        )
                    )
                continue
            keep.append(d)
        dirnames[:] = keep
        for name in sorted(filenames):
            rel = rel_dir + name
            if name.endswith((".pyc", ".pyo")) or not any(p.match(rel) for p in patterns):
                continue
            full = here / name
            st = full.lstat()
            if stat.S_ISLNK(st.st_mode):
                diags.append(
                    Diagnostic(
                        "include_unsafe",
                        f"{rel} is a symlink",
                        where=Where(rel),
                        hint="include the real file, not a link",
                    )
                )
                continue
            if not stat.S_ISREG(st.st_mode):
                diags.append(
                    Diagnostic("include_unsafe", f"{rel} is not a regular file", where=Where(rel))
                )
                continue
            why = path_problem(rel)
            if why:
                diags.append(
                    Diagnostic(
                        "include_unsafe",
                        f"{rel!r}: {why}",
                        where=Where(rel),
                        hint="rename the file to a plain relative path",
                    )
                )
                continue
            key = collision_key(rel)
            if key in folded:
                diags.append(
                    Diagnostic(
                        "include_unsafe",
                        f"{rel} and {folded[key]} differ only by case",
                        where=Where(rel),
                        related=(Where(folded[key]),),
                        hint="rename one; bundles must unpack on case-insensitive disks",
                    )
                )
                continue
            folded[key] = rel
            data = full.read_bytes()
            if _PEM_PRIVATE.search(data):
                diags.append(
                    Diagnostic("include_secret", f"{rel} holds a private key", where=Where(rel))
                )
                continue
            chosen.append(IncludedFile(rel, data, hashlib.sha256(data).hexdigest()))
    chosen.sort(key=lambda f: f.path)
    return chosen, diags
