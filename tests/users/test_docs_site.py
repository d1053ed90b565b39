"""The documentation (SPEC 19): a README that fits on a screen and holds nothing internal;
every code block of every docs page run or checked as the README's are (13.1); the
generated reference pages equal what the code renders; the pages that took over the
README's obligations (the error table, the dev Host's test ids, the Inspector's `--header`,
the runtime's floors) hold them; install lines that work before the distribution is
published; and `mkdocs build --strict`."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.users.docs_reference import GENERATED
from tests.users.readme_blocks import Block, blocks
from tests.users.readme_kit import _INSTALL, Folder, check_install, check_syntax, plan, run_block

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.rglob("*.md"))
PACKAGES = ("lineup_sdk", "lineup_build", "lineup_runtime_lite")


def _page(relative: str) -> str:
    return (DOCS / relative).read_text(encoding="utf-8")


def _name(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


def _every_docs_block() -> list[tuple[str, Block]]:
    return [(_name(p), b) for p in PAGES for b in blocks(p.read_text(encoding="utf-8"))]


# --- the README ------------------------------------------------------------------------


def test_the_readme_fits_on_a_screen_and_says_what_lineup_is() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.encode("utf-8")) <= 12 * 1024, "the README is over 12 KiB"
    first_screen = text[: text.index("## Try it")]
    for term in ("MiniApp", "tool", "Surface", "bundle", "runtime"):
        assert f"**{term}**" in first_screen, term
    starts = re.findall(r"^## (\d)\. (.+)$", text, re.MULTILINE)
    assert [n for n, _ in starts] == ["1", "2", "3"], starts


def test_the_readme_holds_nothing_internal() -> None:
    text = README.read_text(encoding="utf-8")
    assert re.findall(r"\blineup_(?:sdk|build|runtime_lite)[./]\w", text) == [], "module paths"
    layout = r"(?<![\w/.])(?:benchmarks|\.ci|templates|tests/(?:users|cli|runtime|web|build|sdk))/"
    assert re.findall(layout, text) == [], "internal layout"
    assert re.findall(r"\b(?:SPEC|TIS2)\b", text) == [], "internal references"


def test_every_readme_link_to_the_docs_names_a_page() -> None:
    text = README.read_text(encoding="utf-8")
    links = re.findall(r"\]\((docs/[^)#]+)", text)
    assert links, "the README links to the docs"
    missing = sorted({link for link in links if not (ROOT / link).is_file()})
    assert missing == []


# --- every block of every page ---------------------------------------------------------


def test_every_docs_block_is_run_or_checked() -> None:
    untested = [f"{where} {b.label()}" for where, b in _every_docs_block() if plan(b) == "untested"]
    assert untested == [], "mark these blocks or give them a language the suite runs"


def test_docs_markers_are_few() -> None:
    marked = [(where, b.marker) for where, b in _every_docs_block() if b.marker is not None]
    assert all(m != "newcomer" for _, m in marked), "newcomer blocks live in README.md only"
    # Only what CI cannot run is parsed alone: the interactive prompt, the Inspector (Node),
    # a test that needs a project's conftest.
    assert sum(m == "syntax-only" for _, m in marked) <= 4, marked


@pytest.mark.parametrize(
    "where_block",
    [wb for wb in _every_docs_block() if plan(wb[1]) in ("syntax", "install")],
    ids=lambda wb: f"{wb[0]}:{wb[1].line}-{wb[1].lang}",
)
def test_docs_data_syntax_and_install_blocks_check(where_block: tuple[str, Block]) -> None:
    block = where_block[1]
    check_syntax(block)
    if plan(block) == "install":
        check_install(block)


def _runnable_pages() -> list[Path]:
    return [
        p
        for p in PAGES
        if any(plan(b) in ("run", "server") for b in blocks(p.read_text(encoding="utf-8")))
    ]


@pytest.mark.slow
@pytest.mark.parametrize("page", _runnable_pages(), ids=_name)
def test_docs_page_blocks_run_in_one_fresh_folder(
    page: Path, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Each page's blocks in order in a fresh folder of its own, as a reader who starts on
    that page would run them; libpq's environment names a fresh database for the page that
    serves `--db postgresql:///`."""
    folder = Folder.fresh(tmp_path)
    text = page.read_text(encoding="utf-8")
    if "postgresql:///" in text:
        where = urlsplit(request.getfixturevalue("pg_url"))
        folder.env.update(
            PGHOST=str(where.hostname),
            PGPORT=str(where.port),
            PGUSER=str(where.username),
            PGDATABASE=where.path.lstrip("/"),
        )
    for block in blocks(text):
        run_block(block, folder)


