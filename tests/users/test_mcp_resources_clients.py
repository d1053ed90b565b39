"""Resources through the official clients (SPEC 18.1): `lineup serve todo focus` over stdio, as
a user configures it, listed and read by the Python SDK's `ClientSession` and by the
TypeScript SDK's `Client` (mcp_ts/client.mjs); an unknown URI is the revision's "resource
not found" (-32002 on 2025-11-25) in both. The TypeScript client needs Node: without it the
TypeScript test skips, except in CI, where it fails."""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

import anyio
import mcp.types as mt
import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

from lineup_build.build import build_project
from lineup_build.init import init_project
from tests.users.mcp_clients_kit import TsSdkDriver, lineup_command, locate_ts_client

MIME = "text/html;profile=mcp-app"
URIS = ["ui://lineup/pomodoro/1.0.0/surface.html", "ui://lineup/todo/1.0.0/surface.html"]
UNKNOWN = "ui://lineup/todo/9.9.9/surface.html"


@pytest.fixture(scope="module")
def apps(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("resources-clients")
    init_project(root / "todo", template="todo", scope="todo")
    init_project(root / "focus", template="pomodoro", scope="pomodoro")
    return root


def _document(apps: Path) -> str:
    """The todo Surface as its one signed document (SPEC 18.2): what `lineup build` writes,
    the same bytes whichever key signs it."""
    result = build_project(apps / "todo", dev_key=True, out_dir=apps / "expected")
    assert result.ok and result.bundle is not None
    with zipfile.ZipFile(result.bundle) as z:
        manifest = json.loads(z.read("manifest.json"))
        return z.read(f"app/{manifest['surface']['document']}").decode()


def _args(apps: Path) -> list[str]:
    return ["serve", "todo", "focus", "--db", str(apps / "serve.db")]


def test_the_python_client_lists_and_reads_the_surfaces(apps: Path) -> None:
    page = _document(apps)

    async def main() -> None:
        params = StdioServerParameters(command=lineup_command(), args=_args(apps), cwd=str(apps))
        with (apps / "python.log").open("a") as err:
            async with stdio_client(params, errlog=err) as (r, w), ClientSession(r, w) as s:
                with anyio.fail_after(120):
                    await s.initialize()
                    listed = await s.list_resources()
                    assert [str(r.uri) for r in listed.resources] == URIS
                    assert {r.mime_type for r in listed.resources} == {MIME}
                    read = await s.read_resource(URIS[1])
                    (content,) = read.contents
                    assert isinstance(content, mt.TextResourceContents)
                    assert content.text == page
                    assert (content.meta or {}).get("ui") == {"csp": {}, "prefersBorder": True}
                    assert (await s.list_resource_templates()).resource_templates == []
                    with pytest.raises(MCPError) as caught:
                        await s.read_resource(UNKNOWN)
                    assert caught.value.error.code == -32002

    anyio.run(main)


def test_the_typescript_client_lists_and_reads_the_surfaces(apps: Path) -> None:
    folder = locate_ts_client()
    if isinstance(folder, str):
        if os.environ.get("CI"):
            pytest.fail(f"the TypeScript client must run in CI: {folder}")
        pytest.skip(folder)
    page = _document(apps)
    driver = TsSdkDriver(folder, apps, _args(apps), apps / "ts.log", 120)
    try:
        listed = driver.op("resources", 60)
        assert [r["uri"] for r in listed["resources"]] == URIS
        assert {r["mimeType"] for r in listed["resources"]} == {MIME}
        assert all(r["_meta"]["ui"]["prefersBorder"] is True for r in listed["resources"])
        read = driver.op("read", 60, uri=URIS[1])
        (content,) = read["contents"]
        assert content["text"] == page and content["mimeType"] == MIME
        assert driver.op("templates", 60)["resourceTemplates"] == []
        missing = driver.op("read", 60, uri=UNKNOWN)
        assert missing["error"]["code"] == -32002, missing
    finally:
        driver.close()
