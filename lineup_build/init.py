"""`lineup init`: render a template folder into a new MiniApp project."""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from lineup_sdk import __version__ as SDK_VERSION
from lineup_sdk.errors import LineupError
from lineup_sdk.names import RESERVED_SCOPES

__all__ = ["InitResult", "derive_scope", "init_project", "template_names", "templates_root"]

_SCOPE = re.compile(r"[a-z][a-z0-9_]*\Z")
# Templates whose scope is fixed whatever the folder is called (their runtime handler keys
# belong to that scope).
_FIXED_SCOPE = {"pomodoro": "pomodoro"}
_PACKAGE_PLACEHOLDER = "__package__"


def templates_root() -> Path:
    """The templates folder: inside the wheel, or the checkout's `templates/` (editable)."""
    shipped = Path(str(resources.files("lineup_build"))) / "_templates"
    if shipped.is_dir():
        return shipped
    return Path(__file__).resolve().parent.parent / "templates"


def template_names() -> list[str]:
    """Every template that `lineup init --template` accepts."""
    root = templates_root()
    return sorted(
        p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))
    )


def derive_scope(name: str) -> str | None:
    """A scope from a folder name (`my-todo` → `my_todo`), or None if none is valid."""
    candidate = re.sub(r"[^a-z0-9_]", "_", name.strip().lower())
    return candidate if _SCOPE.match(candidate) else None


@dataclass(frozen=True)
class InitResult:
    """The created project (`written` is False when the folder held it already)."""

    root: Path
    template: str
    scope: str
    files: list[str]
    written: bool = True

    def to_dict(self) -> dict[str, Any]:
        return {
            "root": str(self.root),
            "template": self.template,
            "scope": self.scope,
            "files": self.files,
            "written": self.written,
        }


def _existing(target: Path) -> dict[str, bytes] | None:
    """The files of `target` by relative path, leaving out what the toolchain itself
    writes there (what a build never includes: `.lineup/`, `__pycache__/`, `*.pyc`,
    `.git/`, the root `dist/`); None when it holds anything but folders and regular files."""
    from lineup_build.files import _NEVER_DIRS, _ROOT_NEVER

    out: dict[str, bytes] = {}
    for path in sorted(target.rglob("*")):
        rel = path.relative_to(target)
        if rel.parts[0] in _ROOT_NEVER or any(part in _NEVER_DIRS for part in rel.parts):
            continue
        if path.is_symlink():
            return None
        if path.is_file():
            if path.suffix != ".pyc":
                out[rel.as_posix()] = path.read_bytes()
        elif not path.is_dir():
            return None
    return out


def init_project(target: Path, *, template: str, scope: str | None = None) -> InitResult:
    """Render `template` into `target`.

    Only `*.jinja` files are rendered (and lose the suffix); every other file is copied
    byte for byte. A rendered workflow keeps GitHub's own `${{ }}` expressions in
    `{% raw %}` blocks. The folder must be new or empty — or hold exactly what this call
    would write (what the toolchain writes there aside), which is left as it is
    (`written` False).

    Raises:
        LineupError: `template_unknown`, `init_target_not_empty` or `scope_invalid`.
    """
    import jinja2

    names = template_names()
    if template not in names:
        raise LineupError(
            "template_unknown",
            f"no template {template!r}",
            hint=f"choose one of: {', '.join(names)}",
            exit_code=2,
        )
    if template in _FIXED_SCOPE:
        if scope is not None and scope != _FIXED_SCOPE[template]:
            raise LineupError(
                "scope_invalid",
                f"the {template} template's scope is always {_FIXED_SCOPE[template]!r}",
                hint="omit --scope",
                exit_code=2,
            )
        scope = _FIXED_SCOPE[template]
    elif scope is None:
        scope = derive_scope(target.name)
        if scope is None:
            raise LineupError(
                "scope_invalid",
                f"cannot derive an app scope from the folder name {target.name!r}",
                hint="pass --scope NAME with a lowercase [a-z][a-z0-9_]* name",
                exit_code=2,
            )
    elif not _SCOPE.match(scope):
        raise LineupError(
            "scope_invalid",
            f"scope {scope!r} must match [a-z][a-z0-9_]*",
            hint="pass --scope NAME with a lowercase name, e.g. --scope my_todo",
            exit_code=2,
        )
    if scope in RESERVED_SCOPES:
        raise LineupError(
            "scope_invalid",
            f"scope {scope!r} is reserved for the toolchain's own tools",
            hint="pass --scope NAME with another name, e.g. --scope my_app",
            exit_code=2,
        )
    context = {
        "scope": scope,
        "package": f"{scope}_app",
        "name": target.name,
        "display_name": target.name.replace("-", " ").replace("_", " ").strip().title() or scope,
        "sdk_version": SDK_VERSION,
    }
    env = jinja2.Environment(
        keep_trailing_newline=True, undefined=jinja2.StrictUndefined, autoescape=False
    )
    source = templates_root() / template
    rendered: dict[str, bytes] = {}
    for path in sorted(source.rglob("*")):
        if not path.is_file() or "__pycache__" in path.parts or path.suffix == ".pyc":
            continue
        rel = path.relative_to(source).as_posix().replace(_PACKAGE_PLACEHOLDER, context["package"])
        data = path.read_bytes()
        if rel.endswith(".jinja"):
            rel = rel.removesuffix(".jinja")
            data = env.from_string(data.decode("utf-8")).render(context).encode("utf-8")
        rendered[rel] = data
    files = sorted(rendered)
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        # a second run of the same command over its own unchanged output is a no-op
        if target.is_dir() and _existing(target) == rendered:
            return InitResult(target, template, scope, files, written=False)
        raise LineupError(
            "init_target_not_empty",
            f"{target} exists and is not empty"
            + (" (and is not what this template generates)" if target.is_dir() else ""),
            hint="choose a new folder name, or empty the folder first",
        )
    target.mkdir(parents=True, exist_ok=True)
    for rel in files:
        dest = target / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(rendered[rel])
    return InitResult(target, template, scope, files)
