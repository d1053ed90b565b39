"""The README's code blocks are tests (SPEC 13.1, 19): each of README.md's three quick starts
runs in order in a fresh folder of its own, each template's generated README's blocks in the
project `lineup init` made, exactly as written; `.ci/run` runs the two newcomer commands that
README.md marks. The docs pages' blocks: `test_docs_site.py`."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.users.readme_blocks import Block, blocks, newcomer_commands
from tests.users.readme_kit import Folder, check_syntax, plan, run_block

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
CI_RUN = ROOT / ".ci" / "run"
TEMPLATES = sorted(
    p.name for p in (ROOT / "templates").iterdir() if (p / "README.md.jinja").is_file()
)


def _readme_blocks() -> list[Block]:
    return blocks(README.read_text(encoding="utf-8"))


def _template_blocks(template: str) -> list[Block]:
    # Markers and fences pass through the template unchanged; the suite's run of the
    # generated README checks the rendered text.
    return blocks((ROOT / "templates" / template / "README.md.jinja").read_text(encoding="utf-8"))


def _every_block() -> list[tuple[str, Block]]:
    found = [("README.md", b) for b in _readme_blocks()]
    for template in TEMPLATES:
        found += [(f"templates/{template}", b) for b in _template_blocks(template)]
    return found


def test_every_block_is_run_or_syntax_checked() -> None:
    untested = [f"{where} {b.label()}" for where, b in _every_block() if plan(b) == "untested"]
    assert untested == [], "mark these blocks or give them a language the suite runs"


def test_markers_are_few_and_known() -> None:
    marked = [(where, b.marker) for where, b in _every_block() if b.marker is not None]
    readme = [m for where, m in marked if where == "README.md"]
    assert readme.count("newcomer") == 2
    assert sum(m == "newcomer" for _, m in marked) == 2, "newcomer blocks live in README.md only"
    assert len(marked) <= 9, marked


@pytest.mark.parametrize(
    "where_block",
    [wb for wb in _every_block() if plan(wb[1]) == "syntax"],
    ids=lambda wb: f"{wb[0]}:{wb[1].line}-{wb[1].lang}",
)
def test_syntax_only_and_data_blocks_parse(where_block: tuple[str, Block]) -> None:
    check_syntax(where_block[1])


def _ci_newcomer_commands() -> list[str]:
    """What `.ci/run` executes: it reads the commands with the same helper, so running that
    helper line as `.ci/run` does yields them."""
    script = CI_RUN.read_text(encoding="utf-8")
    helper = re.search(r"python3 (tests/users/readme_blocks\.py newcomer README\.md)", script)
    assert helper is not None, ".ci/run reads the newcomer commands with readme_blocks.py"
    done = subprocess.run(
        ["python3", *helper[1].split()],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout.splitlines()


def test_ci_runs_exactly_the_newcomer_commands() -> None:
    readme = newcomer_commands(README.read_text(encoding="utf-8"))
    assert len(readme) == 2
    main_job, test_command = readme
    assert "lineup init focus --template pomodoro" in main_job
    assert "python -m pytest" in test_command
    assert _ci_newcomer_commands() == readme
    script = CI_RUN.read_text(encoding="utf-8")
    # both commands are executed, the main job in a scratch copy, then the test command, and
    # after it only the store tests' PostgreSQL pass (tests/store_kit.py)
    assert re.search(r'bash -e -o pipefail -c "\$main_job"', script), script
    lines = [x.strip() for x in re.findall(r"^.*\S.*$", script, re.M)]
    lines = [x for x in lines if not x.startswith("#")]
    assert lines[-1] == "LINEUP_TEST_STORE=postgresql python -m pytest -q -m store"
    after = lines[lines.index('bash -e -o pipefail -c "$test_command"') + 1 : -1]
    assert all(x.startswith("echo ") or x == ". .venv/bin/activate" for x in after), after
    assert "set -euo pipefail" in script


def _quick_starts() -> dict[str, list[Block]]:
    """The README's quick starts (`## 1. ...`), each with its blocks in order."""
    text = README.read_text(encoding="utf-8")
    headings = [
        (i + 1, line[3:]) for i, line in enumerate(text.splitlines()) if line.startswith("## ")
    ]
    starts: dict[str, list[Block]] = {}
    for (line, title), (end, _) in zip(headings, [*headings[1:], (10**9, "")], strict=True):
        if re.match(r"\d\. ", title):
            starts[title] = [b for b in _readme_blocks() if line < b.line < end]
    return starts


def test_the_readme_has_three_quick_starts_and_runs_no_other_block() -> None:
    starts = _quick_starts()
    assert len(starts) == 3, list(starts)
    inside = {b.line for found in starts.values() for b in found}
    outside = [b for b in _readme_blocks() if b.line not in inside]
    assert all(b.marker == "newcomer" for b in outside), [b.label() for b in outside]


@pytest.mark.slow
@pytest.mark.parametrize("start", sorted(_quick_starts()))
def test_each_readme_quick_start_runs_in_a_fresh_folder(start: str, tmp_path: Path) -> None:
    """A newcomer may pick any of the three: each one's blocks, in order, in an empty folder
    of its own, exactly as written."""
    folder = Folder.fresh(tmp_path)
    for block in _quick_starts()[start]:
        run_block(block, folder)


@pytest.mark.slow
@pytest.mark.parametrize("template", TEMPLATES)
def test_generated_readme_blocks_run_in_the_project(
    template: str, tmp_path: Path, toolchain_wheels: Path
) -> None:
    folder = Folder.fresh(tmp_path, wheels=toolchain_wheels)
    name = f"my-{template}"
    init = Block("bash", f"lineup init {name} --template {template}\n", 0, None)
    run_block(init, folder)
    project = folder.inside(name)
    generated = blocks((project.cwd / "README.md").read_text(encoding="utf-8"))
    assert [(b.lang, b.marker) for b in generated] == [
        (b.lang, b.marker) for b in _template_blocks(template)
    ]
    for block in generated:
        run_block(block, project)
