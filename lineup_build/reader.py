"""A zip reader for bundles that hostile input cannot break: limits first, no extraction.

The reader parses the archive structure itself (end record, central directory, local
headers) instead of trusting `zipfile`, which repairs bad names on extraction. It never
decompresses anything: bundles are stored flat, so a declared size is the real size and a
decompression bomb cannot exist (a compressed entry is simply not canonical).
"""

from __future__ import annotations

import re
import stat
import struct
import unicodedata
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import BinaryIO

from lineup_build.bundle import CENTRAL_SIG, EOCD_SIG, LOCAL_SIG
from lineup_build.fsutil import open_regular
from lineup_sdk.errors import LineupError

__all__ = [
    "CHUNK",
    "LIMIT_OPTIONS",
    "Archive",
    "ArchiveEntry",
    "Limits",
    "entry_name_problem",
    "iter_entry_chunks",
    "read_archive",
]

CHUNK = 1024 * 1024
_EOCD = struct.Struct("<IHHHHIIH")
_CENTRAL = struct.Struct("<IHHHHHHIIIHHHHHII")
_LOCAL = struct.Struct("<IHHHHHIIIHH")
_MAX_COMMENT = 0xFFFF
_EOCD_MAGIC = struct.pack("<I", EOCD_SIG)
_DRIVE = re.compile(r"[A-Za-z]:")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")  # exactly Unicode category Cc
_UNIX = 3


@dataclass(frozen=True)
class Limits:
    """Size, count and depth limits for one bundle (defaults from SPEC 4; injectable)."""

    max_manifest_bytes: int = 4 * 1024 * 1024
    max_depth: int = 64
    max_files: int = 10_000
    max_total_bytes: int = 256 * 1024 * 1024
    max_path_bytes: int = 512

    def raised(
        self, values: Mapping[str, object], *, code: str = "usage_invalid", source: str = ""
    ) -> Limits:
        """These limits with `values` (`max_manifest_bytes`, `max_files`,
        `max_total_bytes`: what a user may set) in their place.

        Raises:
            LineupError: `code` (`usage_invalid` for an option or argument,
                `config_invalid` for `lineup.toml`) for an unknown name, or a value that
                is not a whole number from 1 to the limit's ceiling; `source` prefixes the
                name in the message (`limits.` for the config table).
        """
        for key, value in values.items():
            if key not in LIMIT_OPTIONS:
                raise LineupError(
                    code,
                    f"unknown limit {source}{key}",
                    hint=f"the limits a user sets: {', '.join(sorted(LIMIT_OPTIONS))}",
                )
            ceiling = _CEILINGS[key]
            if type(value) is not int or not 1 <= value <= ceiling:
                raise LineupError(
                    code,
                    f"{source}{key} = {value!r} is not a whole number from 1 to {ceiling}",
                    hint=f"e.g. {key} = {getattr(Limits(), key) * 2}",
                )
        return replace(self, **values)  # type: ignore[arg-type]

    @property
    def max_bundle_bytes(self) -> int:
        """The largest bundle file within these limits: content, manifest, signature,
        and the ZIP records of every entry (a file larger than this cannot pass)."""
        entries = self.max_files + 2
        per_entry = 30 + 46 + 2 * self.max_path_bytes + 64  # local + central records
        return self.max_total_bytes + 2 * self.max_manifest_bytes + entries * per_entry + 65_536


#: The limits a user may set, and the option that sets each on `lineup build` and
#: `lineup verify` (in `lineup.toml` they are keys of a `[limits]` table; in the Python API
#: `Runtime.open(bundle_limits=Limits(...))` and `verify_bundle(limits=...)`).
LIMIT_OPTIONS = {
    "max_manifest_bytes": "--max-manifest-bytes",
    "max_files": "--max-files",
    "max_total_bytes": "--max-total-bytes",
}
#: How far each may be raised (the reader stays bounded whatever a user sets).
_CEILINGS = {
    "max_manifest_bytes": 1 << 30,  # 1 GiB
    "max_files": 1_000_000,
    "max_total_bytes": 1 << 36,  # 64 GiB
}


