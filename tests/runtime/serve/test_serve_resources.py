"""Resources for every client (SPEC 18.1): each served app version with a Surface listed as
`ui://lineup/<scope>/<version>/surface.html` and read as its signed document, through the
official Python client on 2025-11-25 and on 2026-07-28 (with the caching hints); an unknown
URI is the revision's "resource not found"; templates list empty; the capability is
advertised; an app installed beside and not served is not listed."""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path
from typing import Any

import anyio
import mcp.types as mt
import pytest
from mcp.shared.exceptions import MCPError

from lineup_build.build import build_project
from lineup_build.init import init_project
from lineup_build.signing import SigningKey
from lineup_build.trust import TrustStore
from lineup_runtime_lite import Runtime
from lineup_runtime_lite.internals import MIME_TYPE
from lineup_runtime_lite.serve import Bridge, ServeOptions
from lineup_sdk.errors import LineupError
from tests.runtime.serve_kit import memory_session, open_runtime, raw_session

OPTIONS = ServeOptions(tool_names="dotted", heartbeat_s=0.05, poll_s=0.01)
TODO_URI = "ui://lineup/todo/1.0.0/surface.html"


@pytest.fixture(scope="module")
def focus_bundle(tmp_path_factory: pytest.TempPathFactory, rt_key: SigningKey) -> Path:
    root = tmp_path_factory.mktemp("focus-resources") / "pomodoro"
    init_project(root, template="pomodoro")
    result = build_project(root, signing_key=rt_key)
    assert result.ok and result.bundle is not None
    return result.bundle


def _signed_page(bundle: Path) -> bytes:
    """The Surface as one signed document (SPEC 18.2): the manifest's `surface` entry."""
    with zipfile.ZipFile(bundle) as z:
        manifest = json.loads(z.read("manifest.json"))
        surface = manifest["surface"]
        page = z.read(f"app/{surface['document']}")
    assert hashlib.sha256(page).hexdigest() == surface["sha256"]
    return page


def _run(tmp_path: Path, trust: TrustStore, bundles: list[Path], main: Any) -> None:
    rt, _ = open_runtime(tmp_path / "rt.db", trust, bundles)
    try:
        anyio.run(main, rt)
    finally:
        rt.close()


def test_python_client_lists_and_reads_each_served_surface(
    tmp_path: Path, trust: TrustStore, todo_bundle: Path, focus_bundle: Path
) -> None:
    async def main(rt: Runtime) -> None:
        async with memory_session(Bridge(rt, OPTIONS)) as s:
            assert s.server_capabilities is not None
            assert s.server_capabilities.resources is not None
            listed = await s.list_resources()
            uris = [str(r.uri) for r in listed.resources]
            assert uris == ["ui://lineup/pomodoro/1.0.0/surface.html", TODO_URI]
            todo = listed.resources[1]
            assert todo.name == "todo-surface"
            assert todo.mime_type == MIME_TYPE
            assert todo.description and "todo 1.0.0" in todo.description
            assert todo.meta == {"ui": {"csp": {}, "prefersBorder": True}}
            read = await s.read_resource(TODO_URI)
            (content,) = read.contents
            assert isinstance(content, mt.TextResourceContents)
            assert str(content.uri) == TODO_URI and content.mime_type == MIME_TYPE
            assert content.text.encode() == _signed_page(todo_bundle)
            assert content.meta == {"ui": {"csp": {}, "prefersBorder": True}}
            templates = await s.list_resource_templates()
            assert templates.resource_templates == []

    _run(tmp_path, trust, [todo_bundle, focus_bundle], main)


def test_an_unknown_uri_is_the_revisions_resource_not_found(
    tmp_path: Path, trust: TrustStore, todo_bundle: Path
) -> None:
    async def main(rt: Runtime) -> None:
        bridge = Bridge(rt, OPTIONS)
        async with raw_session(bridge) as raw:
            for uri in (
                "ui://lineup/todo/9.9.9/surface.html",
                "ui://lineup/nope/1.0.0/surface.html",
                "file:///etc/passwd",
            ):
                got = await raw.request("resources/read", {"uri": uri})
                assert got["error"]["code"] == -32002, got
                assert got["error"]["data"] == {"uri": uri}
        async with memory_session(bridge, modern=True) as s:
            with pytest.raises(MCPError) as caught:
                await s.read_resource("ui://lineup/todo/9.9.9/surface.html")
            assert caught.value.error.code == -32602

    _run(tmp_path, trust, [todo_bundle], main)


def test_on_2026_07_28_the_list_carries_its_caching_hints(
    tmp_path: Path, trust: TrustStore, todo_bundle: Path
) -> None:
    async def main(rt: Runtime) -> None:
        async with memory_session(Bridge(rt, OPTIONS), modern=True) as s:
            listed = await s.list_resources()
            assert [str(r.uri) for r in listed.resources] == [TODO_URI]
            assert listed.ttl_ms == 60_000 and listed.cache_scope == "private"
            read = await s.read_resource(TODO_URI)
            assert read.ttl_ms == 60_000
            templates = await s.list_resource_templates()
            assert templates.resource_templates == [] and templates.ttl_ms == 60_000

    _run(tmp_path, trust, [todo_bundle], main)


