"""The Surface as one signed document (SPEC 18.2): `lineup build` inlines the page's styles,
images and scripts and the Surface SDK once, rewrites both SDK import forms, refuses
everything else with `surface_not_inlinable` at its file and line, writes the same bytes
every time, and lists and hashes the document in the manifest, where `verify` checks it."""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import zipfile
from pathlib import Path

import pytest

from lineup_build.build import build_project, check_project
from lineup_build.bundle import BundleEntry
from lineup_build.files import IncludedFile
from lineup_build.init import init_project
from lineup_build.surface import SDK_KEY, SURFACE_DOCUMENT, build_surface_document
from lineup_build.verify import check_bundle
from tests.build.bundle_kit import EPOCH, KEY, canonical, trust

LOADER = f'await globalThis[Symbol.for("{SDK_KEY}")]()'


def _file(path: str, data: str | bytes) -> IncludedFile:
    raw = data.encode("utf-8") if isinstance(data, str) else data
    return IncludedFile(path, raw, hashlib.sha256(raw).hexdigest())


def _page(html: str, **others: str | bytes) -> list[IncludedFile]:
    return [_file("surface/index.html", html), *(_file(p, d) for p, d in others.items())]


@pytest.fixture(scope="module")
def todo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("surface-doc") / "todo"
    init_project(root, template="todo")
    return root