def raise_hint(key: str) -> str:
    """The hint of a `limits_exceeded` over limit `key`: where a user raises it."""
    option = LIMIT_OPTIONS[key]
    return (
        f"if it is meant to be this large, raise the limit: `{option} N` on lineup build "
        f"and lineup verify, `{key} = N` under [limits] in lineup.toml (or "
        f"[tool.lineup.limits]), `Runtime.open(..., bundle_limits=Limits({key}=N))` where "
        "it is installed"
    )


@dataclass(frozen=True)
class ArchiveEntry:
    """One entry as its central record describes it, plus where its data starts.

    `central_raw` and `local_raw` hold the fixed part and the name of each record (the
    lengths of any extra field or comment are inside the fixed part), which is all the
    canonical-form check needs.
    """

    name: str
    name_bytes: bytes
    made_by: int
    version: int
    flags: int
    method: int
    stamp: tuple[int, int]
    crc: int
    compressed_size: int
    size: int
    external_attr: int
    header_offset: int
    data_offset: int
    central_raw: bytes
    local_raw: bytes

    @property
    def readable(self) -> bool:
        """Stored, unencrypted, no data descriptor: the data is the content, byte for byte."""
        return self.method == 0 and not self.flags & 0x49 and self.compressed_size == self.size


@dataclass
class Archive:
    """The parsed structure of a bundle file (no content read yet)."""

    path: Path
    file_size: int
    entries: list[ArchiveEntry]
    cd_offset: int
    cd_size: int
    eocd_raw: bytes
    trailing: int = 0  # bytes after the end record (or its comment)
    by_name: dict[str, ArchiveEntry] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.by_name = {e.name: e for e in self.entries}


def _err(code: str, message: str, **details: object) -> LineupError:
    return LineupError(code, message, details=details or None)


def _over(key: str, message: str) -> LineupError:
    """`limits_exceeded` over limit `key`, with the hint that names where to raise it."""
    return LineupError("limits_exceeded", message, hint=raise_hint(key))


def entry_name_problem(name: str) -> str | None:
    """Why an archive entry name is unsafe (traversal, absolute, control, ...), or None."""
    if not name:
        return "empty name"
    if "\\" in name:
        return "backslash in name"
    if name.startswith("/"):
        return "absolute path"
    if _DRIVE.match(name):
        return "drive letter"
    if _CONTROL.search(name):
        return "control character in name"
    segments = name.split("/")
    if ".." in segments:
        return "'..' segment (path traversal)"
    if name.endswith("/"):
        return "directory entry"
    if any(s in ("", ".") for s in segments):
        return "empty or '.' segment"
    if not name.isascii() and not unicodedata.is_normalized("NFC", name):
        return "name is not NFC-normalized"
    return None


def collision_key(name: str) -> str:
    """Names that collide on a case-insensitive or normalizing disk share this key."""
    return unicodedata.normalize("NFC", unicodedata.normalize("NFC", name).casefold())


def _type_problem(made_by: int, external_attr: int) -> str | None:
    if external_attr & 0x10:
        return "directory posing as a file"
    if made_by >> 8 == _UNIX:
        fmt = stat.S_IFMT(external_attr >> 16)
        if fmt == stat.S_IFLNK:
            return "symlink entry"
        if fmt == stat.S_IFDIR:
            return "directory posing as a file"
        if fmt not in (0, stat.S_IFREG):
            return "not a regular file"
    return None


def _find_eocd(fh: BinaryIO, size: int) -> tuple[int, bytes, int]:
    """`(offset, record, comment_length)` of the last plausible end record."""
    start = max(0, size - _EOCD.size - _MAX_COMMENT)
    fh.seek(start)
    tail = fh.read(size - start)
    pos = len(tail)
    while True:
        pos = tail.rfind(_EOCD_MAGIC, 0, pos)
        if pos < 0:
            raise _err(
                "bundle_unreadable", "not a zip archive (no end-of-central-directory record)"
            )
        if pos + _EOCD.size <= len(tail):
            record = tail[pos : pos + _EOCD.size]
            comment = _EOCD.unpack(record)[7]
            if pos + _EOCD.size + comment <= len(tail):
                return start + pos, record, comment


