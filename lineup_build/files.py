"""Select the files that go into a bundle, refusing unsafe paths and private keys."""

from __future__ import annotations

import hashlib
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from lineup_build.diagnostics import Diagnostic, Where
from lineup_build.fsutil import read_regular
from lineup_build.reader import Limits, collision_key, entry_name_problem, raise_hint
from lineup_sdk.errors import LineupError

__all__ = ["Glob", "IncludedFile", "collect_files", "compile_glob", "path_problem"]

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


class Glob:
    """An include glob over POSIX paths: `**/` spans folders (or none), `**` anything, `*`
    and `?` stay within one folder.

    Matched by simulating its automaton over the set of live states, so a path costs at
    most len(path) × len(pattern) steps whatever the pattern (a pattern of 24 `*` against a
    long name is as fast as any other); no backtracking regex.
    """

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        tokens: list[tuple[str, str]] = []
        i = 0
        while i < len(pattern):
            if pattern.startswith("**/", i):
                kind, i = "dirs", i + 3
            elif pattern.startswith("**", i):
                kind, i = "any", i + 2
            elif pattern[i] == "*":
                kind, i = "star", i + 1
            elif pattern[i] == "?":
                kind, i = "one", i + 1
            else:
                tokens.append(("lit", pattern[i]))
                i += 1
                continue
            if not (tokens and tokens[-1][0] == kind and kind in ("star", "any")):
                tokens.append((kind, ""))  # `**` then `**`, or `*` then `*`: the same language
        self._tokens = tokens

    def _closure(self, states: set[int], i: int) -> None:
        """Add token position `i` and every position reachable without a character."""
        tokens = self._tokens
        while True:
            if i in states:
                return
            states.add(i)
            if i == len(tokens):
                return
            kind = tokens[i][0]
            if kind == "dirs":
                states.add(-1 - i)  # inside the optional `anything/` group
            if kind not in ("star", "any", "dirs"):
                return
            i += 1

    def match(self, path: str) -> bool:
        """Whether the whole of `path` matches."""
        tokens, end = self._tokens, len(self._tokens)
        states: set[int] = set()
        self._closure(states, 0)
        for c in path:
            nxt: set[int] = set()
            for s in states:
                if s < 0:  # in the group of `**/`: any character, a `/` may end it
                    nxt.add(s)
                    if c == "/":
                        self._closure(nxt, -s)
                    continue
                if s == end:
                    continue
                kind, lit = tokens[s]
                if kind == "lit":
                    if c == lit:
                        self._closure(nxt, s + 1)
                elif kind == "one":
                    if c != "/":
                        self._closure(nxt, s + 1)
                elif kind == "star":
                    if c != "/":
                        self._closure(nxt, s)
                elif kind == "any":
                    self._closure(nxt, s)
            if not nxt:
                return False
            states = nxt
        return end in states


def compile_glob(pattern: str) -> Glob:
    """The compiled form of one include glob."""
    return Glob(pattern)


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


def _link_matches(link: Path, rel: str, patterns: list[Glob]) -> bool:
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
    limits: Limits | None = None,
) -> tuple[list[IncludedFile], list[Diagnostic]]:
    """Walk `root` and return the files matching `include`, sorted by path.

    Never included: `__pycache__/`, `*.pyc`, `.git/`, `.lineup/`, the root `dist/` and the
    build's output folder. Symlinks and non-regular files that match are `include_unsafe`;
    a PEM private key is `include_secret`. `where` locates the `include` key for a bad
    pattern. The bundle limits `verify` enforces (file count, total bytes) stop the walk
    with `limits_exceeded`, so a huge project is never read whole.
    """
    limits = limits or Limits()
    total = 0
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
            patterns.append(compile_glob(g))
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
            if len(chosen) >= limits.max_files:
                diags.append(
                    _over(f"more than {limits.max_files} files match `include`", where, "max_files")
                )
                return _sorted(chosen), diags
            try:  # a regular file still (not swapped for a FIFO), never over the limit
                data = read_regular(
                    full,
                    limit=limits.max_total_bytes - total,
                    code="include_unsafe",
                    what="included file",
                )
            except LineupError as exc:
                if isinstance(exc.details, dict) and exc.details.get("reason") == "too_large":
                    msg = f"the included files exceed {limits.max_total_bytes} bytes"
                    diags.append(_over(msg, where, "max_total_bytes"))
                    return _sorted(chosen), diags
                diags.append(Diagnostic("include_unsafe", exc.message, where=Where(rel)))
                continue
            total += len(data)
            if _PEM_PRIVATE.search(data):
                diags.append(
                    Diagnostic("include_secret", f"{rel} holds a private key", where=Where(rel))
                )
                continue
            chosen.append(IncludedFile(rel, data, hashlib.sha256(data).hexdigest()))
    return _sorted(chosen), diags


def _sorted(chosen: list[IncludedFile]) -> list[IncludedFile]:
    return sorted(chosen, key=lambda f: f.path)


def _over(message: str, where: Where, key: str) -> Diagnostic:
    return Diagnostic(
        "limits_exceeded",
        message,
        where=where,
        hint=f"narrow the `include` globs; {raise_hint(key)}",
    )
