"""The test tree's own rule: pytest imports test files by basename (rootdir-relative, no
`__init__.py`), so two test files of one name in different folders break collection with
"import file mismatch" — and only when both land in one worker."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def test_every_test_file_has_a_basename_of_its_own() -> None:
    seen: dict[str, list[str]] = defaultdict(list)
    for path in TESTS.rglob("test_*.py"):
        rel = path.relative_to(TESTS)
        if any(part in {"apps", "fixtures", "node_modules"} for part in rel.parts):
            continue
        seen[path.name].append(str(rel))
    assert {name: where for name, where in seen.items() if len(where) > 1} == {}
