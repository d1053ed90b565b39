"""Byte mutations of a valid bundle never verify, and only ever raise `VerifyError`."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lineup_build.verify import VerifyError, check_bundle, verify_bundle
from tests.build.bundle_kit import good_bundle, trust

BUNDLE = good_bundle()
STORE = trust()


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mutation")


def _rejected(path: Path, data: bytes) -> VerifyError:
    path.write_bytes(data)
    try:
        verify_bundle(path, STORE)
    except VerifyError as exc:
        return exc
    pytest.fail("a mutated bundle verified")


def test_the_original_verifies(workdir: Path) -> None:
    path = workdir / "original.lineup"
    path.write_bytes(BUNDLE)
    assert verify_bundle(path, STORE).manifest_bytes in BUNDLE


@settings(max_examples=200, deadline=None)
@given(position=st.integers(0, len(BUNDLE) - 1), xor=st.integers(1, 255))
def test_any_single_byte_mutation_never_verifies(workdir: Path, position: int, xor: int) -> None:
    mutated = bytearray(BUNDLE)
    mutated[position] ^= xor
    err = _rejected(workdir / "mutated.lineup", bytes(mutated))
    report = check_bundle(workdir / "mutated.lineup", STORE)
    assert not report.ok and report.problems[0].code == err.code


def test_flipping_any_bit_of_any_byte_never_verifies(workdir: Path) -> None:
    """Exhaustive over positions for the low bit, so every header field is hit once."""
    path = workdir / "flipped.lineup"
    codes = set()
    for position in range(len(BUNDLE)):
        mutated = bytearray(BUNDLE)
        mutated[position] ^= 0x01
        codes.add(_rejected(path, bytes(mutated)).code)
    assert codes <= {
        "bundle_unreadable",
        "bundle_not_canonical",
        "unsafe_path",
        "limits_exceeded",
        "bundle_layout_invalid",
        "signature_missing",
        "signature_invalid",
        "untrusted_key",
        "file_hash_mismatch",
        "file_missing",
        "file_unlisted",
    }, codes


@settings(max_examples=100, deadline=None)
@given(cut=st.integers(0, len(BUNDLE) - 1), junk=st.binary(max_size=64))
def test_truncation_and_splicing_never_verify(workdir: Path, cut: int, junk: bytes) -> None:
    _rejected(workdir / "spliced.lineup", BUNDLE[:cut] + junk)
