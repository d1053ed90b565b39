"""The trust chain on a shared database (SPEC 16.1): a node runs only what the signer signed.

Everything a node reads about an app from PostgreSQL is untrusted input: before a version's
first worker in a process the node verifies the recorded bundle bytes with its own trust
store and takes the manifest, its hash and the key id from them; an `app_versions` row that
disagrees is refused (`activation_failed`, reason `app_untrusted`), whether the node's apps
cache is empty (it would unpack) or already holds the version's folder.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import psycopg
import pytest

from lineup_build.signing import SigningKey, key_from_seed
from lineup_build.trust import TrustedKey, TrustStore
from lineup_runtime_lite import Runtime
from lineup_runtime_lite.core.messages import AgentMessage
from lineup_runtime_lite.internals import engine_of
from tests.runtime.conftest import APPS, build_app

#: A second key, trusted like the signer's: a row may name it, the bundle does not.
OTHER = key_from_seed(bytes(range(101, 133)))


def _trust(rt_key: SigningKey) -> TrustStore:
    return TrustStore.from_keys(
        [
            TrustedKey(rt_key.key_id, rt_key.public_raw, ("*",), "signer"),
            TrustedKey(OTHER.key_id, OTHER.public_raw, ("*",), "other"),
        ]
    )


def _final(rt: Runtime, call_id: str) -> AgentMessage:
    found = [m for m in rt.outbox.all() if m["call_id"] == call_id and m["kind"] != "receipt"]
    assert len(found) == 1, found
    return found[0]


def _add(rt: Runtime, call_id: str, method: str = "todo.add") -> AgentMessage:
    params = {"title": "milk"} if method == "todo.add" else {"text": "x"}
    first = rt.call(call_id, f"conv-{call_id}", method, params)
    if first["kind"] != "receipt":  # answered at once (an unknown method)
        return first
    rt.settle()
    return _final(rt, call_id)


def _refused(final: Mapping[str, Any]) -> None:
    assert final["kind"] == "error", final
    assert final["error"]["code"] == "activation_failed", final
    assert final["error"]["details"]["reason"] == "app_untrusted", final


def _unlisted(rt: Runtime, final: Mapping[str, Any], scope: str = "todo") -> None:
    """A version whose record is not what its signer signed lists no tools: the Agent
    never reads its descriptions or schemas, a call to it is an unknown method, and
    `apps()` says why (SPEC 16.1)."""
    inventory = rt.inventory()
    assert "whatever the database writer wants" not in json.dumps(inventory)
    assert not [t for t in inventory if t["method"].startswith(f"{scope}.")]
    assert final["kind"] == "error", final
    assert final["error"]["code"] == "unknown_method", final
    (app,) = [a for a in rt.apps() if a["scope"] == scope]
    assert app["trusted"] is False and app["permissions"] == [], app
    assert app["problem"]["code"] == "install_tampered", app


def _frozen(rt: Runtime) -> None:
    """The Registry as loaded (verified) now: a row changed next is met at the worker's
    start, as when it changes between a reload and the call."""

    async def kept() -> None:
        return None

    engine_of(rt).refresh_registry = kept  # type: ignore[method-assign]


def _row(url: str, scope: str) -> dict[str, Any]:
    with psycopg.connect(url) as conn:
        cur = conn.execute(
            "SELECT manifest, manifest_sha256, key_id, dir FROM app_versions WHERE scope = %s",
            (scope,),
        )
        names = [d.name for d in cur.description or ()]
        row = cur.fetchone()
        assert row is not None
        return dict(zip(names, row, strict=True))


def _set(url: str, scope: str, **columns: Any) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        for name, value in columns.items():
            conn.execute(
                f"UPDATE app_versions SET {name} = %s WHERE scope = %s",
                (value, scope),
            )


def _other_manifest(row: dict[str, Any]) -> bytes:
    """The row's manifest with one tool described otherwise (its files unchanged)."""
    data = json.loads(bytes(row["manifest"]))
    data["tools"][0]["description"] = "whatever the database writer wants the Agent to read"
    return json.dumps(data, separators=(",", ":")).encode()


def _elsewhere(tmp_path: Path, cache: Path, digest: str) -> str:
    """A copy of the version's folder outside the cache (same files: it would pass)."""
    copy = tmp_path / "elsewhere"
    shutil.copytree(cache / digest, copy)
    return str(copy)


