"""The MiniApp project file: `lineup.toml`, or the `[tool.lineup]` table of `pyproject.toml`
(SPEC 13.1) — one loader and one set of rules for both."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lineup_build.diagnostics import Diagnostic, Where
from lineup_build.fsutil import TomlTooDeep, parse_toml, read_regular
from lineup_build.reader import Limits
from lineup_sdk.errors import LineupError
from lineup_sdk.names import RESERVED_SCOPES

__all__ = [
    "CONFIG_NAME",
    "MAX_CONFIG_BYTES",
    "PYPROJECT_NAME",
    "ProjectConfig",
    "config_file",
    "is_project",
    "load_config",
]

CONFIG_NAME = "lineup.toml"
PYPROJECT_NAME = "pyproject.toml"
#: Where the `lineup.toml` document sits inside `pyproject.toml`.
_TOOL_TABLE = ("tool", "lineup")
_TOOL_PREFIX = "tool.lineup"
_TOOL_HEADER = re.compile(r"^\s*\[\s*tool\s*\.\s*lineup\s*[\].]", re.MULTILINE)
#: The largest `lineup.toml` read (SPEC 12).
MAX_CONFIG_BYTES = 1024 * 1024
_SCOPE = re.compile(r"[a-z][a-z0-9_]*\Z")
_SEMVER = re.compile(
    r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*)(?:\.(?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*))*))?"
    r"(?:\+([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?\Z"
)
_MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*\Z")
_KNOWN = {
    "scope",
    "name",
    "version",
    "entry",
    "include",
    "dependencies",
    "permissions",
    "surface",
}
#: `[app.surface] csp` keys: the domains a Surface may reach (SPEC 18.2).
_CSP_KEYS = ("connect_domains", "resource_domains")
#: `[app.permissions]` keys a project may set to true (SPEC 8).
_PERMISSIONS = ("network",)


@dataclass(frozen=True)
class ProjectConfig:
    """The validated `[app]` table of `lineup.toml`.

    `lines` maps `app.<key>` to its line in `lineup.toml`, so diagnostics about a key
    (an unsafe include glob, an entry that does not import) can point at it.
    """

    root: Path
    scope: str
    name: str
    version: str
    entry: str
    include: tuple[str, ...]
    dependencies: tuple[str, ...]
    permissions: tuple[str, ...] = ()
    lines: dict[str, int] = field(default_factory=dict, compare=False, hash=False)
    #: The file the config was read from: `lineup.toml` or `pyproject.toml`.
    source: str = field(default=CONFIG_NAME, compare=False, hash=False)
    #: The bundle limits the `[limits]` table raises (`max_manifest_bytes`, `max_files`,
    #: `max_total_bytes`), as sorted `(name, value)` pairs.
    limits: tuple[tuple[str, int], ...] = ()
    #: `[app.surface] csp`: `(key, domains)` pairs, sorted (none: the host's default policy).
    surface_csp: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def bundle_limits(self, overrides: Mapping[str, int] | None = None) -> Limits:
        """The limits this project builds within: the defaults, raised by `[limits]`, then
        by `overrides` (the command line's `--max-*` options).

        Raises:
            LineupError: `usage_invalid` for an override out of range.
        """
        return Limits().raised(dict(self.limits)).raised(dict(overrides or {}))

    def where(self, key: str) -> Where:
        """The location of `app.<key>` in the config file (the file alone if unknown)."""
        return Where(self.source, self.lines.get(f"app.{key}"))


_TABLE = re.compile(r"\[\s*([A-Za-z0-9_.\-]+)\s*\]")
_KEY = re.compile(r"([A-Za-z0-9_\-]+)\s*=")
_TOML_LINE = re.compile(r"\(at line (\d+), column \d+\)")


def key_lines(text: str) -> dict[str, int]:
    """The line of each `[table]` header and `table.key = ...` in simple TOML text.

    A best-effort scan (locations for diagnostics only; `tomllib` does the parsing).
    """
    out: dict[str, int] = {}
    table = ""
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if m := _TABLE.match(line):
            table = m.group(1)
            out.setdefault(table, number)
        elif m := _KEY.match(line):
            out.setdefault(f"{table}.{m.group(1)}" if table else m.group(1), number)
    return out


def is_semver(version: str) -> bool:
    """Whether `version` is a Semantic Versioning 2.0 string."""
    return bool(_SEMVER.match(version))


def _has_tool_table(path: Path) -> bool:
    """Whether `path` is a `pyproject.toml` with a `[tool.lineup]` table (a file that does
    not parse counts when its text has such a header, so its problem gets reported)."""
    try:
        text = read_regular(
            path, limit=MAX_CONFIG_BYTES, code="config_invalid", what=PYPROJECT_NAME
        ).decode("utf-8")
    except (LineupError, UnicodeDecodeError):
        return False
    try:
        doc: Any = parse_toml(text)
    except (tomllib.TOMLDecodeError, TomlTooDeep):
        return bool(_TOOL_HEADER.search(text))
    for key in _TOOL_TABLE:
        doc = doc.get(key) if isinstance(doc, dict) else None
    return isinstance(doc, dict)


def config_file(root: Path) -> Path | None:
    """The file `root`'s project config is read from: `lineup.toml` when it exists, else a
    `pyproject.toml` with a `[tool.lineup]` table; None when `root` holds neither."""
    if (root / CONFIG_NAME).is_file():
        return root / CONFIG_NAME
    pyproject = root / PYPROJECT_NAME
    if pyproject.is_file() and _has_tool_table(pyproject):
        return pyproject
    return None


def is_project(folder: Path) -> bool:
    """Whether `folder` is a MiniApp project (holds `lineup.toml` or `[tool.lineup]`)."""
    return config_file(folder) is not None


def load_config(root: Path) -> tuple[ProjectConfig | None, list[Diagnostic]]:
    """Read `root/lineup.toml`, else the `[tool.lineup]` table of `root/pyproject.toml`;
    return the config, or None and every problem found (each at its line in that file).

    When both exist `lineup.toml` wins, with a `config_shadowed` warning."""
    chosen = config_file(root)
    path = chosen or root / CONFIG_NAME
    name = path.name
    in_pyproject = name == PYPROJECT_NAME
    lines: dict[str, int] = {}
    notes: list[Diagnostic] = []
    shadowed = root / PYPROJECT_NAME
    if not in_pyproject and shadowed.is_file() and _has_tool_table(shadowed):
        notes.append(
            Diagnostic(
                "config_shadowed",
                f"{CONFIG_NAME} is read; the [tool.lineup] table of {PYPROJECT_NAME} is ignored",
                severity="warning",
                where=Where(PYPROJECT_NAME, None),
                hint=f"keep the project in one place: delete {CONFIG_NAME} or the "
                "[tool.lineup] table",
            )
        )

    def bad(message: str, hint: str | None = None, *, key: str | None = None) -> Diagnostic:
        where = Where(name, lines.get(key or "", lines.get("app")))
        return Diagnostic("config_invalid", message, where=where, hint=hint)

    try:
        raw = read_regular(path, limit=MAX_CONFIG_BYTES, code="config_invalid", what=name)
    except LineupError as exc:
        if isinstance(exc.details, dict) and exc.details.get("reason") == "missing":
            return None, [
                bad(
                    f"no {CONFIG_NAME} (or {PYPROJECT_NAME} with a [tool.lineup] table) in {root}",
                    "run `lineup init NAME --template todo`, or pass the project folder",
                )
            ]
        return None, [bad(exc.message, exc.hint)]
    try:
        text = raw.decode("utf-8")
        doc = parse_toml(text)
    except UnicodeDecodeError as exc:
        return None, [bad(f"{name} is not UTF-8: {exc}")]
    except TomlTooDeep as exc:
        return None, [bad(f"{name} is {exc}", "flatten the tables and arrays")]
    except tomllib.TOMLDecodeError as exc:
        m = _TOML_LINE.search(str(exc))
        return None, [
            Diagnostic(
                "config_invalid",
                f"{name} is not valid TOML: {exc}",
                where=Where(name, int(m.group(1)) if m else None),
            )
        ]
    found = key_lines(text)
    if in_pyproject:
        doc = doc["tool"]["lineup"]
        lines.update(
            {
                key.removeprefix(f"{_TOOL_PREFIX}."): line
                for key, line in found.items()
                if key.startswith(f"{_TOOL_PREFIX}.")
            }
        )
        if "app" not in lines and _TOOL_PREFIX in found:
            lines["app"] = found[_TOOL_PREFIX]
        return _validate(root, doc, lines, bad, table=f"{_TOOL_PREFIX}.")
    lines.update(found)
    config, problems = _validate(root, doc, lines, bad, table="")
    return config, notes + problems


def _validate(
    root: Path,
    doc: dict[str, Any],
    lines: dict[str, int],
    bad: Any,
    *,
    table: str,
) -> tuple[ProjectConfig | None, list[Diagnostic]]:
    """The `[app]` table of a project document (`table` is how messages name its parent:
    `""` in `lineup.toml`, `"tool.lineup."` in `pyproject.toml`)."""
    source = PYPROJECT_NAME if table else CONFIG_NAME
    app = doc.get("app")
    if not isinstance(app, dict):
        return None, [
            bad(
                f"missing [{table}app] table",
                "add an [app] table with scope, name, version, entry, include",
            )
        ]
    problems: list[Diagnostic] = []
    for key in sorted(set(doc) - {"app", "limits"}):
        problems.append(
            bad(
                f"unknown table or key {table}{key}",
                f"only [{table}app] and [{table}limits] are read",
                key=key,
            )
        )
    limits: tuple[tuple[str, int], ...] = ()
    raw_limits = doc.get("limits", {})
    try:
        if not isinstance(raw_limits, dict):
            raise LineupError(
                "config_invalid",
                f"{table}limits = {raw_limits!r} is not a table",
                hint="a [limits] table, e.g. max_manifest_bytes = 8388608",
            )
        Limits().raised(raw_limits, code="config_invalid", source=f"{table}limits.")
        limits = tuple(sorted(raw_limits.items()))
    except LineupError as exc:
        problems.append(bad(exc.message, exc.hint, key="limits"))
    for key in sorted(set(app) - _KNOWN):
        problems.append(
            bad(
                f"unknown key {table}app.{key}",
                f"known keys: {', '.join(sorted(_KNOWN))}",
                key=f"app.{key}",
            )
        )

    def check_field(key: str, check: Any, hint: str) -> Any:
        if key not in app:
            problems.append(bad(f"{table}app.{key} is missing", hint))
            return None
        value = app[key]
        if not check(value):
            problems.append(bad(f"{table}app.{key} = {value!r} is invalid", hint, key=f"app.{key}"))
            return None
        return value

    scope = check_field(
        "scope",
        lambda v: isinstance(v, str) and len(v) <= 64 and _SCOPE.match(v),
        'a lowercase name matching [a-z][a-z0-9_]*, e.g. scope = "todo"',
    )
    if scope in RESERVED_SCOPES:  # the toolchain's own tools (`lineup-result`, SPEC 13.2)
        problems.append(
            bad(
                f"{table}app.scope = {scope!r} is reserved for the toolchain's own tools",
                'choose another scope, e.g. scope = "my_app"',
                key="app.scope",
            )
        )
        scope = None
    name = check_field(
        "name",
        lambda v: isinstance(v, str) and v.strip() and len(v) <= 200,
        'a display name, e.g. name = "To-do"',
    )
    version = check_field(
        "version",
        lambda v: isinstance(v, str) and len(v) <= 64 and is_semver(v),
        'a semantic version, e.g. version = "1.0.0"',
    )
    entry = check_field(
        "entry",
        lambda v: isinstance(v, str) and len(v) <= 200 and _MODULE.match(v),
        'a dotted module name inside the bundle, e.g. entry = "todo_app.tools"',
    )
    include = check_field(
        "include",
        lambda v: isinstance(v, list) and v and all(isinstance(g, str) and g for g in v),
        'a non-empty list of glob patterns, e.g. include = ["todo_app/**/*.py"]',
    )
    deps_raw = app.get("dependencies", [])
    deps: tuple[str, ...] = ()
    dep_problem = _dependencies_problem(deps_raw)
    if dep_problem is not None:
        problems.append(
            bad(
                f"{table}app.dependencies = {deps_raw!r} is invalid: {dep_problem}",
                'a list of requirement strings (PEP 508), e.g. dependencies = ["httpx>=0.27", '
                "'tomli>=2; python_version < \"3.11\"']",
                key="app.dependencies",
            )
        )
    else:
        deps = tuple(sorted(d.strip() for d in deps_raw))
    perms_raw = app.get("permissions", {})
    if not isinstance(perms_raw, dict) or any(
        k not in _PERMISSIONS or not isinstance(v, bool) for k, v in perms_raw.items()
    ):
        problems.append(
            bad(
                f"[{table}app.permissions] = {perms_raw!r} is invalid",
                "a table of permissions set to true or false; known: "
                + ", ".join(_PERMISSIONS)
                + " (e.g. network = true)",
                key="app.permissions",
            )
        )
        perms_raw = {}
    perms = tuple(sorted(k for k, v in perms_raw.items() if v))
    csp: tuple[tuple[str, tuple[str, ...]], ...] = ()
    surface_raw = app.get("surface", {})
    csp_raw = surface_raw.get("csp", {}) if isinstance(surface_raw, dict) else None
    if (
        not isinstance(surface_raw, dict)
        or set(surface_raw) - {"csp"}
        or not isinstance(csp_raw, dict)
        or any(
            k not in _CSP_KEYS
            or not isinstance(v, list)
            or not all(isinstance(d, str) and d and len(d) <= 253 for d in v)
            for k, v in csp_raw.items()
        )
    ):
        problems.append(
            bad(
                f"[{table}app.surface] = {surface_raw!r} is invalid",
                "a table with csp = {connect_domains = [...], resource_domains = [...]}, e.g. "
                'csp = {connect_domains = ["https://api.example.com"]}',
                key="app.surface",
            )
        )
    else:
        csp = tuple(sorted((k, tuple(sorted(set(v)))) for k, v in csp_raw.items() if v))
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
            permissions=perms,
            lines=lines,
            source=source,
            limits=limits,
            surface_csp=csp,
        ),
        [],
    )


def _dependencies_problem(value: Any) -> str | None:
    """Why `dependencies` is not a list of PEP 508 requirements (None when it is): names
    with version specifiers, extras and environment markers; no direct URLs (the runtime's
    environment provides packages, it never downloads them)."""
    from packaging.requirements import InvalidRequirement, Requirement

    if not isinstance(value, list):
        return "not a list"
    for item in value:
        if not isinstance(item, str) or not item.strip() or len(item.strip()) > 200:
            return f"{item!r} is not a requirement string of at most 200 characters"
        try:
            req = Requirement(item.strip())
        except InvalidRequirement as exc:
            return f"{item!r}: {exc}"
        if req.url:
            return f"{item!r} names a URL; name the package and a version range instead"
    return None
