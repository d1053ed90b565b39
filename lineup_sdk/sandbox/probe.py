"""A launcher target that runs no author code: print what the sandbox enforces, as JSON."""

from __future__ import annotations

import json
import sys
from typing import Any


def main(argv: list[str], sandbox: dict[str, Any]) -> None:
    """Report `sandbox` on stdout."""
    sys.stdout.write(json.dumps(sandbox, sort_keys=True) + "\n")
    sys.stdout.flush()