def test_an_app_not_served_is_not_listed_nor_read(
    tmp_path: Path, trust: TrustStore, todo_bundle: Path, focus_bundle: Path
) -> None:
    async def main(rt: Runtime) -> None:
        async with raw_session(Bridge(rt, OPTIONS, scopes=["pomodoro"])) as raw:
            listed = await raw.request("resources/list")
            uris = [r["uri"] for r in listed["result"]["resources"]]
            assert uris == ["ui://lineup/pomodoro/1.0.0/surface.html"]
            got = await raw.request("resources/read", {"uri": TODO_URI})
            assert got["error"]["code"] == -32002

    _run(tmp_path, trust, [todo_bundle, focus_bundle], main)


def test_a_tampered_installed_page_is_never_served(
    tmp_path: Path, trust: TrustStore, todo_bundle: Path
) -> None:
    rt, _ = open_runtime(tmp_path / "rt.db", trust, [todo_bundle])
    try:
        (page,) = tmp_path.rglob("_lineup/surface.html")
        page.write_bytes(page.read_bytes() + b"<script>steal()</script>")
        with pytest.raises(LineupError) as caught:
            rt.surface_document("todo", "1.0.0")
        assert caught.value.code == "install_tampered"
    finally:
        rt.close()


def test_a_tampered_installed_page_answers_a_lineup_error_over_mcp(
    tmp_path: Path, trust: TrustStore, todo_bundle: Path
) -> None:
    async def main(rt: Runtime) -> None:
        (page,) = tmp_path.rglob("_lineup/surface.html")
        page.write_bytes(page.read_bytes() + b"<script>steal()</script>")
        async with raw_session(Bridge(rt, OPTIONS)) as raw:
            got = await raw.request("resources/read", {"uri": TODO_URI})
            assert got["error"]["code"] == -32603
            assert got["error"]["data"]["code"] == "install_tampered"
            assert "steal" not in json.dumps(got)

    _run(tmp_path, trust, [todo_bundle], main)


def test_a_new_current_version_is_listed_in_place_of_the_old(
    tmp_path: Path, trust: TrustStore, todo_bundle: Path, rt_key: SigningKey
) -> None:
    """`lineup dev` re-installs on each edit: the list follows the current version."""
    root = tmp_path / "todo-next"
    init_project(root, template="todo", scope="todo")
    toml = root / "lineup.toml"
    toml.write_text(toml.read_text().replace('version = "1.0.0"', 'version = "1.1.0"'))
    (root / "surface" / "index.html").write_text("<!doctype html><title>next</title>")
    built = build_project(root, signing_key=rt_key)
    assert built.ok and built.bundle is not None
    nxt = built.bundle

    async def main(rt: Runtime) -> None:
        async with memory_session(Bridge(rt, OPTIONS)) as s:
            assert [str(r.uri) for r in (await s.list_resources()).resources] == [TODO_URI]
            await anyio.to_thread.run_sync(rt.install, nxt)
            uri = "ui://lineup/todo/1.1.0/surface.html"
            assert [str(r.uri) for r in (await s.list_resources()).resources] == [uri]
            (content,) = (await s.read_resource(uri)).contents
            assert isinstance(content, mt.TextResourceContents)
            assert content.text == "<!doctype html><title>next</title>"

    _run(tmp_path, trust, [todo_bundle], main)


def test_the_csp_comes_from_the_manifest(
    tmp_path: Path, trust: TrustStore, rt_key: SigningKey
) -> None:
    """`[app.surface] csp` in lineup.toml → the manifest → `_meta.ui.csp` (SPEC 18.2)."""
    root = tmp_path / "todo-csp"
    init_project(root, template="todo", scope="todo")
    toml = root / "lineup.toml"
    toml.write_text(
        toml.read_text()
        + '\n[app.surface]\ncsp = {connect_domains = ["https://api.example.com"]}\n'
    )
    built = build_project(root, signing_key=rt_key)
    assert built.ok and built.bundle is not None
    assert built.manifest is not None
    assert built.manifest["surface"]["csp"] == {"connect_domains": ["https://api.example.com"]}
    want = {"ui": {"csp": {"connectDomains": ["https://api.example.com"]}, "prefersBorder": True}}

    async def main(rt: Runtime) -> None:
        async with memory_session(Bridge(rt, OPTIONS)) as s:
            (listed,) = (await s.list_resources()).resources
            assert listed.meta == want
            (content,) = (await s.read_resource(TODO_URI)).contents
            assert content.meta == want

    _run(tmp_path, trust, [built.bundle], main)
