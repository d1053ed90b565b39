"""What `lineup serve` installs into its runtime: bundles the CLI prepared (project folders
built with their dev keys, which re-install beside a previous dev build of the same
version, and bundles verified against a trust store; see `lineup_build.cli.compose`)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any, Protocol

__all__ = ["Installable", "install_targets"]


class Installable(Protocol):
    """A bundle to install, and whether it is a local dev build."""

    @property
    def bundle(self) -> Path: ...

    @property
    def dev_build(self) -> bool: ...


def install_targets(rt: Any, prepared: Iterable[Installable]) -> list[dict[str, Any]]:
    """Install each bundle (dev builds beside an older build of the same version)."""
    return [rt.install(p.bundle, dev_build=p.dev_build).to_dict() for p in prepared]
