"""`lineup_build.semver.compare_versions`: the one home of version order (SemVer 2.0
precedence), read by the runtime's downgrade refusal and the breaking-change gate."""

from __future__ import annotations

import random

import pytest

from lineup_build.semver import compare_versions
from lineup_runtime_lite.drivers import install

#: SemVer 2.0's own example order (section 11), plus build metadata and dev builds.
ORDERED = [
    "0.0.1",
    "0.9.0",
    "1.0.0-alpha",
    "1.0.0-alpha.1",
    "1.0.0-alpha.beta",
    "1.0.0-beta",
    "1.0.0-beta.2",
    "1.0.0-beta.11",
    "1.0.0-rc.1",
    "1.0.0",
    "1.2.0",
    "1.10.0",
    "2.0.0",
]


def test_the_order_is_semver_precedence() -> None:
    seed = 3303
    print(f"seed {seed}")
    shuffled = ORDERED[:]
    random.Random(seed).shuffle(shuffled)
    import functools

    assert sorted(shuffled, key=functools.cmp_to_key(compare_versions)) == ORDERED
    for i, a in enumerate(ORDERED):
        for j, b in enumerate(ORDERED):
            assert compare_versions(a, b) == (i > j) - (i < j), (a, b)


def test_build_metadata_and_dev_builds_are_level_with_their_version() -> None:
    assert compare_versions("1.0.0+build.7", "1.0.0") == 0
    assert compare_versions("1.0.0+dev.0123456789ab", "1.0.0") == 0
    long = "1.0.0-" + "a" * 60 + "+dev.0123456789ab"  # past parse_version's 64 characters
    assert compare_versions(long, "1.0.0") == -1


def test_numeric_identifiers_compare_as_numbers_and_below_alphanumeric_ones() -> None:
    assert compare_versions("1.0.0-2", "1.0.0-10") == -1
    assert compare_versions("1.0.0-10", "1.0.0-a") == -1


@pytest.mark.parametrize("bad", ["1.0", "v1.0.0", "01.0.0", "", "1.0.0-"])
def test_a_string_that_is_not_semver_is_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        compare_versions(bad, "1.0.0")


def test_the_runtime_reads_the_same_order() -> None:
    assert not hasattr(install, "_semver_key")
    assert install.compare_versions("1.0.0-rc.1", "1.0.0") == -1
    assert install.compare_versions("1.10.0", "1.2.0") == 1
