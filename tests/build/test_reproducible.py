"""Reproducible, signed bundles: byte-identical rebuilds, timestamps only from the epoch,
signatures that verify and break on any changed byte, and a golden manifest.

The golden files under `golden/` are built from the `todo` template, the fixed test key
and a fixed `SOURCE_DATE_EPOCH`. Regenerate them after an intended change with

    LINEUP_REGEN_GOLDEN=1 python -m pytest tests/build/test_reproducible.py
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import struct
import zipfile
from pathlib import Path
from typing import Any

import pytest

from lineup_build.build import build_project
from lineup_build.bundle import CENTRAL_SIG, EOCD_SIG, LOCAL_SIG, dos_timestamp
from lineup_build.init import init_project
from lineup_build.manifest import manifest_schema_errors, serialize_manifest
from lineup_build.signing import (
    SIGNATURE_DOMAIN,
    SigningKey,
    parse_signature,
    verify_manifest_signature,
)

GOLDEN = Path(__file__).parent / "golden"
EPOCH = 1_700_000_000  # 2023-11-14T22:13:20Z


@pytest.fixture(scope="module")
def todo_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The `todo` template rendered as project `todo` (scope `todo`)."""
    root = tmp_path_factory.mktemp("golden") / "todo"
    init_project(root, template="todo")
    return root


def _build(root: Path, key: SigningKey, out: Path, epoch: int | None = EPOCH) -> bytes:
    result = build_project(root, signing_key=key, out_dir=out, epoch=epoch)
    assert result.ok, [d.to_dict() for d in result.diagnostics]
    assert result.bundle is not None
    return result.bundle.read_bytes()


@pytest.fixture(scope="module")
def bundle(
    todo_project: Path, signing_key: SigningKey, tmp_path_factory: pytest.TempPathFactory
) -> bytes:
    """The todo bundle built with the fixed key and epoch."""
    return _build(todo_project, signing_key, tmp_path_factory.mktemp("out"))


