"""Parameter descriptions come from Google, NumPy and reST docstrings (`docstring_parser`);
a parameter none of them documents still gets the `missing_description` warning."""

from __future__ import annotations

from typing import Any

import pytest

from lineup_build.build import check_project

GOOGLE = '''
    """Add two numbers.

    Args:
        a: The first
            number.
        b (int): The second.

    Returns:
        The sum.
    """
'''
NUMPY = '''
    """Add two numbers.

    Parameters
    ----------
    a : int
        The first
        number.
    b : int
        The second.

    Returns
    -------
    int
        The sum.
    """
'''
REST = '''
    """Add two numbers.

    :param a: The first
        number.
    :param int b: The second.
    :returns: The sum.
    """
'''
PARTIAL = '''
    """Add two numbers.

    :param a: The first number.
    """
'''


def _tool(doc: str) -> str:
    return (
        '@tools.tool("demo.add", activation="app_ready")\n'
        "def add(ctx: ToolContext, a: int, b: int) -> int:" + doc + "    return a + b\n"
    )


@pytest.mark.parametrize("doc", [GOOGLE, NUMPY, REST], ids=["google", "numpy", "rest"])
def test_each_style_describes_the_parameters(make_app: Any, doc: str) -> None:
    result = check_project(make_app(_tool(doc)).root)
    assert [d.code for d in result.diagnostics] == []
    (tool,) = result.tools
    props = tool["input_schema"]["properties"]
    assert props["a"]["description"] == "The first number."
    assert props["b"]["description"] == "The second."
    assert tool["description"] == "Add two numbers."


@pytest.mark.parametrize(
    ("doc", "undocumented"),
    [(PARTIAL, ["b"]), ('\n    """Add two numbers."""\n', ["a", "b"])],
    ids=["one-missing", "none"],
)
def test_undocumented_parameters_still_warn(
    make_app: Any, doc: str, undocumented: list[str]
) -> None:
    result = check_project(make_app(_tool(doc)).root)
    warned = [d for d in result.diagnostics if d.code == "missing_description"]
    assert [d.severity for d in warned] == ["warning"] * len(undocumented)
    assert all(any(f"{name!r}" in d.message for d in warned) for name in undocumented)
    assert result.ok() and not result.ok(strict=True)