def _parse(
    fh: BinaryIO, path: Path, size: int, limits: Limits
) -> tuple[Archive, list[LineupError]]:
    if size == 0:
        raise _err("bundle_unreadable", "the bundle is an empty file")
    if size < _EOCD.size:
        raise _err("bundle_unreadable", f"not a zip archive ({size} bytes)")
    eocd_at, eocd_raw, comment = _find_eocd(fh, size)
    _, disk, cd_disk, count_here, count, cd_size, cd_offset, _ = _EOCD.unpack(eocd_raw)
    if disk or cd_disk or count_here != count:
        raise _err("bundle_not_canonical", "multi-disk archives are not bundles")
    if count > limits.max_files + 2:
        raise _over("max_files", f"{count} entries exceed the limit of {limits.max_files} files")
    # Canonical records are 46 bytes plus the name; allow one maximal extra field beyond
    # that so a slightly odd archive is reported as non-canonical, not as over a limit.
    if cd_size > count * (_CENTRAL.size + limits.max_path_bytes) + _MAX_COMMENT:
        raise _err("limits_exceeded", f"a central directory of {cd_size} bytes for {count} entries")
    if cd_offset + cd_size > eocd_at:
        raise _err("bundle_unreadable", "the central directory overlaps the end record")
    if cd_offset + cd_size < eocd_at:
        gap = eocd_at - cd_offset - cd_size
        raise _err(
            "bundle_not_canonical",
            f"{gap} unexpected bytes before the archive or inside it",
            bytes=gap,
        )
    fh.seek(cd_offset)
    cd = fh.read(cd_size)
    problems: list[LineupError] = []
    entries: list[ArchiveEntry] = []
    pos = 0
    total = 0
    for _ in range(count):
        entry, pos = _central_entry(fh, cd, pos, cd_offset, limits, problems)
        if entry is not None:
            entries.append(entry)
            total += entry.size
    if pos != cd_size:
        raise _err("bundle_not_canonical", "unexpected bytes inside the central directory")
    app_entries = sum(1 for e in entries if e.name.startswith("app/"))
    if app_entries > limits.max_files:
        problems.append(
            _over("max_files", f"{app_entries} files exceed the limit of {limits.max_files}")
        )
    if total > limits.max_total_bytes:
        problems.append(
            _over(
                "max_total_bytes",
                f"{total} bytes of content exceed the limit of {limits.max_total_bytes}",
            )
        )
    problems.extend(_collisions(entries))
    manifest = next((e for e in entries if e.name == "manifest.json"), None)
    if manifest is not None and manifest.size > limits.max_manifest_bytes:
        problems.append(
            _over(
                "max_manifest_bytes",
                f"manifest.json is {manifest.size} bytes, over the limit of "
                f"{limits.max_manifest_bytes}",
            )
        )
    archive = Archive(path, size, entries, cd_offset, cd_size, eocd_raw)
    archive.trailing = size - (eocd_at + _EOCD.size + comment)
    if comment:
        problems.append(_err("bundle_not_canonical", f"the archive has a {comment}-byte comment"))
    if archive.trailing:
        problems.append(
            _err("bundle_not_canonical", f"{archive.trailing} unexpected bytes after the archive")
        )
    return archive, problems


