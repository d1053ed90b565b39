"""File IO shared by the CLI's readers and writers: regular files within a size limit,
depth-limited TOML, atomic writes, and strict JSON hooks."""

from __future__ import annotations

import os
import re
import stat
import tempfile
import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import Any, BinaryIO

from lineup_sdk.errors import LineupError

__all__ = [
    "MAX_TOML_DEPTH",
    "MISSING_HINT",
    "TomlTooDeep",
    "atomic_write",
    "check_out_dir",
    "no_duplicate_keys",
    "open_regular",
    "parse_toml",
    "read_regular",
    "reject_constant",
]

#: How deeply tables and arrays may nest in any TOML file the CLI reads (SPEC 12).
MAX_TOML_DEPTH = 32
_KIND = {
    stat.S_IFDIR: "a folder",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
}


#: The hint for a file that is not there, unless its reader knows a better one.
MISSING_HINT = "check the path"


def open_regular(
    path: Path, *, limit: int | None, code: str, what: str, missing_hint: str = MISSING_HINT
) -> BinaryIO:
    """Open `path` for reading only if it is a regular file of at most `limit` bytes.

    The file is opened non-blocking and checked with `fstat` before any read, so a FIFO
    never hangs the command and a device (`/dev/zero`) is never read. Symlinks are
    followed; the checks apply to what they point at.

    Raises:
        LineupError: `code` (the command's own), naming the file and what is wrong, with
            `details={"reason": "missing" | "not_regular" | "too_large"}` where it applies;
            a missing file's hint is `missing_hint` (the code's own hint fits a file that
            is there but wrong, not one that is not there).
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise LineupError(
            code,
            f"cannot read {what} {path}: it does not exist",
            hint=missing_hint,
            details={"reason": "missing"},
        ) from None
    except OSError as exc:
        raise LineupError(code, f"cannot read {what} {path}: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = _KIND.get(stat.S_IFMT(st.st_mode), "not a regular file")
            raise LineupError(
                code,
                f"{what} {path} is {kind}, not a regular file",
                hint=f"pass a regular file as the {what}",
                details={"reason": "not_regular"},
            )
        if limit is not None and st.st_size > limit:
            raise LineupError(
                code,
                f"{what} {path} is {st.st_size} bytes; the limit is {limit}",
                hint=f"a {what} this large is not one; check the path",
                details={"reason": "too_large"},
            )
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb", buffering=0)
    except BaseException:
        os.close(fd)
        raise


def read_regular(
    path: Path, *, limit: int, code: str, what: str, missing_hint: str = MISSING_HINT
) -> bytes:
    """The bytes of a regular file of at most `limit` bytes (see `open_regular`)."""
    with open_regular(path, limit=limit, code=code, what=what, missing_hint=missing_hint) as fh:
        data = fh.read(limit + 1)  # a file that grew since fstat is still capped
    if len(data) > limit:
        raise LineupError(
            code,
            f"{what} {path} is over the limit of {limit} bytes",
            details={"reason": "too_large"},
        )
    return data


class TomlTooDeep(ValueError):
    """TOML nested deeper than `MAX_TOML_DEPTH` (raised before `tomllib` recurses)."""


_TOKEN = re.compile(r'"""|\'\'\'|[\\"\'#\[\]{}\n]')


def _text_depth(text: str, limit: int) -> int:
    """How deeply `[` and `{` nest outside strings and comments (stops above `limit`)."""
    depth = deepest = pos = 0
    state: str | None = None
    while (m := _TOKEN.search(text, pos)) is not None:
        tok, pos = m.group(), m.end()
        if state is None:
            if tok in ("[", "{"):
                depth += 1
                deepest = max(deepest, depth)
                if deepest > limit:
                    return deepest
            elif tok in ("]", "}"):
                depth = max(0, depth - 1)
            elif tok == "#":
                state = "#"
            elif tok in ('"', "'", '"""', "'''"):
                state = tok
        elif state == "#":
            if tok == "\n":
                state = None
        elif tok == "\\" and state in ('"', '"""'):
            pos += 1  # an escaped character never ends the string
        elif tok == state or (tok == "\n" and state in ('"', "'")):
            state = None
    return deepest


def _value_depth(doc: Any, limit: int) -> int:
    deepest = 0
    stack: list[tuple[Any, int]] = [(doc, 0)]
    while stack:
        value, depth = stack.pop()
        deepest = max(deepest, depth)
        if deepest > limit:
            return deepest
        if isinstance(value, dict):
            stack.extend((v, depth + 1) for v in value.values())
        elif isinstance(value, list):
            stack.extend((v, depth + 1) for v in value)
    return deepest


def parse_toml(text: str, *, max_depth: int = MAX_TOML_DEPTH) -> dict[str, Any]:
    """`tomllib.loads` with tables and arrays nested at most `max_depth` levels.

    Raises:
        tomllib.TOMLDecodeError: malformed TOML.
        TomlTooDeep: nested too deeply (checked on the text first, so the parser never
            recurses thousands of levels, and on the result for dotted keys).
    """
    if _text_depth(text, max_depth) > max_depth:
        raise TomlTooDeep(f"nested deeper than {max_depth} levels")
    try:
        doc = tomllib.loads(text)
    except RecursionError:  # belt and braces: the text scan should have stopped it
        raise TomlTooDeep(f"nested deeper than {max_depth} levels") from None
    if _value_depth(doc, max_depth) > max_depth:
        raise TomlTooDeep(f"nested deeper than {max_depth} levels")
    return doc


def check_out_dir(out: Path) -> None:
    """An output folder that can work: a folder, or a path whose nearest existing
    ancestor is a folder.

    Raises:
        LineupError: `usage_invalid` (exit 2) when `out` or an ancestor is a file.
    """
    probe = out
    while True:
        if probe.exists() or probe.is_symlink():
            if not probe.is_dir():
                raise LineupError(
                    "usage_invalid",
                    f"--out {out} must be a folder, but {probe} is a file",
                    hint="pass a folder (it is created if missing)",
                    exit_code=2,
                )
            return
        if probe.parent == probe:
            return
        probe = probe.parent


def atomic_write(path: Path, chunks: Iterable[bytes], *, mode: int = 0o644) -> None:
    """Write `chunks` to a temporary file beside `path`, fsync, then rename over `path`.

    A failure at any point leaves `path` as it was and no temporary file behind.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            for chunk in chunks:
                fh.write(chunk)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """`json.loads` object hook: a key given twice is an error, not "last one wins"."""
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"duplicate key {k!r}")
        out[k] = v
    return out


def reject_constant(name: str) -> Any:
    """`json.loads` constant hook: NaN and Infinity are not JSON."""
    raise ValueError(f"{name} is not JSON")
