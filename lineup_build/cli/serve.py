"""`lineup serve`: installed MiniApps as an MCP server (the runtime is imported lazily)."""

from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from lineup_build.cli._common import TRUST_HELP, trust_store_path
from lineup_build.cli._options import IsolationOpt, checked_isolation, warn_db_password
from lineup_sdk.errors import LineupError

#: A fixed bearer token for `--http` (otherwise a fresh one each start).
TOKEN_ENV = "LINEUP_SERVE_TOKEN"


def _say(text: str) -> None:
    # stdout belongs to the protocol on stdio; every human line goes to stderr
    sys.stderr.write(f"lineup serve: {text}\n")
    sys.stderr.flush()


def _host_port(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise LineupError(
            "usage_invalid", f"--http {text!r} must be HOST:PORT, e.g. 127.0.0.1:8765", exit_code=2
        )
    return host, int(port)


def register(app: typer.Typer) -> None:
    """Add `lineup serve` to the CLI."""

    @app.command()
    def serve(
        targets: Annotated[
            list[Path],
            typer.Argument(
                metavar="PATH_OR_BUNDLE",
                help="MiniApp folders (built with their dev keys) or bundles.",
            ),
        ],
        trust: Annotated[
            Path | None,
            typer.Option("--trust", help=f"{TRUST_HELP} Needed for a bundle."),
        ] = None,
        db: Annotated[
            str | None,
            typer.Option(
                "--db",
                envvar="LINEUP_DB",
                show_envvar=True,
                help="Runtime state: calls, receipts, sessions: an SQLite FILE (default: "
                "<first folder>/.lineup/serve.db; only bundles: "
                "$XDG_STATE_HOME/lineup/serve.db) or a PostgreSQL database "
                "postgresql://user@host/db (the postgres extra). Keep a password out of "
                "it: PGPASSWORD, ~/.pgpass, or the whole URL in LINEUP_DB.",
            ),
        ] = None,
        http: Annotated[
            str | None,
            typer.Option(
                help="Serve streamable HTTP on HOST:PORT instead of stdio; clients send "
                "Authorization: Bearer TOKEN, the token printed at start (a fresh one each "
                "start, or $LINEUP_SERVE_TOKEN)."
            ),
        ] = None,
        tool_names: Annotated[
            str,
            typer.Option(
                help="dashed (todo-add, what every MCP client accepts) or dotted (todo.add); "
                "tools/call takes either spelling."
            ),
        ] = "dashed",
        max_wait: Annotated[
            float,
            typer.Option(
                help="Seconds a call without a progress token is held before it answers "
                "pending (call lineup-result for its final); 0 = right after acceptance.",
                min=0,
                max=3600,
            ),
        ] = 45.0,
        conversation: Annotated[
            str, typer.Option(help="Conversation of calls whose _meta names none.")
        ] = "mcp",
        sandbox: Annotated[
            str,
            typer.Option(
                help="Contain MiniApp code: best_effort, required (refuse without "
                "containment) or off (debugging)."
            ),
        ] = "best_effort",
        isolation: IsolationOpt = None,
        node_id: Annotated[
            str | None,
            typer.Option(
                "--node-id",
                help="On PostgreSQL: this server's id among the nodes of the database "
                "(default: $LINEUP_NODE_ID, else the hostname and the apps cache path).",
            ),
        ] = None,
        node_lease: Annotated[
            float,
            typer.Option(
                "--node-lease",
                help="On PostgreSQL: seconds of this node's lease; once it lapses (the node "
                "died or was cut off) another node takes its conversations over.",
                min=0.2,
                max=3600,
            ),
        ] = 10.0,
    ) -> None:
        """Serve MiniApps' tools over the Model Context Protocol (stdio, or HTTP).

        Over HTTP every request needs Authorization: Bearer TOKEN: the token printed on
        start, or the value of LINEUP_SERVE_TOKEN when set.
        """
        from lineup_runtime_lite import serve as mcp_serve  # usage_invalid without the extra

        address = _host_port(http) if http is not None else None
        if tool_names not in ("dotted", "dashed"):
            raise LineupError(
                "usage_invalid",
                f"--tool-names {tool_names!r} must be dotted or dashed",
                exit_code=2,
            )
        if not conversation:
            raise LineupError("usage_invalid", "--conversation must not be empty", exit_code=2)
        from lineup_sdk.sandbox import check_mode, describe

        check_mode(sandbox)
        isolation = checked_isolation(isolation)
        bundles = [t for t in targets if not t.is_dir()]
        store = trust_store_path(
            trust, required=bool(bundles), why=f"serve {bundles[0]}" if bundles else ""
        )
        from lineup_build.cli.compose import prepare_targets, report_worker_failures, serve_state

        report_worker_failures()
        trust_store, prepared = prepare_targets(targets, store, sandbox=sandbox)
        from lineup_runtime_lite import Runtime
        from lineup_runtime_lite.store.postgres import is_postgres_url, redact_url

        state: str | Path
        if is_postgres_url(db):
            warn_db_password(db, "serve")
            state = str(db)
        else:
            state = (
                Path(os.path.abspath(db)) if db is not None else serve_state(targets, os.environ)
            )
        _say(f"state in {redact_url(state) if isinstance(state, str) else state}")
        try:
            nodes: dict[str, Any] = {}
            if isinstance(state, str):
                nodes = {"node_id": node_id, "node_lease_s": node_lease}
            elif node_id is not None:
                raise LineupError(
                    "usage_invalid", "--node-id is for a postgresql:// --db", exit_code=2
                )
            rt = Runtime.open(
                state, trust=trust_store, sandbox=sandbox, isolation=isolation, **nodes
            )
        except LineupError as exc:
            if exc.code != "runtime_locked" or db is not None:
                raise
            raise LineupError(
                "runtime_locked",
                f"another lineup serve has {state} open",
                hint="give this server a state of its own: --db FILE",
            ) from None
        try:
            _say(describe(rt.sandbox))
            for done in mcp_serve.install_targets(rt, prepared):
                _say(f"{done['scope']} {done['version']} ({done['action']})")
            for app in rt.apps():  # its record is not what its signer signed (SPEC 16.1)
                if not app["trusted"]:
                    _say(
                        f"{app['scope']} {app['version']} untrusted, no tools served: "
                        f"{app['problem']['message']} ({app['problem']['code']})"
                    )
            bridge = mcp_serve.Bridge(
                rt,
                mcp_serve.ServeOptions(
                    tool_names=tool_names, conversation=conversation, max_wait_s=max_wait
                ),
            )
            if address is None:
                import anyio

                _say(f"{len(bridge.tools)} tools over stdio")
                anyio.run(mcp_serve.serve_stdio, bridge)
                return
            token = os.environ.get(TOKEN_ENV) or secrets.token_urlsafe(32)

            def ready(url: str) -> None:
                _say(f"{len(bridge.tools)} tools at {url}")
                _say(
                    f"token {token}  (send: Authorization: Bearer <token>; set {TOKEN_ENV} to fix it)"
                )

            mcp_serve.serve_http(bridge, address[0], address[1], token, on_ready=ready)
        finally:
            rt.close()