def _entries(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        return {info.filename: zf.read(info) for info in zf.infolist()}


def _timestamp_offsets(data: bytes) -> set[int]:
    """Byte offsets of every DOS time/date field in the archive's headers."""
    offsets: set[int] = set()
    pos = 0
    while struct.unpack_from("<I", data, pos)[0] == LOCAL_SIG:
        offsets.update(range(pos + 10, pos + 14))
        size, name_len, extra_len = (
            struct.unpack_from("<I", data, pos + 18)[0],
            *struct.unpack_from("<HH", data, pos + 26),
        )
        pos += 30 + name_len + extra_len + size
    eocd = len(data) - 22
    assert struct.unpack_from("<I", data, eocd)[0] == EOCD_SIG
    count, _size, cd = struct.unpack_from("<HII", data, eocd + 10)
    pos = cd
    for _ in range(count):
        assert struct.unpack_from("<I", data, pos)[0] == CENTRAL_SIG
        offsets.update(range(pos + 12, pos + 16))
        name_len, extra_len, comment_len = struct.unpack_from("<HHH", data, pos + 28)
        pos += 46 + name_len + extra_len + comment_len
    return offsets


def _zero(data: bytes, offsets: set[int]) -> bytes:
    out = bytearray(data)
    for i in offsets:
        out[i] = 0
    return bytes(out)


# --- determinism ------------------------------------------------------------------------------


def test_two_builds_are_byte_identical(
    todo_project: Path, bundle: bytes, signing_key: SigningKey, tmp_path: Path
) -> None:
    again = _build(todo_project, signing_key, tmp_path / "again")
    assert again == bundle


def test_the_project_folder_location_does_not_matter(
    todo_project: Path, bundle: bytes, signing_key: SigningKey, tmp_path: Path
) -> None:
    moved = tmp_path / "elsewhere" / "todo"
    shutil.copytree(todo_project, moved, ignore=shutil.ignore_patterns("dist", ".lineup"))
    assert _build(moved, signing_key, tmp_path / "out") == bundle


def test_source_date_epoch_changes_only_the_timestamps(
    todo_project: Path, signing_key: SigningKey, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", str(EPOCH))
    first = _build(todo_project, signing_key, tmp_path / "a", epoch=None)
    monkeypatch.setenv("SOURCE_DATE_EPOCH", str(EPOCH + 86_400 * 400 + 3_661))
    second = _build(todo_project, signing_key, tmp_path / "b", epoch=None)

    assert first != second
    stamps = _timestamp_offsets(first)
    assert stamps == _timestamp_offsets(second)
    differing = {i for i, (x, y) in enumerate(zip(first, second, strict=True)) if x != y}
    assert differing and differing <= stamps
    assert _zero(first, stamps) == _zero(second, stamps)


def test_the_epoch_sets_every_entry_time(bundle: bytes) -> None:
    with zipfile.ZipFile(io.BytesIO(bundle)) as zf:
        times = {info.date_time for info in zf.infolist()}
    assert times == {(2023, 11, 14, 22, 13, 20)}


@pytest.mark.parametrize(
    ("epoch", "expected"),
    [
        (0, (0, (0 << 9) | (1 << 5) | 1)),  # before 1980: clamped to 1980-01-01
        (EPOCH, ((22 << 11) | (13 << 5) | 10, (43 << 9) | (11 << 5) | 14)),
        (EPOCH + 1, ((22 << 11) | (13 << 5) | 10, (43 << 9) | (11 << 5) | 14)),  # 2 s steps
    ],
    ids=["before_1980", "fixed", "odd_second"],
)
def test_dos_timestamp(epoch: int, expected: tuple[int, int]) -> None:
    assert dos_timestamp(epoch) == expected


def test_bundle_layout_is_canonical(bundle: bytes, todo_project: Path) -> None:
    with zipfile.ZipFile(io.BytesIO(bundle)) as zf:
        infos = zf.infolist()
        assert zf.testzip() is None
        assert zf.comment == b""
    names = [i.filename for i in infos]
    files = sorted(
        p.relative_to(todo_project).as_posix()
        for p in todo_project.rglob("*")
        # lineup.toml's include: the package's modules and the Surface (not tests/, conftest.py)
        if p.is_file()
        and p.relative_to(todo_project).parts[0] in ("todo_app", "surface")
        and (p.suffix == ".py" or p.parts[-2] == "surface")
    )
    # the Surface document the build writes (SPEC 18.2) sits among them, in path order
    listed = sorted([*files, "_lineup/surface.html"])
    assert names == ["manifest.json", "manifest.sig", *(f"app/{f}" for f in listed)]
    for info in infos:
        assert info.compress_type == zipfile.ZIP_STORED
        assert info.external_attr >> 16 == 0o100644
        assert info.extra == b""
        assert info.flag_bits == 0x0800
    manifest = json.loads(_entries(bundle)["manifest.json"])
    assert [f["path"] for f in manifest["files"]] == files
    for f in manifest["files"]:
        data = (todo_project / f["path"]).read_bytes()
        assert f["size"] == len(data) and f["sha256"] == hashlib.sha256(data).hexdigest()


def test_manifest_is_canonical_and_matches_its_schema(bundle: bytes) -> None:
    raw = _entries(bundle)["manifest.json"]
    manifest = json.loads(raw)
    assert serialize_manifest(manifest) == raw  # sorted keys, no whitespace
    assert manifest_schema_errors(manifest) == []
    assert [t["method"] for t in manifest["tools"]] == ["todo.add", "todo.complete", "todo.list"]


# --- signature -------------------------------------------------------------------------------


def test_signature_verifies_with_the_public_key(bundle: bytes, signing_key: SigningKey) -> None:
    entries = _entries(bundle)
    sig = parse_signature(entries["manifest.sig"])
    assert sig.key_id == signing_key.key_id
    assert verify_manifest_signature(
        signing_key.public_raw, sig.signature, entries["manifest.json"]
    )
    doc = json.loads(entries["manifest.sig"])
    assert set(doc) == {"algorithm", "key_id", "signature"} and doc["algorithm"] == "ed25519"


def test_signature_is_domain_separated(bundle: bytes, signing_key: SigningKey) -> None:
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    entries = _entries(bundle)
    sig = parse_signature(entries["manifest.sig"]).signature
    public = Ed25519PublicKey.from_public_bytes(signing_key.public_raw)
    public.verify(sig, SIGNATURE_DOMAIN + entries["manifest.json"])
    with pytest.raises(InvalidSignature):
        public.verify(sig, entries["manifest.json"])  # the bare manifest is not what was signed


@pytest.mark.parametrize("mask", [0x01, 0x80, 0xFF], ids=["low_bit", "high_bit", "all_bits"])
def test_changing_any_manifest_byte_breaks_the_signature(
    bundle: bytes, signing_key: SigningKey, mask: int
) -> None:
    entries = _entries(bundle)
    manifest = entries["manifest.json"]
    sig = parse_signature(entries["manifest.sig"]).signature
    broken = []
    for i in range(len(manifest)):
        tampered = bytearray(manifest)
        tampered[i] ^= mask
        broken.append(verify_manifest_signature(signing_key.public_raw, sig, bytes(tampered)))
    assert not any(broken)
    assert not verify_manifest_signature(signing_key.public_raw, sig, manifest + b" ")
    assert not verify_manifest_signature(signing_key.public_raw, sig, manifest[:-1])


def test_another_key_does_not_verify(bundle: bytes) -> None:
    from lineup_build.signing import key_from_seed

    entries = _entries(bundle)
    sig = parse_signature(entries["manifest.sig"]).signature
    other = key_from_seed(bytes(32))
    assert not verify_manifest_signature(other.public_raw, sig, entries["manifest.json"])


# --- golden ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["manifest.json", "manifest.sig"])
def test_golden_manifest(bundle: bytes, name: str) -> None:
    """The todo template's manifest and signature, byte for byte (see the module docstring)."""
    actual = _entries(bundle)[name]
    golden = GOLDEN / f"todo.{name}"
    if os.environ.get("LINEUP_REGEN_GOLDEN") == "1":
        golden.parent.mkdir(exist_ok=True)
        golden.write_bytes(actual)
    assert golden.exists(), f"missing {golden}; run with LINEUP_REGEN_GOLDEN=1"
    expected = golden.read_bytes()
    if actual != expected:
        diff = _first_difference(expected, actual)
        pytest.fail(
            f"{name} differs from {golden.name} at byte {diff}; if the change is intended, "
            "regenerate with LINEUP_REGEN_GOLDEN=1"
        )


def _first_difference(a: bytes, b: bytes) -> Any:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return f"{i}: {a[max(0, i - 40) : i + 40]!r} != {b[max(0, i - 40) : i + 40]!r}"
    return f"{min(len(a), len(b))} (lengths {len(a)} and {len(b)})"
