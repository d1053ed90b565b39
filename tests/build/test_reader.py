"""The safe bundle reader: structure parsing, names, canonical form, layout, streaming."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest

from lineup_build.bundle import BundleEntry
from lineup_build.canonical import canonical_problems, layout_problems
from lineup_build.manifest_checks import json_depth
from lineup_build.reader import Limits, entry_name_problem, iter_entry_chunks, read_archive
from tests.build.bundle_kit import FILES, canonical, entries, good_bundle, raw_from, raw_zip


def _write(tmp_path: Path, data: bytes, name: str = "b.lineup") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def test_limits_defaults_are_the_spec_values() -> None:
    limits = Limits()
    assert limits.max_manifest_bytes == 4 * 1024 * 1024
    assert limits.max_depth == 64
    assert limits.max_files == 10_000
    assert limits.max_total_bytes == 256 * 1024 * 1024
    assert limits.max_path_bytes == 512


def test_test_writer_and_bundle_writer_agree_byte_for_byte() -> None:
    # Two independent encoders of the same canonical form.
    assert raw_zip(raw_from(entries())) == good_bundle()


def test_reads_a_canonical_bundle_without_problems(tmp_path: Path) -> None:
    data = good_bundle()
    archive, problems = read_archive(_write(tmp_path, data), Limits())
    assert problems == []
    assert archive is not None
    assert [e.name for e in archive.entries] == [e.name for e in entries()]
    assert canonical_problems(archive) == []
    assert layout_problems(archive) == ([], True)
    for entry in archive.entries:
        assert entry.readable
        expected = next(e.data for e in entries() if e.name == entry.name)
        assert data[entry.data_offset : entry.data_offset + entry.size] == expected


def test_standard_zip_tools_read_the_bundle() -> None:
    with zipfile.ZipFile(io.BytesIO(good_bundle())) as zf:
        assert zf.testzip() is None
        for path, data in FILES.items():
            assert zf.read(f"app/{path}") == data
            assert zf.getinfo(f"app/{path}").compress_type == zipfile.ZIP_STORED


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("manifest.json", None),
        ("app/todo_app/tools.py", None),
        ("app/caf\u00e9/x.txt", None),
        ("", "empty name"),
        ("app/../x", "'..' segment (path traversal)"),
        ("/abs", "absolute path"),
        ("a\\b", "backslash in name"),
        ("C:/x", "drive letter"),
        ("app/\x1b[31m", "control character in name"),
        ("app/\x85next-line", "control character in name"),
        ("app/x/", "directory entry"),
        ("app/./x", "empty or '.' segment"),
        ("app//x", "empty or '.' segment"),
        ("app/cafe\u0301", "name is not NFC-normalized"),
    ],
    ids=[
        "manifest",
        "app-file",
        "nfc-unicode",
        "empty",
        "dotdot",
        "absolute",
        "backslash",
        "drive",
        "escape-sequence",
        "c1-control",
        "trailing-slash",
        "dot",
        "double-slash",
        "decomposed",
    ],
)
def test_entry_name_rules(name: str, why: str | None) -> None:
    assert entry_name_problem(name) == why


@pytest.mark.parametrize(
    ("text", "depth"),
    [
        (b"1", 0),
        (b"{}", 1),
        (b'{"a":[1,{"b":[]}]}', 4),
        (b'{"a":"[[[[{{{{"}', 1),
        (b'{"a":"\\"[[[["}', 1),
        (b'["\\\\",[["]"]]]', 3),
        (b"[" * 500 + b"]" * 500, 500),
        (b'"unterminated [[[', 3),
    ],
    ids=[
        "scalar",
        "empty-object",
        "nested",
        "brackets-in-string",
        "escaped-quote",
        "escaped-backslash",
        "very-deep",
        "unterminated-string",
    ],
)
def test_json_depth_ignores_strings(text: bytes, depth: int) -> None:
    assert json_depth(text) == depth


def test_json_depth_stops_early() -> None:
    assert json_depth(b"[" * 10_000, stop_above=64) == 65


def test_entries_stream_in_bounded_chunks(tmp_path: Path) -> None:
    data = bytes(range(256)) * 40
    path = _write(tmp_path, b"xx" + data + b"yy", "blob")
    buf = bytearray(1000)
    with open(path, "rb", buffering=0) as fh:
        chunks = [bytes(c) for c in iter_entry_chunks(fh, 2, len(data), buf)]
        assert all(len(c) <= 1000 for c in chunks)
        assert b"".join(chunks) == data
        short = b"".join(bytes(c) for c in iter_entry_chunks(fh, 2, len(data) + 10**6, buf))
        assert short == data + b"yy"  # stops at end of file; the caller's hash then differs


@pytest.mark.parametrize(
    ("make", "code"),
    [
        (lambda p: p / "missing.lineup", "bundle_unreadable"),
        (lambda p: p, "bundle_unreadable"),
    ],
    ids=["missing-file", "a-folder"],
)
def test_unreadable_paths(tmp_path: Path, make: object, code: str) -> None:
    archive, problems = read_archive(make(tmp_path), Limits())  # type: ignore[operator]
    assert archive is None
    assert [p.code for p in problems] == [code]


@pytest.mark.parametrize(
    ("limits", "n_files", "ok"),
    [
        (Limits(max_files=3), 3, True),
        (Limits(max_files=3), 4, False),
        (Limits(max_total_bytes=1000), 1, True),
        (Limits(max_total_bytes=999), 1, False),
    ],
    ids=["files-at-limit", "files-over", "bytes-at-limit", "bytes-over"],
)
def test_limits_are_inclusive(tmp_path: Path, limits: Limits, n_files: int, ok: bool) -> None:
    items = [
        BundleEntry("manifest.json", b"{}"),
        BundleEntry("manifest.sig", b"{}"),
        *(BundleEntry(f"app/f{i}", b"x" * (996 // n_files)) for i in range(n_files)),
    ]
    _, problems = read_archive(_write(tmp_path, canonical(items)), limits)
    assert (problems == []) is ok
    assert all(p.code == "limits_exceeded" for p in problems)


def test_problems_are_collected_for_every_bad_name(tmp_path: Path) -> None:
    bad = [BundleEntry(n, b"") for n in ("app/../a", "/b", "app/c\\d")]
    _, problems = read_archive(_write(tmp_path, canonical([*entries(), *bad])), Limits())
    assert [p.code for p in problems] == ["unsafe_path"] * 3
    assert [p.details["entry"] for p in problems] == ["app/../a", "/b", "app/c\\d"]


def test_non_canonical_reports_are_capped(tmp_path: Path) -> None:
    items = raw_from([*entries()[:2], *(BundleEntry(f"app/f{i:03d}", b"x") for i in range(50))])
    for r in items:
        r.mode = 0o100600
    archive, problems = read_archive(_write(tmp_path, raw_zip(items)), Limits())
    assert archive is not None and problems == []
    found = canonical_problems(archive)
    assert len(found) == 21
    assert found[-1].message == "... and 32 more non-canonical entries"


def test_app_entries_count_against_the_file_limit_even_without_a_manifest(
    tmp_path: Path,
) -> None:
    items = [BundleEntry(f"app/f{i}", b"") for i in range(4)]
    _, problems = read_archive(_write(tmp_path, canonical(items)), Limits(max_files=3))
    assert [p.code for p in problems] == ["limits_exceeded"]
