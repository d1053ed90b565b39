"""`lineup.toml`: load and validate the MiniApp project file."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lineup_build.diagnostics import Diagnostic, Where

__all__ = ["CONFIG_NAME", "ProjectConfig", "load_config"]

CONFIG_NAME = "lineup.toml"
_SCOPE = re.compile(r"[a-z][a-z0-9_]*\Z")
_SEMVER = re.compile(
    r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*)(?:\.(?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*))*))?"
    r"(?:\+([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?\Z"
)
_MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*\Z")
_DEPENDENCY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9,._-]+\])?\s*([<>=!~].*)?\Z")
_KNOWN = {"scope", "name", "version", "entry", "include", "dependencies"}


@dataclass(frozen=True)
class ProjectConfig:
    """The validated `[app]` table of `lineup.toml`."""

    root: Path
    scope: str
    name: str
    version: str
    entry: str
    include: tuple[str, ...]
    dependencies: tuple[str, ...]


def is_semver(version: str) -> bool:
    """Whether `version` is a Semantic Versioning 2.0 string."""
    return bool(_SEMVER.match(version))


def load_config(root: Path) -> tuple[ProjectConfig | None, list[Diagnostic]]:
    """Read `root/lineup.toml`; return the config, or None and every problem found."""
    path = root / CONFIG_NAME
    where = Where(CONFIG_NAME)

    def bad(message: str, hint: str | None = None) -> Diagnostic:
        return Diagnostic("config_invalid", message, where=where, hint=hint)

    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None, [
            bad(
                f"no {CONFIG_NAME} in {root}",
                "run `lineup init NAME --template todo`, or pass the project folder",
            )
        ]
    except OSError as exc:
        return None, [bad(f"cannot read {CONFIG_NAME}: {exc.strerror}")]
    try:
        doc = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        return None, [bad(f"{CONFIG_NAME} is not valid TOML: {exc}")]
    app = doc.get("app")
    if not isinstance(app, dict):
        return None, [
            bad(
                "missing [app] table",
                "add an [app] table with scope, name, version, entry, include",
            )
        ]
    problems: list[Diagnostic] = []
    for key in sorted(set(doc) - {"app"}):
        problems.append(bad(f"unknown table or key {key!r}", "only [app] is read"))
    for key in sorted(set(app) - _KNOWN):
        problems.append(bad(f"unknown key app.{key}", f"known keys: {', '.join(sorted(_KNOWN))}"))

    def field(key: str, check: Any, hint: str) -> Any:
        if key not in app:
            problems.append(bad(f"app.{key} is missing", hint))
            return None
        value = app[key]
        if not check(value):
            problems.append(bad(f"app.{key} = {value!r} is invalid", hint))
            return None
        return value

    scope = field(
        "scope",
        lambda v: isinstance(v, str) and _SCOPE.match(v),
        'a lowercase name matching [a-z][a-z0-9_]*, e.g. scope = "todo"',
    )
    name = field(
        "name",
        lambda v: isinstance(v, str) and v.strip() and len(v) <= 200,
        'a display name, e.g. name = "To-do"',
    )
    version = field(
        "version",
        lambda v: isinstance(v, str) and is_semver(v),
        'a semantic version, e.g. version = "1.0.0"',
    )
    entry = field(
        "entry",
        lambda v: isinstance(v, str) and _MODULE.match(v),
        'a dotted module name inside the bundle, e.g. entry = "todo_app.tools"',
    )
    include = field(
        "include",
        lambda v: isinstance(v, list) and v and all(isinstance(g, str) and g for g in v),
        'a non-empty list of glob patterns, e.g. include = ["todo_app/**/*.py"]',
    )
    deps_raw = app.get("dependencies", [])
    deps: tuple[str, ...] = ()
    if not isinstance(deps_raw, list) or not all(
        isinstance(d, str) and _DEPENDENCY.match(d.strip()) for d in deps_raw
    ):
        problems.append(
            bad(
                f"app.dependencies = {deps_raw!r} is invalid",
                'a list of requirement strings, e.g. dependencies = ["httpx>=0.27"]',
            )
        )
    else:
        deps = tuple(sorted(d.strip() for d in deps_raw))
    if problems:
        return None, problems
    return (
        ProjectConfig(
            root=root,
            scope=scope,
            name=name.strip(),
            version=version,
            entry=entry,
            include=tuple(include),
            dependencies=deps,
        ),
        [],
    )
