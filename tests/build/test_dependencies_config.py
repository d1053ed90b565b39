"""`dependencies` in lineup.toml are PEP 508 requirements read by `packaging`: specifiers,
extras and environment markers are accepted; anything else is `config_invalid`."""

from __future__ import annotations

import tomllib
from typing import Any

import pytest

from lineup_build.config import load_config


@pytest.mark.parametrize(
    "deps",
    [
        '["httpx>=0.27"]',
        '["httpx>=0.27,<1", "pydantic[email]~=2.7"]',
        """['tomli>=2; python_version < "3.11"']""",
        """['uvloop; sys_platform != "win32" and implementation_name == "cpython"']""",
        "[]",
    ],
    ids=["specifier", "extras", "python-marker", "platform-marker", "empty"],
)
def test_requirements_are_accepted(make_app: Any, deps: str) -> None:
    app = make_app("", extra=f"dependencies = {deps}\n")
    config, diags = load_config(app.root)
    assert diags == [] and config is not None
    assert config.dependencies == tuple(sorted(tomllib.loads(f"x = {deps}")["x"]))


@pytest.mark.parametrize(
    ("deps", "says"),
    [
        ('"httpx"', "not a list"),
        ('["httpx>>1"]', "'httpx>>1'"),
        ('["httpx; python_version <"]', "python_version"),
        ('["httpx @ https://example.org/httpx.whl"]', "names a URL"),
        ('[""]', "requirement string"),
        ("[1]", "requirement string"),
        (f'["{"x" * 201}"]', "at most 200"),
    ],
    ids=[
        "not-a-list",
        "bad-specifier",
        "bad-marker",
        "url",
        "empty-string",
        "not-a-string",
        "too-long",
    ],
)
def test_bad_requirements_are_config_invalid(make_app: Any, deps: str, says: str) -> None:
    app = make_app("", extra=f"dependencies = {deps}\n")
    config, diags = load_config(app.root)
    assert config is None
    assert [d.code for d in diags] == ["config_invalid"]
    assert says in diags[0].message