def _central_entry(
    fh: BinaryIO, cd: bytes, pos: int, cd_offset: int, limits: Limits, problems: list[LineupError]
) -> tuple[ArchiveEntry | None, int]:
    if pos + _CENTRAL.size > len(cd):
        raise _err("bundle_unreadable", "the central directory is truncated")
    fields = _CENTRAL.unpack_from(cd, pos)
    sig, made_by, version, flags, method, t, d, crc, csize, usize, n, m, k = fields[:13]
    ext, offset = fields[15], fields[16]
    end = pos + _CENTRAL.size + n + m + k
    if sig != CENTRAL_SIG or end > len(cd):
        raise _err("bundle_unreadable", "the central directory is corrupt")
    name_bytes = cd[pos + _CENTRAL.size : pos + _CENTRAL.size + n]
    central_raw = cd[pos : pos + _CENTRAL.size + n]
    shown = name_bytes.decode("utf-8", "backslashreplace")
    if n > limits.max_path_bytes:
        problems.append(
            _err(
                "limits_exceeded",
                f"entry {shown!r}: name of {n} bytes exceeds {limits.max_path_bytes}",
                entry=shown,
            )
        )
        return None, end
    try:
        name = name_bytes.decode("utf-8")
    except UnicodeDecodeError:
        problems.append(_err("unsafe_path", f"entry {shown!r}: name is not UTF-8", entry=shown))
        return None, end
    why = entry_name_problem(name) or _type_problem(made_by, ext)
    if not why and not flags & 0x0800 and not name.isascii():
        why = "non-ASCII name without the UTF-8 flag"
    if offset + _LOCAL.size > cd_offset:
        raise _err("bundle_unreadable", f"entry {shown!r}: local header out of bounds")
    fh.seek(offset)
    local = fh.read(_LOCAL.size + n)
    lsig, *_, ln, lm = _LOCAL.unpack_from(local)
    if lsig != LOCAL_SIG:
        raise _err("bundle_unreadable", f"entry {shown!r}: no local header at offset {offset}")
    if ln != n or local[_LOCAL.size :] != name_bytes:
        why = why or "local header name differs from the central directory"
    data_offset = offset + _LOCAL.size + ln + lm
    if data_offset + csize > cd_offset:
        raise _err("bundle_unreadable", f"entry {shown!r}: data runs past the archive")
    if why:
        problems.append(_err("unsafe_path", f"entry {shown!r}: {why}", entry=shown))
        return None, end
    entry = ArchiveEntry(
        name, name_bytes, made_by, version, flags, method, (t, d), crc, csize, usize, ext,
        offset, data_offset, central_raw, local,
    )  # fmt: skip
    return entry, end


def _collisions(entries: list[ArchiveEntry]) -> list[LineupError]:
    seen: dict[str, str] = {}
    out = []
    for e in entries:
        key = collision_key(e.name)
        if key in seen:
            how = "duplicate entry" if seen[key] == e.name else f"collides with {seen[key]!r}"
            out.append(_err("unsafe_path", f"entry {e.name!r}: {how}", entry=e.name))
        else:
            seen[key] = e.name
    return out


def read_archive(
    path: Path, limits: Limits, fh: BinaryIO | None = None
) -> tuple[Archive | None, list[LineupError]]:
    """Parse the archive structure and enforce the limits, reading no content.

    Args:
        path: The bundle file.
        limits: The limits to enforce.
        fh: An already open, unbuffered handle on `path` (the caller then keeps reading
            through the same handle, so every later check sees the same file).

    Returns:
        The archive (None when it cannot be read safely) and every problem found: a
        fatal one alone, or each unsafe name, limit and framing problem.
    """
    try:
        if fh is not None:
            return _parse(fh, path, fh.seek(0, 2), limits)
        with open_regular(
            path, limit=limits.max_bundle_bytes, code="bundle_unreadable", what="bundle"
        ) as own:
            return _parse(own, path, own.seek(0, 2), limits)
    except LineupError as exc:
        return None, [exc]
    except OSError as exc:
        return None, [_err("bundle_unreadable", f"cannot read {path}: {exc.strerror or exc}")]


def iter_entry_chunks(fh: BinaryIO, offset: int, size: int, buf: bytearray) -> Iterator[memoryview]:
    """Yield the `size` bytes at `offset` in views of `buf` (reused; copy to keep).

    Stops early when the file is shorter than promised (the caller's hash then differs).
    """
    view = memoryview(buf)
    fh.seek(offset)
    left = size
    while left:
        n = fh.readinto(view[: min(left, len(buf))])  # type: ignore[attr-defined]
        if not n:
            return
        left -= n
        yield view[:n]
