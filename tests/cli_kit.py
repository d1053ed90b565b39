"""The one CLI runner the suites share: `lineup ARGS` through the console script's entry."""

from __future__ import annotations

import pytest

from lineup_build.cli import main

__all__ = ["run_cli"]


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """`(exit status, stdout, stderr)` of `lineup ARGS`."""
    with pytest.raises(SystemExit) as info:
        main(args)
    out, err = capsys.readouterr()
    code = info.value.code
    return (code if isinstance(code, int) else 0 if code is None else 1), out, err
