"""The README runner itself: which blocks it runs, that a failing block fails, and that a
server block's processes are gone when it returns."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.sandbox_kit import pid_alive, poll
from tests.users.readme_blocks import Block, blocks, newcomer_commands
from tests.users.readme_kit import Folder, plan, run_block

DOC = """\
<!-- readme-test: newcomer -->
```bash
echo one
```

```python
print("two")
```

  ```toml
  a = 1
  ```

<!-- readme-test: syntax-only -->
```json
{"b": 2}
```

```text
not run
```

```
no language
```
"""


def test_blocks_read_language_text_line_and_marker() -> None:
    found = blocks(DOC)
    assert [(b.lang, b.line, b.marker) for b in found] == [
        ("bash", 2, "newcomer"),
        ("python", 6, None),
        ("toml", 10, None),
        ("json", 15, "syntax-only"),
        ("text", 19, None),
        ("", 23, None),
    ]
    assert found[2].text == "a = 1\n"
    assert [plan(b) for b in found] == ["newcomer", "run", "syntax", "syntax", "ignore", "untested"]
    assert newcomer_commands(DOC) == ["echo one"]


@pytest.mark.parametrize(
    "doc",
    [
        "<!-- readme-test: sometimes -->\n```bash\ntrue\n```\n",
        "<!-- readme-test: server -->\n\n```bash\ntrue\n```\n",
        "```bash\ntrue\n",
    ],
    ids=["unknown-marker", "marker-not-before-a-fence", "unclosed"],
)
def test_a_malformed_readme_is_an_error(doc: str) -> None:
    with pytest.raises(ValueError):
        blocks(doc)


@pytest.mark.parametrize(
    ("lang", "text"),
    [
        ("bash", "false | true\n"),
        ("bash", "missing-command-xyz\necho after\n"),
        ("python", "1/0\n"),
    ],
    ids=["pipefail", "errexit", "python-raises"],
)
def test_a_failing_block_fails(lang: str, text: str, tmp_path: Path) -> None:
    with pytest.raises(AssertionError, match="README block at line 3"):
        run_block(Block(lang, text, 3, None), Folder.fresh(tmp_path))


def test_blocks_share_one_folder_with_a_fresh_home(tmp_path: Path) -> None:
    folder = Folder.fresh(tmp_path)
    run_block(Block("bash", 'echo made > made.txt\ntest "$HOME" != /root\n', 1, None), folder)
    run_block(Block("python", "assert open('made.txt').read() == 'made\\n'\n", 2, None), folder)
    assert sorted(p.name for p in folder.cwd.iterdir()) == ["made.txt"]
    assert not any(k.startswith("LINEUP_") for k in folder.env)


def test_a_server_line_is_stopped_with_its_children(tmp_path: Path) -> None:
    folder = Folder.fresh(tmp_path)
    line = "sleep 600 & echo $! > child.pid; echo 'lineup serve: 3 tools over stdio' >&2; wait\n"
    run_block(Block("bash", line, 1, "server"), folder)
    child = int((folder.cwd / "child.pid").read_text())
    assert poll(lambda: not pid_alive(child)), "the server line's child outlived it"


def test_a_server_that_exits_before_it_is_ready_fails(tmp_path: Path) -> None:
    with pytest.raises(AssertionError, match="before it was ready"):
        run_block(Block("bash", "echo starting >&2; exit 3\n", 1, "server"), Folder.fresh(tmp_path))


@pytest.mark.parametrize(
    "line",
    [
        'pip install "."',
        'pip install ".[mcp]"',
        'pip install ".[web]" playwright',
        'pip install ".[postgres,mcp]"',
        'pip install "lineup_sdk-{version}-py3-none-any.whl[web]"',
    ],
)
def test_an_install_block_may_name_the_checkout_or_this_wheel(line: str, tmp_path: Path) -> None:
    from lineup_sdk import __version__

    block = Block("bash", line.format(version=__version__) + "\n", 1, "install")
    assert plan(block) == "install"
    run_block(block, Folder.fresh(tmp_path))  # checked, never run: nothing is installed


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ('pip install "lineup-sdk[mcp]"', "not a checkout or wheel install"),  # on no index yet
        ("pip install lineup-sdk", "not a checkout or wheel install"),
        ('pip install ".[nope]"', "no such extra"),
        ('pip install "lineup_sdk-0.0.1-py3-none-any.whl[mcp]"', "wheel of another version"),
    ],
    ids=["the-unpublished-name", "bare-name", "unknown-extra", "other-version"],
)
def test_an_install_block_that_would_not_work_fails(line: str, why: str, tmp_path: Path) -> None:
    with pytest.raises(AssertionError, match=why):
        run_block(Block("bash", line + "\n", 1, "install"), Folder.fresh(tmp_path))
