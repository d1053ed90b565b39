"""`lineup serve`: installed MiniApps as an MCP server (the runtime is imported lazily)."""

from __future__ import annotations

import json
import os
import secrets
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from lineup_build.cli._common import (
    envelope,
    output,
    trust_store_path,
    write_json,
)
from lineup_build.cli._options import (
    BundleTrustOpt,
    CodeSandboxOpt,
    IsolationOpt,
    NodeIdOpt,
    NodeLeaseOpt,
    ServeDbOpt,
    checked_isolation,
    warn_db_password,
)
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


def _apps_line(apps: list[dict[str, Any]]) -> str:
    """`todo 0.1.0 (3 tools), pomodoro 0.1.0 (2 tools)`: what the start line names."""
    if not apps:
        return "no apps"
    return ", ".join(
        f"{a['scope']} {a['version']} ({a['tools']} tool{'' if a['tools'] == 1 else 's'})"
        for a in apps
    )


def _start_doc(
    state: str, apps: list[dict[str, Any]], transport: str, url: str | None
) -> dict[str, Any]:
    """The `--json` start document: `state`, `transport` (stdio or http), `url`, each
    served app's `scope`, `version` and `tools` (how many tools it lists), their total
    `tools`, and over HTTP `token` and `token_env`."""
    return envelope(
        True,
        state=state,
        transport=transport,
        url=url,
        apps=apps,
        tools=sum(a["tools"] for a in apps),
        token_env=TOKEN_ENV if transport == "http" else None,
    )


