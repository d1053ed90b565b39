"""The Surface as one self-contained document (SPEC 18.2): `surface/index.html` with its
included styles, images and scripts inlined, and the Surface SDK inlined once.

Both import forms of `/_lineup/sdk.js` (`import … from "/_lineup/sdk.js"` and
`import("/_lineup/sdk.js")`) are rewritten to the one inlined SDK; every other reference
the build cannot inline (an external URL, a missing file, another import) is a
`surface_not_inlinable` diagnostic naming file and line. The same files give the same
bytes: the document depends on nothing but them and the SDK shipped in this toolchain.
"""

from __future__ import annotations

import base64
import importlib.util
import mimetypes
import posixpath
import re
from dataclasses import dataclass, field
from pathlib import Path

from lineup_build.diagnostics import Diagnostic, Where
from lineup_build.files import IncludedFile

__all__ = [
    "SDK_KEY",
    "SDK_SPECIFIER",
    "SURFACE_DOCUMENT",
    "SURFACE_PAGE",
    "SurfaceDocument",
    "build_surface_document",
    "inlined_sdk",
    "sdk_module",
]

#: The Surface page a project ships (SPEC 14).
SURFACE_PAGE = "surface/index.html"
#: Where the built document sits in the bundle's `app/` (the toolchain's `_lineup/` prefix).
SURFACE_DOCUMENT = "_lineup/surface.html"
#: The one specifier the build rewrites to the inlined SDK.
SDK_SPECIFIER = "/_lineup/sdk.js"
#: The global (a registered symbol) under which the inlined SDK's loader sits.
SDK_KEY = "io.lineup.sdk"

_HINT = (
    "ship the file in `include` and reference it by a relative path; bundle a multi-module "
    "Surface with your own bundler into one file listed in `include`"
)

_ATTR = re.compile(r"""([^\s"'>/=]+)(?:\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'=<>`]+)))?""")
_SCRIPT = re.compile(r"<script\b([^>]*)>(.*?)</script\s*>", re.S | re.I)
_STYLE = re.compile(r"<style\b([^>]*)>(.*?)</style\s*>", re.S | re.I)
_LINK = re.compile(r"<link\b([^>]*)>", re.I)
_IMG = re.compile(r"<img\b([^>]*)>", re.I)
_HEAD = re.compile(r"<head\b[^>]*>", re.I)
_CSS_URL = re.compile(r"""url\(\s*(?:"([^"]*)"|'([^']*)'|([^)'"\s]*))\s*\)""", re.I)
_CSS_IMPORT = re.compile(r"@import\b", re.I)
# `import … from "x"`, `export … from "x"`, `import "x"`
# (or `import("x")` / `import(expr)`: groups 5 and 6), in one pass so lines stay the page's
_IMPORT = re.compile(
    r"""\b(import|export)(\s+[\w$\s{},*]*?\s*from\s*|\s*)(["'])([^"'\n]*)\3\s*;?"""
    r"""|\bimport\s*\(\s*(?:(["'])([^"'\n]*)\5\s*\))?"""
)
_LOADER = f'globalThis[Symbol.for("{SDK_KEY}")]()'


@dataclass
class SurfaceDocument:
    """The built document (None when the project has no Surface page) and its problems."""

    data: bytes | None
    diagnostics: list[Diagnostic] = field(default_factory=list)


