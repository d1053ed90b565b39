"""Tests a mutation audit found missing (issue 10): each fails if one line of the code it
guards is changed (the key a signature is checked against, the weak-key list, build
timestamps taken from file mtimes)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from lineup_build.build import build_project
from lineup_build.init import init_project
from lineup_build.signing import SigningKey, is_weak_public_key, key_id_of
from lineup_build.trust import TrustedKey, TrustStore
from lineup_build.verify import check_bundle
from lineup_sdk.errors import LineupError
from tests.build.bundle_kit import KEY, OTHER, canonical, entries, sign

# -- 1. a signature is checked only against the key its key_id names ---------------------


def test_a_signature_by_key_b_naming_key_a_is_signature_invalid(tmp_path: Path) -> None:
    store = TrustStore.from_keys(
        [
            TrustedKey(KEY.key_id, KEY.public_raw, ("todo",), "A"),
            TrustedKey(OTHER.key_id, OTHER.public_raw, ("other",), "B"),
        ]
    )
    items = entries()
    manifest_bytes = items[0].data
    forged = sign(manifest_bytes, OTHER, key_id=KEY.key_id)  # B signs, names A
    path = tmp_path / "forged.lineup"
    path.write_bytes(canonical([items[0], type(items[1])("manifest.sig", forged), *items[2:]]))
    report = check_bundle(path, store)
    codes = [p.code for p in report.problems]
    assert "signature_invalid" in codes, codes
    assert not report.ok
    # and B naming itself is refused for the scope it may not sign (not accepted as A)
    honest = sign(manifest_bytes, OTHER)
    path.write_bytes(canonical([items[0], type(items[1])("manifest.sig", honest), *items[2:]]))
    assert "scope_not_allowed" in [p.code for p in check_bundle(path, store).problems]
    # the control: A signing as A verifies
    path.write_bytes(canonical(items))
    assert check_bundle(path, store).ok


# -- 2. the weak-key list covers the order-8 points and non-canonical encodings ------------
P = 2**255 - 19
D = (-121665 * pow(121666, P - 2, P)) % P
SQRT_M1 = pow(2, (P - 1) // 4, P)


def _sqrt(a: int) -> int | None:
    a %= P
    r = pow(a, (P + 3) // 8, P)
    if r * r % P != a:
        r = r * SQRT_M1 % P
    return r if r * r % P == a else None


def _x_of(y: int) -> list[int]:
    """Both x with (x, y) on edwards25519: -x² + y² = 1 + d·x²·y²."""
    x2 = (y * y - 1) * pow(D * y * y + 1, P - 2, P) % P
    x = _sqrt(x2)
    return [] if x is None else sorted({x, (P - x) % P})


def _add(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    (x1, y1), (x2, y2) = a, b
    t = D * x1 * x2 * y1 * y2 % P
    x3 = (x1 * y2 + y1 * x2) * pow(1 + t, P - 2, P) % P
    y3 = (y1 * y2 + x1 * x2) * pow(1 - t, P - 2, P) % P
    return x3, y3


def _order(pt: tuple[int, int]) -> int:
    acc, n = pt, 1
    while acc != (0, 1):
        acc, n = _add(acc, pt), n + 1
        assert n <= 8, "not a small-order point"
    return n


def _small_order_points() -> list[tuple[int, int]]:
    """The eight torsion points, derived here: the order-8 ones halve an order-4 point
    (x² = -y², so d·y⁴ + 2y² - 1 = 0)."""
    ys = {0, 1, P - 1}
    root = _sqrt(1 + D)
    assert root is not None
    for r in (root, P - root):
        y2 = (-1 + r) * pow(D, P - 2, P) % P
        y = _sqrt(y2)
        if y is not None:
            ys.update({y, P - y})
    return [(x, y) for y in sorted(ys) for x in _x_of(y)]


def _encodings(x: int, y: int) -> list[bytes]:
    """Every 32-byte string that decodes to (x, y): canonical, y + p, and x's sign bit."""
    out = []
    for yy in (y, y + P):
        if yy >= 2**255:
            continue
        signs = (0, 1) if x == 0 else (x & 1,)  # x = 0 with the sign bit set: "-0"
        out += [(yy | (s << 255)).to_bytes(32, "little") for s in signs]
    return out


def test_the_eight_torsion_points_are_what_we_think() -> None:
    points = _small_order_points()
    assert len(points) == 8
    assert sorted(_order(p) for p in points) == [1, 2, 4, 4, 8, 8, 8, 8]


@pytest.mark.parametrize("point", _small_order_points(), ids=lambda p: f"y={p[1] % 10**6}")
def test_every_encoding_of_a_small_order_point_is_weak(point: tuple[int, int]) -> None:
    for raw in _encodings(*point):
        assert is_weak_public_key(raw), raw.hex()
        with pytest.raises(LineupError) as exc:
            TrustStore.from_keys([TrustedKey(key_id_of(raw), raw, ("*",), "weak")])
        assert exc.value.code == "weak_key"


def test_non_canonical_encodings_are_covered() -> None:
    non_canonical = [
        raw
        for pt in _small_order_points()
        for raw in _encodings(*pt)
        if int.from_bytes(raw, "little") & (2**255 - 1) >= P or (pt[0] == 0 and raw[31] & 0x80)
    ]
    assert len(non_canonical) >= 4  # y = p, p + 1 and the "-0" forms
    assert all(is_weak_public_key(raw) for raw in non_canonical)


def test_a_real_key_is_not_weak() -> None:
    assert not is_weak_public_key(KEY.public_raw)


# -- 3. builds are byte-identical without SOURCE_DATE_EPOCH, whatever the mtimes ----------
def test_two_builds_without_an_epoch_ignore_file_mtimes(
    tmp_path: Path, signing_key: SigningKey, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    root = tmp_path / "todo"
    init_project(root, template="todo")
    first = build_project(root, signing_key=signing_key, out_dir=tmp_path / "a")
    assert first.ok and first.bundle is not None
    for i, path in enumerate(sorted(p for p in root.rglob("*") if p.is_file())):
        os.utime(path, (1_000_000_000 + i * 7919, 1_500_000_000 + i * 104729))
    copy = tmp_path / "elsewhere" / "todo"
    shutil.copytree(root, copy)  # new inodes and ctimes too
    second = build_project(copy, signing_key=signing_key, out_dir=tmp_path / "b")
    assert second.ok and second.bundle is not None
    assert first.bundle.read_bytes() == second.bundle.read_bytes()