def _install_and_run(
    pg_url: str, trust: TrustStore, apps: Path, bundle: Path
) -> list[dict[str, Any]]:
    """`bundle` installed into `apps` and one call run (unpacked and run once): the
    Inventory as signed."""
    with Runtime.open(pg_url, trust=trust, apps_dir=apps) as rt:
        rt.install(bundle)
        assert _add(rt, "before")["kind"] == "result"
        return rt.inventory()


TAMPER: dict[str, Callable[[dict[str, Any], Path, Path], dict[str, Any]]] = {
    "manifest": lambda row, tmp, cache: {"manifest": _other_manifest(row)},
    "hash": lambda row, tmp, cache: {"manifest_sha256": "0" * 64},
    "key_id": lambda row, tmp, cache: {"key_id": OTHER.key_id},
    "folder": lambda row, tmp, cache: {"dir": _elsewhere(tmp, cache, row["manifest_sha256"])},
}


@pytest.mark.parametrize("cache", ["empty", "filled"])
@pytest.mark.parametrize("column", sorted(TAMPER))
def test_a_tampered_app_versions_row_is_refused(
    pg_url: str,
    tmp_path: Path,
    rt_key: SigningKey,
    todo_bundle: Path,
    column: str,
    cache: str,
) -> None:
    """The row changed while a node runs (its Registry loaded, verified, before): the
    worker's start verifies again and refuses."""
    trust = _trust(rt_key)
    installed = tmp_path / "apps-a"
    _install_and_run(pg_url, trust, installed, todo_bundle)
    row = _row(pg_url, "todo")
    apps = installed if cache == "filled" else tmp_path / "apps-b"
    with Runtime.open(pg_url, trust=trust, apps_dir=apps) as rt:
        _frozen(rt)
        if cache == "empty":  # the Registry's verification unpacked it: emptied again
            shutil.rmtree(apps / row["manifest_sha256"])
        _set(pg_url, "todo", **TAMPER[column](row, tmp_path, installed))
        _refused(_add(rt, "after"))
    if cache == "empty":
        assert not any(apps.rglob("*.py")), "nothing unpacked from a refused row"


@pytest.mark.parametrize("cache", ["empty", "filled"])
@pytest.mark.parametrize("column", sorted(TAMPER))
def test_a_tampered_row_lists_no_tools(
    pg_url: str,
    tmp_path: Path,
    rt_key: SigningKey,
    todo_bundle: Path,
    column: str,
    cache: str,
) -> None:
    """A node that opens on a tampered row: the Inventory never carries what the row
    says (a description the signer never signed), the app is reported untrusted."""
    trust = _trust(rt_key)
    installed = tmp_path / "apps-a"
    signed = _install_and_run(pg_url, trust, installed, todo_bundle)
    row = _row(pg_url, "todo")
    _set(pg_url, "todo", **TAMPER[column](row, tmp_path, installed))
    apps = installed if cache == "filled" else tmp_path / "apps-b"
    with Runtime.open(pg_url, trust=trust, apps_dir=apps) as rt:
        _unlisted(rt, _add(rt, "after"))
        if cache == "empty":
            assert not any(apps.rglob("*.py")), "nothing unpacked from a refused row"
        _set(pg_url, "todo", **row)  # the row as signed again: listed at the next reload
        assert rt.apps()[0]["trusted"] is True
        assert rt.inventory() == signed


def test_a_row_pointing_at_another_signed_bundle_of_another_scope_is_refused(
    pg_url: str, tmp_path: Path, rt_key: SigningKey, todo_bundle: Path, probe_bundle: Path
) -> None:
    """Every column of `todo`'s row copied from `probe`'s (validly signed, recorded): the
    verified manifest's scope is not the row's."""
    trust = _trust(rt_key)
    apps = tmp_path / "apps"
    with Runtime.open(pg_url, trust=trust, apps_dir=apps) as rt:
        rt.install(todo_bundle)
        rt.install(probe_bundle)
    probe = _row(pg_url, "probe")
    _set(pg_url, "todo", **probe)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("DELETE FROM apps WHERE scope = 'probe'")  # its methods now todo's only
    for cache in (apps, tmp_path / "apps-empty"):
        with Runtime.open(pg_url, trust=trust, apps_dir=cache) as rt:
            _unlisted(rt, _add(rt, "e", "probe.echo"))
            assert rt.inventory() == []  # probe's tools under todo's name: none