def _bundle_entries(bundle: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(bundle) as z:
        return {n: z.read(n) for n in z.namelist()}


# --- deterministic, listed and hashed ----------------------------------------------------------


def test_two_builds_write_byte_identical_documents_and_bundles(todo: Path, tmp_path: Path) -> None:
    one = build_project(todo, signing_key=KEY, out_dir=tmp_path / "a", epoch=EPOCH)
    two = build_project(todo, signing_key=KEY, out_dir=tmp_path / "b", epoch=EPOCH)
    assert one.ok and two.ok and one.bundle and two.bundle
    assert one.bundle.read_bytes() == two.bundle.read_bytes()
    doc_one = _bundle_entries(one.bundle)[f"app/{SURFACE_DOCUMENT}"]
    assert doc_one == _bundle_entries(two.bundle)[f"app/{SURFACE_DOCUMENT}"]
    assert one.manifest is not None
    assert one.manifest["surface"] == {
        "document": SURFACE_DOCUMENT,
        "sha256": hashlib.sha256(doc_one).hexdigest(),
        "size": len(doc_one),
        "csp": {},
    }
    # the SDK once, and the page's import rewritten to it
    text = doc_one.decode("utf-8")
    assert text.count(f'Symbol.for("{SDK_KEY}")') == 2  # the definition, the page's use
    assert '/_lineup/sdk.js";' not in text.split("</script>", 1)[1]
    assert f"const {{ sdk }} = {LOADER};" in text


def test_no_surface_page_no_surface_object(tmp_path: Path) -> None:
    assert build_surface_document([_file("app/x.py", "")]).data is None


def test_a_tampered_document_fails_verify(todo: Path, tmp_path: Path) -> None:
    built = build_project(todo, signing_key=KEY, out_dir=tmp_path / "a", epoch=EPOCH)
    assert built.ok and built.bundle
    items = _bundle_entries(built.bundle)
    name = f"app/{SURFACE_DOCUMENT}"
    for changed, code in [
        (items[name] + b"<script>steal()</script>", "file_hash_mismatch"),
        (items[name].replace(b"Todo", b"Evil"), "file_hash_mismatch"),  # the same size
        (None, "file_missing"),
    ]:
        kept = [
            BundleEntry(n, d if n != name or changed is None else changed)
            for n, d in items.items()
            if not (n == name and changed is None)
        ]
        path = tmp_path / "tampered.lineup"
        path.write_bytes(canonical(kept))
        report = check_bundle(path, trust())
        assert not report.ok
        assert [(p.code, (p.details or {}).get("path")) for p in report.problems] == [
            (code, SURFACE_DOCUMENT)
        ]
    path.write_bytes(canonical([BundleEntry(n, d) for n, d in items.items()]))
    assert check_bundle(path, trust()).ok


def test_verify_source_reproduces_the_document(todo: Path, tmp_path: Path) -> None:
    built = build_project(todo, signing_key=KEY, out_dir=tmp_path / "a", epoch=EPOCH)
    assert built.ok and built.bundle
    assert check_bundle(built.bundle, trust(), source=todo).ok
    edited = tmp_path / "edited"
    shutil.copytree(todo, edited, ignore=shutil.ignore_patterns("dist", ".lineup"))
    assert check_bundle(built.bundle, trust(), source=edited).ok  # the same sources
    page = edited / "surface" / "index.html"
    page.write_text(page.read_text().replace("Nothing to do yet.", "All done."))
    report = check_bundle(built.bundle, trust(), source=edited)
    assert [p.code for p in report.problems] == ["stale_bundle"]


# --- what is inlined ---------------------------------------------------------------------------


def test_styles_images_and_scripts_are_inlined() -> None:
    doc = build_surface_document(
        _page(
            '<html><head><link rel="stylesheet" href="app.css"></head><body>\n'
            '<img src="img/logo.png" alt="logo">\n'
            '<script type="module" src="app.js"></script></body></html>',
            **{  # type: ignore[arg-type]  # str and bytes values alike
                "surface/app.css": "body { background: url('img/bg.png') }",
                "surface/img/logo.png": b"\x89PNG-logo",
                "surface/img/bg.png": b"\x89PNG-bg",
                "surface/app.js": 'import { sdk } from "/_lineup/sdk.js";\nsdk.host.ready();',
            },
        )
    )
    assert doc.diagnostics == []
    assert doc.data is not None
    text = doc.data.decode()
    bg = base64.b64encode(b"\x89PNG-bg").decode()
    logo = base64.b64encode(b"\x89PNG-logo").decode()
    assert f'url("data:image/png;base64,{bg}")' in text
    assert f'src="data:image/png;base64,{logo}"' in text
    assert (
        '<script type="module">const { sdk } = ' + LOADER + ";\nsdk.host.ready();</script>" in text
    )
    assert "app.css" not in text and "app.js" not in text and "<link" not in text


@pytest.mark.parametrize(
    ("source", "rewritten"),
    [
        ('import { sdk } from "/_lineup/sdk.js";', f"const {{ sdk }} = {LOADER};"),
        (
            "import {sdk as s, LineupError} from '/_lineup/sdk.js'",
            f"const {{ sdk: s, LineupError }} = {LOADER};",
        ),
        ('import sdk from "/_lineup/sdk.js";', f"const {{ default: sdk }} = {LOADER};"),
        ('import * as lineup from "/_lineup/sdk.js";', f"const lineup = {LOADER};"),
        ('const m = await import("/_lineup/sdk.js");', f"const m = {LOADER};"),
    ],
    ids=["named", "renamed", "default", "namespace", "dynamic"],
)
def test_both_sdk_import_forms_are_rewritten(source: str, rewritten: str) -> None:
    doc = build_surface_document(_page(f'<head></head><script type="module">{source}</script>'))
    assert doc.diagnostics == [] and doc.data is not None
    assert f'<script type="module">{rewritten}</script>' in doc.data.decode()


# --- what is refused ---------------------------------------------------------------------------

REFUSED = [
    ("surface/index.html", 3, '<script type="module">\n\nimport x from "./x.js";\n</script>'),
    ("surface/index.html", 2, '<script type="module">\nimport "lodash";</script>'),
    (
        "surface/index.html",
        2,
        '<script type="module">\nimport { a } from "https://cdn.x/a.js";</script>',
    ),
    ("surface/index.html", 3, '<script type="module">\n\n  await import("./later.js");</script>'),
    ("surface/index.html", 2, '<script type="module">\nawait import(name);</script>'),
    (
        "surface/index.html",
        2,
        '<script type="module">\nexport { sdk } from "/_lineup/sdk.js";</script>',
    ),
    ("surface/index.html", 2, '<p>\n<script src="https://cdn.x/lib.js"></script>'),
    ("surface/index.html", 3, '\n\n<script src="missing.js"></script>'),
    ("surface/index.html", 2, '<p>\n<link rel="stylesheet" href="https://fonts.x/a.css">'),
    ("surface/index.html", 2, '<p>\n<link rel="icon" href="icon.png">'),
    ("surface/index.html", 4, '<p>\n<style>\nb {}\n@import "other.css";</style>'),
    ("surface/index.html", 2, '<p>\n<img src="https://x/logo.png">'),
    ("surface/index.html", 2, '<p>\n<img src="nope.png">'),
    ("surface/app.js", 3, '<script type="module" src="app.js"></script>'),
    ("surface/app.css", 2, '<link rel="stylesheet" href="app.css">'),
]


@pytest.mark.parametrize(
    ("file", "line", "html"),
    REFUSED,
    ids=[
        "relative_import",
        "bare_import",
        "remote_import",
        "other_dynamic_import",
        "computed_dynamic_import",
        "re_export",
        "external_script",
        "missing_script",
        "external_stylesheet",
        "other_link",
        "css_import",
        "external_image",
        "missing_image",
        "import_in_an_included_script",
        "missing_url_in_an_included_stylesheet",
    ],
)
def test_each_refused_form_names_file_and_line(file: str, line: int, html: str) -> None:
    doc = build_surface_document(
        _page(
            html,
            **{
                "surface/app.js": "// the app\nconst a = 1;\nimport b from './b.js';\n",
                "surface/app.css": "body {}\nh1 { background: url(gone.png) }\n",
                "surface/icon.png": "an icon that exists: refused for its rel alone",
            },
        )
    )
    assert doc.data is None
    assert [
        (d.code, d.where.file if d.where else None, d.where.line if d.where else None)
        for d in doc.diagnostics
    ] == [("surface_not_inlinable", file, line)]
    assert doc.diagnostics[0].hint


def test_a_refused_import_fails_the_build_with_file_and_line(todo: Path, tmp_path: Path) -> None:
    root = tmp_path / "todo"
    init_project(root, template="todo")
    page = root / "surface" / "index.html"
    lines = page.read_text().splitlines()
    at = next(i for i, text in enumerate(lines) if "/_lineup/sdk.js" in text)
    lines.insert(at + 1, '    import { chart } from "./chart.js";')
    page.write_text("\n".join(lines) + "\n")
    check = check_project(root)
    assert not check.ok()
    refused = [d for d in check.diagnostics if d.code == "surface_not_inlinable"]
    assert [(str(d.where)) for d in refused] == [f"surface/index.html:{at + 2}"]
    built = build_project(root, signing_key=KEY, out_dir=tmp_path / "dist")
    assert not built.ok and built.bundle is None
    assert not (tmp_path / "dist").exists() or not any((tmp_path / "dist").iterdir())


def test_an_included_file_at_the_document_path_is_refused() -> None:
    doc = build_surface_document(_page("<p>hi</p>", **{SURFACE_DOCUMENT: "x"}))
    assert doc.data is None
    assert [d.code for d in doc.diagnostics] == ["surface_not_inlinable"]


def test_inspect_shows_the_document_and_its_csp(
    todo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.cli_kit import run_cli

    root = tmp_path / "todo"
    shutil.copytree(todo, root, ignore=shutil.ignore_patterns("dist", ".lineup"))
    toml = root / "lineup.toml"
    toml.write_text(
        toml.read_text() + '\n[app.surface]\ncsp = {resource_domains = ["https://cdn.example"]}\n'
    )
    built = build_project(root, signing_key=KEY, out_dir=tmp_path / "dist", epoch=EPOCH)
    assert built.ok and built.bundle and built.model and built.model.surface
    status, out, _ = run_cli(["inspect", str(built.bundle), "--json"], capsys)
    assert status == 0
    doc = json.loads(out)
    assert doc["surface"] == {
        "document": SURFACE_DOCUMENT,
        "sha256": built.model.surface.sha256,
        "size": built.model.surface.size,
        "csp": {"resource_domains": ["https://cdn.example"]},
    }
    status, out, _ = run_cli(["inspect", str(built.bundle)], capsys)
    assert status == 0
    for text in (SURFACE_DOCUMENT, built.model.surface.sha256, "https://cdn.example"):
        assert text in out


def test_a_bad_surface_table_is_config_invalid(todo: Path, tmp_path: Path) -> None:
    root = tmp_path / "todo"
    shutil.copytree(todo, root, ignore=shutil.ignore_patterns("dist", ".lineup"))
    toml = root / "lineup.toml"
    base = toml.read_text()
    for bad in (
        '\n[app.surface]\ncsp = {frame_domains = ["https://x"]}\n',
        '\n[app.surface]\ncsp = {connect_domains = "https://x"}\n',
        "\n[app.surface]\ntheme = 1\n",
    ):
        toml.write_text(base + bad)
        check = check_project(root)
        assert [d.code for d in check.diagnostics if d.severity == "error"] == ["config_invalid"]