def register(app: typer.Typer) -> None:
    """Add `lineup serve` to the CLI."""

    @app.command()
    def serve(
        targets: Annotated[
            list[Path] | None,
            typer.Argument(
                metavar="PATH_OR_BUNDLE",
                help="MiniApp folders (built with their dev keys) or bundles: the apps this "
                "server exposes, and only those (apps installed earlier into the same state "
                "stay installed but are not served).",
                show_default=False,
            ),
        ] = None,
        all_installed: Annotated[
            bool,
            typer.Option(
                "--all-installed",
                help="Serve every app installed in the state, not only the PATHs named "
                "(PATHs are optional then).",
            ),
        ] = False,
        trust: BundleTrustOpt = None,
        db: ServeDbOpt = None,
        http: Annotated[
            str | None,
            typer.Option(
                help="Serve streamable HTTP on HOST:PORT instead of stdio; clients send "
                "Authorization: Bearer TOKEN, the token printed at start (a fresh one each "
                "start, or $LINEUP_SERVE_TOKEN). Loopback only unless --allow-remote."
            ),
        ] = None,
        allow_remote: Annotated[
            bool,
            typer.Option(
                "--allow-remote",
                help="Let --http bind an address beyond loopback (e.g. 0.0.0.0:8765). The "
                "bearer token then travels in clear without TLS: put a TLS proxy in front.",
            ),
        ] = False,
        allowed_host: Annotated[
            list[str] | None,
            typer.Option(
                "--allowed-host",
                metavar="NAME",
                help="A Host name (or IP address) clients use to reach --http, beyond the "
                "address it binds; repeatable. Other names are refused (421).",
                show_default=False,
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
        sandbox: CodeSandboxOpt = "best_effort",
        isolation: IsolationOpt = None,
        node_id: NodeIdOpt = None,
        node_lease: NodeLeaseOpt = 10.0,
        as_json: Annotated[
            bool,
            typer.Option(
                "--json",
                help="Also write the start facts (state, served apps with version and tool "
                "count, URL) as one JSON document: on stderr over stdio, on stdout over HTTP.",
            ),
        ] = False,
    ) -> None:
        """Serve MiniApps' tools over the Model Context Protocol (stdio, or HTTP).

        It serves exactly the apps named (or, with --all-installed, every app installed in
        the state). Over HTTP every request needs Authorization: Bearer TOKEN: the token
        printed on start, or the value of LINEUP_SERVE_TOKEN when set. With --json the
        start facts are one JSON document (on stderr over stdio, where stdout is the
        protocol; on stdout over HTTP).
        """
        from lineup_runtime_lite import serve as mcp_serve  # usage_invalid without the extra

        targets = list(targets or [])
        if not targets and not all_installed:
            raise LineupError(
                "usage_invalid",
                "name at least one MiniApp folder or bundle, or pass --all-installed",
                hint="lineup serve ./my-app   (or: lineup serve --all-installed --db FILE)",
                exit_code=2,
            )
        address = _host_port(http) if http is not None else None
        hosts = [mcp_serve.check_host_name(h) for h in allowed_host or []]
        if address is None and (allow_remote or hosts):
            raise LineupError(
                "usage_invalid", "--allow-remote and --allowed-host go with --http", exit_code=2
            )
        if address is not None:
            mcp_serve.check_bind(address[0], allow_remote)
        if tool_names not in ("dotted", "dashed"):
            raise LineupError(
                "usage_invalid",
                f"--tool-names {tool_names!r} must be dotted or dashed",
                exit_code=2,
            )
        if not conversation:
            raise LineupError("usage_invalid", "--conversation must not be empty", exit_code=2)
        from lineup_sdk.sandbox import check_mode, describe, summary

        check_mode(sandbox)
        isolation = checked_isolation(isolation)
        bundles = [t for t in targets if not t.is_dir()]
        store = trust_store_path(
            trust, required=bool(bundles), why=f"serve {bundles[0]}" if bundles else ""
        )
        from lineup_build.cli.compose import prepare_targets, report_worker_failures, serve_state

        report_worker_failures()
        if targets:
            trust_store, prepared = prepare_targets(targets, store, sandbox=sandbox)
        else:  # --all-installed alone: what the state holds
            from lineup_build.trust import TrustStore

            trust_store, prepared = (
                (TrustStore.load(store) if store is not None else TrustStore()),
                [],
            )
        from lineup_runtime_lite import Runtime
        from lineup_runtime_lite.databases import is_postgres_url, redact_url

        state: str | Path
        if is_postgres_url(db):
            warn_db_password(db, "serve")
            state = str(db)
        else:
            state = (
                Path(os.path.abspath(db)) if db is not None else serve_state(targets, os.environ)
            )
        shown_state = str(redact_url(state) if isinstance(state, str) else state)
        _say(f"state in {shown_state}")
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
            said = describe(rt.sandbox) if output.verbose else summary(rt.sandbox)
            if said is not None:  # quiet unless asked or something is off (SPEC 8)
                _say(said)
            installed = mcp_serve.install_targets(rt, prepared)
            for done in installed:
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
                # exactly the apps named (SPEC 16.5); --all-installed: every one
                scopes=None if all_installed else [d["scope"] for d in installed],
            )
            served = bridge.served_apps()
            if address is None:
                import anyio

                _say(f"{_apps_line(served)}: {len(bridge.tools)} tools over stdio")
                if as_json:
                    doc = _start_doc(shown_state, served, "stdio", None)
                    sys.stderr.write(json.dumps(doc, sort_keys=True, ensure_ascii=False))
                    sys.stderr.write("\n")
                    sys.stderr.flush()
                anyio.run(mcp_serve.serve_stdio, bridge)
                return
            token = os.environ.get(TOKEN_ENV) or secrets.token_urlsafe(32)
            if not mcp_serve.is_loopback(address[0]):
                _say(f"warning: {mcp_serve.REMOTE_WARNING}")

            def ready(url: str) -> None:
                _say(f"{_apps_line(served)}: {len(bridge.tools)} tools at {url}")
                _say(
                    f"token {token}  (send: Authorization: Bearer <token>; set {TOKEN_ENV} to fix it)"
                )
                if as_json:
                    write_json({**_start_doc(shown_state, served, "http", url), "token": token})

            mcp_serve.serve_http(
                bridge,
                address[0],
                address[1],
                token,
                on_ready=ready,
                allow_remote=allow_remote,
                allowed_hosts=hosts,
            )
        finally:
            rt.close()
