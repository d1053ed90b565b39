"""The canonical bundle archive: a stored (uncompressed) zip in one exact byte form.

The writer and the reader share the header encoders below, so "canonical" has a single
definition: any archive whose bytes differ from what `write_bundle` would produce for the
same entries is `bundle_not_canonical`.
"""

from __future__ import annotations

import os
import struct
import time
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from lineup_build.fsutil import atomic_write

__all__ = [
    "CENTRAL_SIG",
    "EOCD_SIG",
    "LOCAL_SIG",
    "BundleEntry",
    "bundle_bytes",
    "central_header",
    "dos_timestamp",
    "end_of_central_directory",
    "local_header",
    "write_bundle",
]

LOCAL_SIG = 0x04034B50
CENTRAL_SIG = 0x02014B50
EOCD_SIG = 0x06054B50
_VERSION = 20  # 2.0: stored entries, no zip64
_MADE_BY = (3 << 8) | _VERSION  # Unix
_FLAGS = 0x0800  # names are UTF-8
_MODE = 0o100644  # regular file, rw-r--r--
_EPOCH_MIN = 315532800  # 1980-01-01T00:00:00Z, the earliest zip time


@dataclass(frozen=True)
class BundleEntry:
    """One archive entry: its name and content."""

    name: str
    data: bytes


def dos_timestamp(epoch: int | None = None) -> tuple[int, int]:
    """`(dos_time, dos_date)` for `SOURCE_DATE_EPOCH` (or 1980-01-01 when unset), in UTC."""
    if epoch is None:
        raw = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
        epoch = int(raw) if raw.isdigit() else _EPOCH_MIN
    epoch = min(max(epoch, _EPOCH_MIN), 4354819199)  # zip dates end in 2107
    t = time.gmtime(epoch)
    dos_time = (t.tm_hour << 11) | (t.tm_min << 5) | (t.tm_sec // 2)
    dos_date = ((t.tm_year - 1980) << 9) | (t.tm_mon << 5) | t.tm_mday
    return dos_time, dos_date


def local_header(name: bytes, crc: int, size: int, stamp: tuple[int, int]) -> bytes:
    """The canonical local file header for a stored entry."""
    return (
        struct.pack(
            "<IHHHHHIIIHH",
            LOCAL_SIG,
            _VERSION,
            _FLAGS,
            0,
            stamp[0],
            stamp[1],
            crc,
            size,
            size,
            len(name),
            0,
        )
        + name
    )


def central_header(name: bytes, crc: int, size: int, stamp: tuple[int, int], offset: int) -> bytes:
    """The canonical central-directory record for a stored entry."""
    return (
        struct.pack(
            "<IHHHHHHIIIHHHHHII",
            CENTRAL_SIG,
            _MADE_BY,
            _VERSION,
            _FLAGS,
            0,
            stamp[0],
            stamp[1],
            crc,
            size,
            size,
            len(name),
            0,
            0,
            0,
            0,
            _MODE << 16,
            offset,
        )
        + name
    )


def end_of_central_directory(count: int, cd_size: int, cd_offset: int) -> bytes:
    """The end-of-central-directory record (no archive comment)."""
    return struct.pack("<IHHHHIIH", EOCD_SIG, 0, 0, count, count, cd_size, cd_offset, 0)


def _chunks(entries: Iterable[BundleEntry], stamp: tuple[int, int]) -> Iterable[bytes]:
    central: list[bytes] = []
    offset = 0
    for entry in entries:
        name = entry.name.encode("utf-8")
        crc = zlib.crc32(entry.data)
        header = local_header(name, crc, len(entry.data), stamp)
        central.append(central_header(name, crc, len(entry.data), stamp, offset))
        yield header
        yield entry.data
        offset += len(header) + len(entry.data)
    cd = b"".join(central)
    yield cd
    yield end_of_central_directory(len(central), len(cd), offset)


def bundle_bytes(entries: list[BundleEntry], *, epoch: int | None = None) -> bytes:
    """The whole canonical archive in memory (tests and small bundles)."""
    return b"".join(_chunks(entries, dos_timestamp(epoch)))


def write_bundle(path: Path, entries: list[BundleEntry], *, epoch: int | None = None) -> None:
    """Write the archive atomically: a temporary file in the same folder, then rename.

    A failure at any point leaves no partial bundle at `path`.
    """
    atomic_write(path, _chunks(entries, dos_timestamp(epoch)))
