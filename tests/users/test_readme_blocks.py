"""The README's code blocks are tests (SPEC 13.1): README.md's blocks run in order in one fresh
folder, each template's generated README's blocks in the project `lineup init` made, exactly
as written; `.ci/run` runs the two newcomer commands that README.md marks."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

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
    # both commands are executed, the main job in a scratch copy and the test command last
    assert re.search(r'bash -e -o pipefail -c "\$main_job"', script), script
    assert (
        re.findall(r"^.*\S.*$", script, re.M)[-1].strip()
        == 'bash -e -o pipefail -c "$test_command"'
    )
    assert "set -euo pipefail" in script


@pytest.mark.slow
def test_readme_blocks_run_in_one_fresh_folder(tmp_path: Path, pg_url: str) -> None:
    """Every block, in order, in one fresh folder; libpq's environment names a fresh
    database of the session's PostgreSQL server (the several-nodes block's
    `--db postgresql:///`), as a user's would name theirs."""
    folder = Folder.fresh(tmp_path)
    where = urlsplit(pg_url)
    folder.env.update(
        PGHOST=str(where.hostname),
        PGPORT=str(where.port),
        PGUSER=str(where.username),
        PGDATABASE=where.path.lstrip("/"),
    )
    for block in _readme_blocks():
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
