"""The Surface side of a MiniApp (SPEC 14): the Surface SDK (`sdk.js`, shipped in this
package) and the web dev Host behind `lineup dev`. Needs the optional `web` extra
(starlette and uvicorn, as the `mcp` extra, plus `websockets`, without which uvicorn answers
a WebSocket upgrade with 404): `pip install ".[web]"` in a checkout, or the wheel with
`[web]`."""

from __future__ import annotations

from lineup_sdk import __version__
from lineup_sdk.errors import LineupError

try:
    import starlette  # noqa: F401
    import uvicorn  # noqa: F401
    import websockets  # noqa: F401
except ModuleNotFoundError:
    raise LineupError(
        "usage_invalid",
        "lineup dev needs the web extra (starlette, uvicorn, websockets), which is not installed",
        hint=f'install the web extra: pip install ".[web]" in a LineUp checkout, or '
        f'pip install "lineup_sdk-{__version__}-py3-none-any.whl[web]" beside the wheel',
        exit_code=2,
    ) from None

from lineup_runtime_lite.web._devhost import (
    FAULTS_ENV,
    Binding,
    BridgeLimits,
    DevHost,
    faults_enabled,
)
from lineup_runtime_lite.web._origins import COOKIE, host_app, surface_app, web_asset
from lineup_runtime_lite.web._server import DEFAULT_PORT, DevUrls, bind_free, serve_dev
from lineup_runtime_lite.web._session import DevSession, dev_db, mcp_app, open_dev
from lineup_runtime_lite.web._watch import Watcher

__all__ = [
    "COOKIE",
    "DEFAULT_PORT",
    "FAULTS_ENV",
    "Binding",
    "BridgeLimits",
    "DevHost",
    "DevSession",
    "DevUrls",
    "Watcher",
    "bind_free",
    "dev_db",
    "faults_enabled",
    "host_app",
    "mcp_app",
    "open_dev",
    "serve_dev",
    "surface_app",
    "web_asset",
]