def _attrs(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for m in _ATTR.finditer(text):
        name = m.group(1).lower()
        value = next((g for g in m.groups()[1:] if g is not None), "")
        out.setdefault(name, value)
    return out


def _line(text: str, offset: int, first: int = 1) -> int:
    return first + text.count("\n", 0, offset)


def _is_external(ref: str) -> bool:
    return ref.startswith("//") or re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", ref) is not None


def inlined_sdk() -> str:
    """The Surface SDK as a classic script that only defines a loader: evaluating it has no
    side effect; the first call of the loader evaluates the SDK once (its transport opens
    then) and every later call hands back the same instance."""
    source = _sdk_source()
    body = re.sub(r"^export default \w+;\s*$", "", source, flags=re.M)
    body = re.sub(r"^export (class|const|function|let) ", r"\1 ", body, flags=re.M)
    body = body.replace("import.meta.url", "location.href")
    body = body.replace("</script", "<\\/script")
    return (
        "(() => {\n"
        f'  const key = Symbol.for("{SDK_KEY}");\n'
        "  if (globalThis[key]) return;\n"
        "  let instance = null;\n"
        "  const load = async () => {\n"
        f"{body}\n"
        "    return Object.freeze({ sdk, LineupError, default: sdk });\n"
        "  };\n"
        "  Object.defineProperty(globalThis, key, {\n"
        "    value: () => (instance ??= load()),\n"
        "  });\n"
        "})();\n"
    )


def _sdk_source() -> str:
    """The Surface SDK shipped beside this package (found without importing the runtime)."""
    spec = importlib.util.find_spec("lineup_runtime_lite")
    if spec is None or not spec.submodule_search_locations:  # pragma: no cover - packaging
        raise RuntimeError("lineup_runtime_lite is not installed beside lineup_build")
    folder = Path(next(iter(spec.submodule_search_locations)))
    return (folder / "web" / "sdk.js").read_text("utf-8")


def sdk_module() -> str:
    """What `lineup dev` serves at `/_lineup/sdk.js`: a module handing back the page's one
    SDK instance (the inlined one in a built document), evaluating the SDK only when the
    page has none."""
    return (
        inlined_sdk()
        + f"const lineup = await {_LOADER};\n"
        + "export const sdk = lineup.sdk;\n"
        + "export const LineupError = lineup.LineupError;\n"
        + "export default sdk;\n"
    )


def _bindings(clause: str) -> str:
    """`{ a, b as c }` / `d` / `* as e` / `d, { a }` as a destructuring of the module."""
    clause = clause.strip()
    parts: list[str] = []
    named = re.search(r"\{(.*)\}", clause, re.S)
    rest = re.sub(r"\{.*\}", "", clause, flags=re.S).strip().strip(",").strip()
    if rest.startswith("*"):
        return rest.split("as", 1)[1].strip()
    if rest:
        parts.append(f"default: {rest}")
    if named:
        for item in named.group(1).split(","):
            item = item.strip()
            if not item:
                continue
            if " as " in item:
                a, b = (x.strip() for x in item.split(" as ", 1))
                parts.append(f"{a}: {b}")
            else:
                parts.append(item)
    return "{ " + ", ".join(parts) + " }"


class _Builder:
    def __init__(self, files: dict[str, IncludedFile]) -> None:
        self.files = files
        self.diagnostics: list[Diagnostic] = []
        self.uses_sdk = False

    def refuse(self, file: str, line: int, what: str) -> None:
        self.diagnostics.append(
            Diagnostic(
                "surface_not_inlinable",
                f"the Surface document cannot inline {what}",
                where=Where(file, line),
                hint=_HINT,
            )
        )

    def local(self, ref: str, base: str, file: str, line: int, what: str) -> IncludedFile | None:
        """The included file `ref` names (relative to `base`'s folder), or a diagnostic."""
        if _is_external(ref):
            self.refuse(file, line, f"{what} {ref!r}: an external URL")
            return None
        clean = ref.split("#", 1)[0].split("?", 1)[0]
        path = posixpath.normpath(posixpath.join(posixpath.dirname(base), clean))
        found = self.files.get(path) if clean and not clean.startswith("/") else None
        if found is None:
            self.refuse(file, line, f"{what} {ref!r}: no such file in `include`")
        return found

    def script(self, text: str, file: str, first: int) -> str:
        """A module's text with both SDK import forms rewritten; every other import refused."""

        def rewrite(m: re.Match[str]) -> str:
            line = _line(text, m.start(), first)
            keyword, middle, _, spec, _, dynamic = m.groups()
            if keyword is None:  # import(...)
                if dynamic != SDK_SPECIFIER:
                    self.refuse(
                        file, line, f"the dynamic import of {dynamic or 'a computed name'!r}"
                    )
                    return m.group(0)
                self.uses_sdk = True
                return _LOADER
            if spec != SDK_SPECIFIER or keyword == "export" or "from" not in middle:
                self.refuse(file, line, f"the {keyword} of {spec!r}")
                return m.group(0)
            self.uses_sdk = True
            clause = middle.strip()[: -len("from")]
            return f"const {_bindings(clause)} = await {_LOADER};"

        return _IMPORT.sub(rewrite, text)

    def css(self, text: str, base: str, file: str, first: int) -> str:
        for m in _CSS_IMPORT.finditer(text):
            self.refuse(file, _line(text, m.start(), first), "a CSS @import")

        def url(m: re.Match[str]) -> str:
            ref = next((g for g in m.groups() if g is not None), "")
            if ref.startswith("data:") or ref.startswith("#") or not ref:
                return m.group(0)
            found = self.local(ref, base, file, _line(text, m.start(), first), "the CSS url")
            return f'url("{_data_uri(found)}")' if found else m.group(0)

        return _CSS_URL.sub(url, text)

    def page(self, page: IncludedFile) -> str:
        html = page.data.decode("utf-8", "replace")
        file = page.path

        def script(m: re.Match[str]) -> str:
            attrs = _attrs(m.group(1))
            line = _line(html, m.start())
            src = attrs.get("src")
            if src is None:
                first = _line(html, m.start(2))
                return f"<script{m.group(1)}>{self.script(m.group(2), file, first)}</script>"
            found = self.local(src, file, file, line, "the script")
            if found is None:
                return m.group(0)
            kept = re.sub(r"""\s+src\s*=\s*("[^"]*"|'[^']*'|[^\s>]+)""", "", m.group(1), flags=re.I)
            code = self.script(found.data.decode("utf-8", "replace"), found.path, 1)
            code = code.replace("</script", "<\\/script")
            return f"<script{kept}>{code}</script>"

        def style(m: re.Match[str]) -> str:
            first = _line(html, m.start(2))
            return f"<style{m.group(1)}>{self.css(m.group(2), file, file, first)}</style>"

        def link(m: re.Match[str]) -> str:
            attrs = _attrs(m.group(1))
            href = attrs.get("href")
            if href is None or href.startswith("data:"):
                return m.group(0)
            line = _line(html, m.start())
            if "stylesheet" not in attrs.get("rel", "").lower().split():
                self.refuse(file, line, f"the link {href!r} (only stylesheets are inlined)")
                return m.group(0)
            found = self.local(href, file, file, line, "the stylesheet")
            if found is None:
                return m.group(0)
            css = self.css(found.data.decode("utf-8", "replace"), found.path, found.path, 1)
            return f"<style>{css}</style>"

        def img(m: re.Match[str]) -> str:
            attrs = _attrs(m.group(1))
            src = attrs.get("src")
            if src is None or src.startswith("data:"):
                return m.group(0)
            found = self.local(src, file, file, _line(html, m.start()), "the image")
            if found is None:
                return m.group(0)
            return m.group(0).replace(src, _data_uri(found), 1)

        # one pass over the page, so inlined text is never scanned as page markup again
        pattern = re.compile(
            "|".join(f"(?:{p.pattern})" for p in (_SCRIPT, _STYLE, _LINK, _IMG)), re.S | re.I
        )

        def any_tag(m: re.Match[str]) -> str:
            text = m.group(0)
            for rx, fn in ((_SCRIPT, script), (_STYLE, style), (_LINK, link), (_IMG, img)):
                sub = rx.match(html, m.start())
                if sub is not None and sub.end() == m.end():
                    return fn(sub)
            return text

        return pattern.sub(any_tag, html)


def _data_uri(found: IncludedFile) -> str:
    kind = mimetypes.guess_type(found.path)[0] or "application/octet-stream"
    return f"data:{kind};base64,{base64.b64encode(found.data).decode('ascii')}"


def build_surface_document(files: list[IncludedFile]) -> SurfaceDocument:
    """The one document of the project's Surface (None without `surface/index.html`)."""
    by_path = {f.path: f for f in files}
    page = by_path.get(SURFACE_PAGE)
    if page is None:
        return SurfaceDocument(None)
    if SURFACE_DOCUMENT in by_path:
        return SurfaceDocument(
            None,
            [
                Diagnostic(
                    "surface_not_inlinable",
                    f"the include globs match {SURFACE_DOCUMENT}, where the build writes the "
                    "Surface document",
                    where=Where(SURFACE_DOCUMENT),
                    hint="rename or exclude that file: `_lineup/` belongs to the toolchain",
                )
            ],
        )
    builder = _Builder(by_path)
    html = builder.page(page)
    if builder.diagnostics:
        builder.diagnostics.sort(key=Diagnostic.sort_key)
        return SurfaceDocument(None, builder.diagnostics)
    if builder.uses_sdk:
        sdk = f"<script>{inlined_sdk()}</script>"
        head = _HEAD.search(html)
        at = head.end() if head is not None else 0
        html = html[:at] + sdk + html[at:]
    return SurfaceDocument(html.encode("utf-8"), [])
