"""The canonical-form and layout checks: is this archive exactly what `lineup build` writes?

Canonical bytes are defined once, by the encoders in `lineup_build.bundle`; this module
re-encodes every record from the entry's name, CRC, size and the archive's one timestamp
and compares bytes, so any re-zipped or edited bundle fails.
"""

from __future__ import annotations

import calendar
import struct

from lineup_build.bundle import (
    central_header,
    dos_timestamp,
    end_of_central_directory,
    local_header,
)
from lineup_build.reader import Archive, ArchiveEntry
from lineup_sdk.errors import LineupError

__all__ = ["MANIFEST_NAME", "SIGNATURE_NAME", "canonical_problems", "layout_problems"]

MANIFEST_NAME = "manifest.json"
SIGNATURE_NAME = "manifest.sig"
APP_PREFIX = "app/"
_MAX_REPORTED = 20


def _order_key(name: str) -> tuple[int, str]:
    rank = {MANIFEST_NAME: 0, SIGNATURE_NAME: 1}.get(name, 2)
    return rank, name


def _stamp_is_canonical(stamp: tuple[int, int]) -> bool:
    """Whether `stamp` is one `dos_timestamp` can produce (a real time, 1980 or later)."""
    t, d = stamp
    try:
        epoch = calendar.timegm(
            (1980 + (d >> 9), (d >> 5) & 0xF, d & 0x1F, t >> 11, (t >> 5) & 0x3F, (t & 0x1F) * 2)
        )
    except (ValueError, OverflowError):
        return False
    return dos_timestamp(epoch) == stamp


def _why(entry: ArchiveEntry, expected_offset: int, stamp: tuple[int, int]) -> str:
    """A readable reason why an entry's records differ from the canonical ones."""
    reasons = []
    if entry.method != 0:
        reasons.append(f"compression method {entry.method} (bundles are stored, method 0)")
    if entry.flags & 0x41:
        reasons.append("encrypted")
    elif entry.flags != 0x0800:
        reasons.append(f"flags 0x{entry.flags:04x} (canonical 0x0800)")
    if entry.stamp != stamp:
        reasons.append("its timestamp differs from the archive's")
    if entry.header_offset != expected_offset:
        reasons.append(f"offset {entry.header_offset} (canonical {expected_offset})")
    m, k = struct.unpack_from("<HH", entry.central_raw, 30)
    if m or k or struct.unpack_from("<H", entry.local_raw, 28)[0]:
        reasons.append("extra fields or a comment")
    if entry.external_attr >> 16 != 0o100644 or entry.made_by != 0x0314:
        reasons.append(f"mode/host 0o{entry.external_attr >> 16:o}/0x{entry.made_by:04x}")
    return "; ".join(reasons) or "header bytes differ from the canonical encoding"


def canonical_problems(archive: Archive) -> list[LineupError]:
    """Every way the archive differs from the exact form `write_bundle` produces.

    Checks entry order, one shared canonical timestamp, each local header and central
    record byte-for-byte (compression, flags, versions, mode, extra fields, offsets) and
    the end record. At most 20 entries are reported one by one, then a summary.
    """
    entries = archive.entries
    out: list[LineupError] = []
    names = [e.name for e in entries]
    expected = sorted(names, key=_order_key)
    if names != expected:
        first = next(i for i, (a, b) in enumerate(zip(names, expected, strict=True)) if a != b)
        out.append(
            LineupError(
                "bundle_not_canonical",
                f"entries are not in canonical order (position {first}: {names[first]!r}, "
                f"expected {expected[first]!r})",
            )
        )
    if not entries:
        return out
    stamp = entries[0].stamp
    if not _stamp_is_canonical(stamp):
        out.append(LineupError("bundle_not_canonical", "the archive timestamp is not valid"))
    offset = 0
    bad: list[str] = []
    for e in entries:
        local = local_header(e.name_bytes, e.crc, e.size, stamp)
        central = central_header(e.name_bytes, e.crc, e.size, stamp, offset)
        if e.local_raw != local or e.central_raw != central:
            bad.append(e.name)
            if len(bad) <= _MAX_REPORTED:
                out.append(
                    LineupError(
                        "bundle_not_canonical",
                        f"entry {e.name!r}: {_why(e, offset, stamp)}",
                        details={"entry": e.name},
                    )
                )
        offset += len(local) + e.size
    if len(bad) > _MAX_REPORTED:
        out.append(
            LineupError(
                "bundle_not_canonical",
                f"... and {len(bad) - _MAX_REPORTED} more non-canonical entries",
            )
        )
    if archive.cd_offset != offset:
        out.append(
            LineupError(
                "bundle_not_canonical",
                f"central directory at {archive.cd_offset}, canonical {offset}",
            )
        )
    eocd = end_of_central_directory(len(entries), archive.cd_size, archive.cd_offset)
    if archive.eocd_raw != eocd:
        out.append(LineupError("bundle_not_canonical", "the end record is not canonical"))
    return out


def layout_problems(archive: Archive) -> tuple[list[LineupError], bool]:
    """Entries outside `manifest.json`, `manifest.sig`, `app/<path>`; a missing manifest.

    Returns:
        The problems, and whether verification can go on (False without a manifest).
    """
    out: list[LineupError] = []
    for name in archive.by_name:
        if name not in (MANIFEST_NAME, SIGNATURE_NAME) and not name.startswith(APP_PREFIX):
            out.append(
                LineupError(
                    "bundle_layout_invalid",
                    f"entry {name!r} is outside the bundle layout",
                    details={"entry": name},
                )
            )
    if MANIFEST_NAME not in archive.by_name:
        out.insert(0, LineupError("bundle_layout_invalid", "the bundle has no manifest.json"))
        return out, False
    if SIGNATURE_NAME not in archive.by_name:
        out.append(LineupError("signature_missing", "the bundle has no manifest.sig"))
    return out, True