# --- generated and checked reference ----------------------------------------------------


@pytest.mark.parametrize("relative", sorted(GENERATED))
def test_generated_reference_pages_are_what_the_code_renders(relative: str) -> None:
    path = ROOT / relative
    assert path.is_file(), f"{relative}: run python -m tests.users.docs_reference"
    assert path.read_text(encoding="utf-8") == GENERATED[relative](), (
        f"{relative} is stale: run python -m tests.users.docs_reference"
    )


def test_the_cli_reference_has_every_command_and_option() -> None:
    import typer

    from lineup_build.cli._app import app

    page = _page("reference/cli.md")
    root = typer.main.get_command(app)
    todo = [(["lineup"], root)]
    while todo:
        path, command = todo.pop()
        assert f"## `{' '.join(path)}`" in page, path
        for param in command.params:
            if param.param_type_name == "option" and not getattr(param, "hidden", False):
                assert f"`{param.opts[0]}`" in page, (path, param.opts)
        subs = getattr(command, "commands", {})
        todo += [([*path, n], c) for n, c in subs.items() if not c.hidden]


def test_the_python_api_page_names_every_public_name_and_open_option() -> None:
    import importlib
    import inspect

    from lineup_runtime_lite import Runtime

    page = _page("reference/python-api.md")
    modules = (
        *PACKAGES,
        "lineup_sdk.testing",
        "lineup_runtime_lite.testing",
        "lineup_runtime_lite.scenario",
        "lineup_runtime_lite.suite",
        "lineup_runtime_lite.databases",
        "lineup_runtime_lite.sim",
    )
    missing = [
        f"{m}.{n}"
        for m in modules
        for n in importlib.import_module(m).__all__
        if f"`{n}`" not in page
    ]
    assert missing == []
    options = [
        p.name
        for p in inspect.signature(Runtime.open).parameters.values()
        if p.kind is p.KEYWORD_ONLY
    ]
    # the options have their page, generated from `RuntimeOptions`; this one links it
    assert "(runtime-options.md)" in page
    options_page = _page("reference/runtime-options.md")
    assert [o for o in options if f"`{o}`" not in options_page] == []


def test_the_scenario_reference_names_every_action() -> None:
    from lineup_runtime_lite.scenario import ACTIONS

    page = _page("reference/scenario-format.md")
    assert [a for a in ACTIONS if f"`{a} = " not in page] == []


def _property_names(schema: object) -> set[str]:
    found: set[str] = set()
    if isinstance(schema, dict):
        found |= set(schema.get("properties", {}))
        for value in schema.values():
            found |= _property_names(value)
    elif isinstance(schema, list):
        for item in schema:
            found |= _property_names(item)
    return found


def test_the_manifest_reference_names_every_field_and_config_key() -> None:
    schema = json.loads((ROOT / "lineup_build" / "manifest.schema.json").read_text("utf-8"))
    page = _page("reference/manifest.md")
    assert sorted(n for n in _property_names(schema) if f"`{n}`" not in page) == []
    config = ast.parse((ROOT / "lineup_build" / "config.py").read_text("utf-8"))
    (known,) = [
        node.value
        for node in config.body
        if isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "_KNOWN" for t in node.targets)
    ]
    keys = ast.literal_eval(known)
    assert keys and sorted(k for k in keys if f"| `{k}` |" not in page) == []


# --- obligations that moved from the README ---------------------------------------------

#: SPEC 14's test ids; the page documents these and every other the Host page carries.
SPEC_TEST_IDS = {
    "lineup-conversation",
    "lineup-instance",
    "lineup-surface-frame",
    "lineup-host-confirm",
    "lineup-host-decline",
    "lineup-host-leave",
    "lineup-host-close",
    "lineup-console-tool",
    "lineup-console-params",
    "lineup-console-call",
    "lineup-timeline",
}


