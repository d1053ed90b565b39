"""Manifest checks as pure functions: strict parsing, the schema (and its fast file path)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lineup_build.manifest import manifest_schema_errors, serialize_manifest
from lineup_build.manifest_checks import parse_manifest, schema_problems, tool_problems
from lineup_build.model import Manifest
from lineup_build.reader import Limits
from lineup_sdk.errors import LineupError
from tests.build.bundle_kit import make_manifest

GOOD = serialize_manifest(make_manifest())


def test_a_good_manifest_parses_and_matches_the_schema() -> None:
    doc = parse_manifest(GOOD, Limits())
    assert doc == make_manifest()
    assert schema_problems(doc) == []
    assert tool_problems(Manifest.from_json(doc)) == []
    assert Manifest.from_json(doc).to_json() == doc  # the model keeps every field


@pytest.mark.parametrize(
    ("data", "code"),
    [
        (b'{"a":1,"a":2}', "manifest_invalid"),
        (b'{"a":NaN}', "manifest_invalid"),
        (b'{"a":-Infinity}', "manifest_invalid"),
        (b'{"a":1e400}', "manifest_invalid"),
        (b'{"a":"\\ud800"}', "manifest_invalid"),
        (b'{"a":' + b"9" * 5000 + b"}", "manifest_invalid"),
        (b"\xef\xbb\xbf{}", "manifest_invalid"),
        (b"{} trailing", "manifest_invalid"),
        (b"[" * 65 + b"]" * 65, "limits_exceeded"),
        (b"[" * 100_000, "limits_exceeded"),
        (b" " * (Limits().max_manifest_bytes + 1), "limits_exceeded"),
    ],
    ids=[
        "duplicate-key",
        "nan",
        "negative-infinity",
        "overflowing-float",
        "lone-surrogate",
        "huge-integer",
        "byte-order-mark",
        "trailing-garbage",
        "depth-65",
        "depth-100000",
        "over-size",
    ],
)
def test_strict_parse_rejects(data: bytes, code: str) -> None:
    with pytest.raises(LineupError) as caught:
        parse_manifest(data, Limits())
    assert caught.value.code == code


def test_depth_64_is_allowed() -> None:
    assert parse_manifest(b"[" * 64 + b"]" * 64, Limits()) is not None


_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(["", "a", "a/b.py", "x" * 508, "x" * 509, "0" * 64, "f" * 64 + "\n", "F" * 64]),
)
_FILE = st.one_of(
    st.fixed_dictionaries(
        {"path": _VALUES, "sha256": _VALUES, "size": _VALUES},
        optional={"extra": _VALUES},
    ),
    st.lists(_VALUES, max_size=2),
    _VALUES,
)


@settings(max_examples=200, deadline=None)
@given(files=st.lists(_FILE, max_size=4))
def test_fast_file_check_agrees_with_the_json_schema(files: list[Any]) -> None:
    doc = {**make_manifest(), "files": files}
    fast = [p.message for p in schema_problems(doc)]
    slow = manifest_schema_errors(doc)
    assert bool(fast) == bool(slow)
    assert len(fast) == min(len(slow), 20) + (1 if len(slow) > 20 else 0)