def test_a_row_whose_version_is_not_the_signed_one_is_refused(
    pg_url: str, tmp_path: Path, rt_key: SigningKey, todo_bundle: Path
) -> None:
    """The row says 9.9.9 (a later version, say, to pass a downgrade check); the signed
    manifest says otherwise."""
    trust = _trust(rt_key)
    with Runtime.open(pg_url, trust=trust, apps_dir=tmp_path / "a") as rt:
        rt.install(todo_bundle)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("UPDATE app_versions SET version = '9.9.9'")
        conn.execute("UPDATE apps SET version = '9.9.9'")
    with Runtime.open(pg_url, trust=trust, apps_dir=tmp_path / "a") as rt:
        _unlisted(rt, _add(rt, "v"))


def test_dev_builds_run_on_postgres(pg_url: str, tmp_path: Path, rt_key: SigningKey) -> None:
    """`lineup dev --db postgresql://…`'s path: a second build of the same version installs
    as `<version>+dev.<sha12>` and runs; the row's version is the signed one plus that."""
    trust = _trust(rt_key)
    src = tmp_path / "src"
    shutil.copytree(APPS / "probe", src)
    first = build_app(src, tmp_path / "b1" / "probe", rt_key)
    (src / "probe_app" / "extra.py").write_text("X = 1\n")
    second = build_app(src, tmp_path / "b2" / "probe", rt_key)
    with Runtime.open(pg_url, trust=trust, apps_dir=tmp_path / "apps") as rt:
        assert rt.install(first, dev_build=True).version == "1.0.0"
        dev = rt.install(second, dev_build=True).version
        assert dev.startswith("1.0.0+dev.") and len(dev) == len("1.0.0+dev.") + 12
        assert rt.call("e", "conv", "probe.echo", {"text": "x"})["stage"] == "accepted"
        rt.settle()
        assert _final(rt, "e")["kind"] == "result"
    with Runtime.open(pg_url, trust=trust, apps_dir=tmp_path / "apps-empty") as rt:
        rt.call("f", "conv2", "probe.echo", {"text": "y"})
        rt.settle()
        assert _final(rt, "f")["kind"] == "result"
    with psycopg.connect(pg_url, autocommit=True) as conn:  # a dev suffix of another build
        conn.execute(
            "UPDATE app_versions SET version = '1.0.0+dev.000000000000' WHERE version = %s",
            (dev,),
        )
        conn.execute("UPDATE apps SET version = '1.0.0+dev.000000000000'")
    with Runtime.open(pg_url, trust=trust, apps_dir=tmp_path / "apps") as rt:
        _unlisted(rt, _add(rt, "g", "probe.echo"), "probe")


def test_the_verification_runs_once_per_process_off_the_loop_and_again_for_a_new_trust(
    pg_url: str,
    tmp_path: Path,
    rt_key: SigningKey,
    todo_bundle: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import threading

    import lineup_runtime_lite.api.trusted_apps as art
    from lineup_runtime_lite.drivers import install

    trust = _trust(rt_key)
    apps = tmp_path / "apps"
    with Runtime.open(pg_url, trust=trust, apps_dir=apps) as rt:
        rt.install(todo_bundle)
    threads: list[int] = []
    real = install.verify_recorded

    def counted(*args: Any, **options: Any) -> Any:
        threads.append(threading.get_ident())
        return real(*args, **options)

    monkeypatch.setattr(art, "verify_recorded", counted)
    with Runtime.open(pg_url, trust=trust, apps_dir=apps, isolation="session") as rt:
        _frozen(rt)  # the Registry verified the version at open: the workers meet the rest
        assert _add(rt, "one")["kind"] == "result"
        assert _add(rt, "two")["kind"] == "result"  # another worker: the folder check only
        assert len(threads) == 1 and threads[0] != rt._art._deadlines.thread_id, threads
        _set(pg_url, "todo", key_id=OTHER.key_id)  # the row changed after the verification
        _refused(_add(rt, "edited"))
        assert len(threads) == 1  # the cached verification, the row compared again
        _set(pg_url, "todo", key_id=rt_key.key_id)
        trust.revoke(rt_key.key_id)  # a new trust store: verified again, and refused
        final = _add(rt, "three")
        _refused(final)
        assert final["error"]["details"]["cause"] == "key_revoked"
        assert len(threads) == 2