def _host_page_test_ids() -> set[str]:
    web = ROOT / "lineup_runtime_lite" / "web"
    html = (web / "host.html").read_text("utf-8")
    script = (web / "host.js").read_text("utf-8")
    ids = set(re.findall(r'data-testid="(lineup-[a-z-]+)"', html))
    ids |= set(re.findall(r'testid = "(lineup-[a-z-]+)"', script))
    # `button(text, testid, ...)` makes the conversation and instance buttons
    ids |= set(re.findall(r'button\([^\n]*?"(lineup-[a-z-]+)"', script))
    ids |= {f"{p}NAME" for p in re.findall(r"testid = `(lineup-[a-z-]+-)\$\{", script)}
    return ids


def test_the_dev_host_guide_documents_every_test_id() -> None:
    page = _page("guides/dev-host.md")
    table = page[page.index("## Test ids") :]
    documented = set(re.findall(r"^\| `(lineup-[A-Za-z-]+)` \|", table, re.MULTILINE))
    carried = _host_page_test_ids()
    assert carried >= SPEC_TEST_IDS, sorted(SPEC_TEST_IDS - carried)
    assert documented == carried, (sorted(carried - documented), sorted(documented - carried))


def test_the_serving_guide_shows_the_inspectors_bearer_header() -> None:
    page = _page("guides/serving.md")
    (block,) = [b for b in blocks(page) if "@modelcontextprotocol/inspector" in b.text]
    token = re.search(r"LINEUP_SERVE_TOKEN=(\S+) lineup serve \S+ --http (\S+)", block.text)
    assert token is not None, block.text
    assert f'--header "Authorization: Bearer {token[1]}"' in block.text
    assert f"http://{token[2]}/mcp" in block.text


# --- install lines ----------------------------------------------------------------------


def test_install_hints_in_the_code_work_before_the_distribution_is_published() -> None:
    """Every `pip install` the packages print names a checkout (`".[x]"`) or the wheel of
    this version, never `lineup-sdk[x]`, which no index holds yet."""
    lines: list[str] = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            text = path.read_text("utf-8")
            assert "lineup-sdk[" not in text, path
            lines += [m for m in re.findall(r'pip install "[^"]*"', text)]
    assert len(lines) >= 8, lines  # mcp, web, postgres, playwright: a checkout's and a wheel's
    for line in lines:
        spelled = line.replace("{__version__}", _version())
        assert _INSTALL.match(spelled), line


def _version() -> str:
    from lineup_sdk import __version__

    return __version__


@pytest.mark.slow
def test_the_wheel_install_lines_resolve(toolchain_wheels: Path) -> None:
    """Each wheel install line of the README and the docs, as written, in the folder that
    holds the wheel: pip finds the file and every extra it names (a dry run)."""
    texts = [README.read_text("utf-8"), *(p.read_text("utf-8") for p in PAGES)]
    lines = {
        line
        for text in texts
        for line in re.findall(r'pip install "lineup_sdk-[^"]+\.whl\[[a-z,]+\]"', text)
    }
    assert lines
    for line in sorted(lines):
        # --ignore-installed: the test venv may hold this very version (CI installs it)
        argv = [sys.executable, "-m", *line.split(" ", 2)[:2], "--dry-run", "--no-deps"]
        argv.append("--ignore-installed")
        argv.append(line.split(" ", 2)[2].strip('"'))
        done = subprocess.run(
            argv, cwd=toolchain_wheels, capture_output=True, text=True, timeout=300, check=False
        )
        assert done.returncode == 0, done.stderr
        assert "Would install lineup-sdk" in done.stdout, done.stdout
        assert "does not provide the extra" not in done.stderr, done.stderr


# --- the site ---------------------------------------------------------------------------


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    """`mkdocs build --strict`: every page in the nav, every link and anchor found."""
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**_env(), "NO_MKDOCS_2_WARNING": "1"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    built = {p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("index.html")}
    for page in PAGES:
        name = page.relative_to(DOCS).with_suffix("").as_posix().removesuffix("index")
        expected = f"{name}/index.html".lstrip("/").replace("//", "/")
        assert expected in built, expected


def _env() -> dict[str, str]:
    import os

    return dict(os.environ)
