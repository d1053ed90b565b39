"""Semantic Versioning 2.0 as the breaking-change gate reads it: precedence and major bumps.

A *major* bump is a step into a new compatibility series, as Cargo counts it: for `x.y.z`
with `x > 0` the series is `x`; for `0.y.z` with `y > 0` it is `0.y`; for `0.0.z` it is
`0.0.z` itself (every bump is major). A pre-release belongs to the series of its version,
so `2.0.0-rc.1` after `1.4.0` counts as the major bump to 2.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "Version",
    "bump_kind",
    "compare_versions",
    "is_major_bump",
    "next_major",
    "parse_version",
]

_SEMVER = re.compile(
    r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*)(?:\.(?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*))*))?"
    r"(?:\+([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?\Z"
)


@dataclass(frozen=True)
class Version:
    """A parsed semantic version (build metadata kept for display, ignored for precedence)."""

    major: int
    minor: int
    patch: int
    pre: tuple[str, ...] = ()
    build: str = ""

    def precedence(self) -> tuple[object, ...]:
        """A sort key that orders versions by SemVer precedence (section 11 of SemVer)."""
        if not self.pre:
            return (self.major, self.minor, self.patch, 1, ())
        ids = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in self.pre)
        return (self.major, self.minor, self.patch, 0, ids)

    def series(self) -> tuple[int, ...]:
        """The compatibility series: `(x,)`, `(0, y)` or `(0, 0, z)`."""
        if self.major:
            return (self.major,)
        if self.minor:
            return (0, self.minor)
        return (0, 0, self.patch)

    def __str__(self) -> str:
        pre = f"-{'.'.join(self.pre)}" if self.pre else ""
        build = f"+{self.build}" if self.build else ""
        return f"{self.major}.{self.minor}.{self.patch}{pre}{build}"


def parse_version(text: object) -> Version | None:
    """The version `text` names, or None when it is not a SemVer 2.0 string."""
    if not isinstance(text, str) or len(text) > 64:
        return None
    return _parse(text)


def _parse(text: str) -> Version | None:
    m = _SEMVER.match(text)
    if m is None:
        return None
    major, minor, patch, pre, build = m.groups()
    return Version(
        int(major), int(minor), int(patch), tuple(pre.split(".")) if pre else (), build or ""
    )


def compare_versions(a: str, b: str) -> int:
    """-1, 0 or 1 as `a` comes before, level with or after `b` by SemVer precedence (build
    metadata ignored: `1.0.0+dev.abc` is level with `1.0.0`). The one home of version order:
    the runtime's downgrade refusal and the breaking-change gate both read it.

    Raises:
        ValueError: `a` or `b` is not a SemVer 2.0 string.
    """
    va, vb = _parse(a), _parse(b)
    if va is None or vb is None:
        raise ValueError(f"not a semantic version: {a if va is None else b!r}")
    ka, kb = va.precedence(), vb.precedence()
    return (ka > kb) - (ka < kb)


def is_major_bump(old: Version, new: Version) -> bool:
    """Whether `new` starts a later compatibility series than `old` (so it is later too)."""
    return new.series() > old.series()


def next_major(version: Version) -> Version:
    """The first release of the next compatibility series (`2.0.0`, `0.3.0`, `0.0.5`)."""
    if version.major:
        return Version(version.major + 1, 0, 0)
    if version.minor:
        return Version(0, version.minor + 1, 0)
    return Version(0, 0, version.patch + 1)


def bump_kind(old: Version, new: Version) -> str:
    """What changed from `old` to `new`.

    Returns:
        `major`, `minor` or `patch` (the first number that went up), `prerelease` (same
        numbers, a later pre-release or the release itself), `none` (equal precedence) or
        `downgrade`.
    """
    a, b = old.precedence(), new.precedence()
    if b < a:
        return "downgrade"
    if b == a:
        return "none"
    for name, x, y in (
        ("major", old.major, new.major),
        ("minor", old.minor, new.minor),
        ("patch", old.patch, new.patch),
    ):
        if y != x:
            return name
    return "prerelease"
