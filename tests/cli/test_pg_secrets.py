"""Secrets are never shown (SPEC 16.2), and schema names are checked in full (SPEC 16.3):
a PostgreSQL URL libpq cannot parse is `usage_invalid` with the URL redacted; the password
never appears in a message, hint, details, `--json`, a traceback (`--verbose` too), a log
line or `store.path`, whatever its characters; a password in a `--db` argument is warned
about on start (not one in `LINEUP_DB`)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

import pytest

from lineup_build.init import init_project
from lineup_build.trust import TrustStore
from lineup_runtime_lite import Runtime, VirtualClock
from lineup_runtime_lite.store.postgres import PostgresStore, check_schema_name, redact_url
from lineup_sdk.errors import LineupError
from tests.cli_kit import run_cli
from tests.pg_kit import PgServer, fresh_database
from tests.runtime.conftest import rt_key, trust

__all__ = ["rt_key", "trust"]

ROOT = Path(__file__).resolve().parents[2]
#: Passwords as a URL may carry them: (what is written in the URL, the secret itself).
PASSWORDS = {
    "bad_escape": ("s3cr%zzet", "s3cr%zzet"),
    "percent": ("s3cr%25et", "s3cr%et"),
    "at_encoded": ("s3cr%40et", "s3cr@et"),
    "at_raw": ("s3cr@et", "s3cr@et"),
    "colon": ("s3cr:et", "s3cr:et"),
    "slash_encoded": ("s3cr%2Fet", "s3cr/et"),
    "slash_raw": ("s3cr/et", "s3cr/et"),
    "non_ascii": ("s3crét-pässwörd", "s3crét-pässwörd"),
}


def _forms(written: str, secret: str) -> list[str]:
    """Every spelling of the secret a leak could take (and its distinctive pieces)."""
    pieces = {written, secret, quote(secret, safe=""), "s3cr", "et-p", "wörd"}
    return [p for p in pieces if len(p) >= 4]


def _url(port: int, written: str, query: str = "") -> str:
    return f"postgresql://postgres:{written}@127.0.0.1:{port}/postgres{query}"


def _assert_hidden(text: str, written: str, secret: str) -> None:
    for form in _forms(written, secret):
        assert form not in text, (form, text)


@pytest.mark.parametrize("name", sorted(PASSWORDS))
def test_the_password_never_shows_whatever_its_characters(
    name: str, tmp_path: Path, trust: TrustStore, caplog: pytest.LogCaptureFixture
) -> None:
    written, secret = PASSWORDS[name]
    url = _url(1, written)  # nothing listens on port 1
    assert "***" in redact_url(url)
    _assert_hidden(redact_url(url), written, secret)
    with caplog.at_level(logging.DEBUG), pytest.raises(LineupError) as exc:
        Runtime.open(url, trust=trust, clock=VirtualClock(), apps_dir=tmp_path / "apps")
    err = exc.value
    # a URL libpq cannot read (or would read another password from) is a usage error;
    # one it reads fails to connect
    expected = "usage_invalid" if name in ("bad_escape", "at_raw", "slash_raw") else None
    assert err.code == (expected or "store_unavailable"), err
    shown = f"{err} {err.message} {err.hint} {err.details} {err!r}"
    _assert_hidden(shown, written, secret)
    _assert_hidden(caplog.text, written, secret)
    assert "postgresql://postgres:***@" in err.message


def test_a_url_with_an_unknown_option_is_usage_invalid_naming_it(trust: TrustStore) -> None:
    url = _url(1, "s3cr%zzet", "?no_such_option=1")
    with pytest.raises(LineupError) as exc:
        PostgresStore(url)
    assert exc.value.code == "usage_invalid"
    assert "s3cr" not in str(exc.value)
    url = "postgresql://postgres@127.0.0.1:1/db?no_such_option=1&password=s3cr3t-x"
    with pytest.raises(LineupError) as exc:
        PostgresStore(url)
    assert exc.value.code == "usage_invalid" and "no_such_option" in exc.value.message
    assert "s3cr3t-x" not in f"{exc.value} {exc.value.hint}"


def test_a_store_shows_its_url_redacted_and_logs_no_password(
    pg_server: PgServer, caplog: pytest.LogCaptureFixture
) -> None:
    """The test server trusts loopback, so any password opens it: every form, live."""
    base = fresh_database(pg_server)
    for name in ("percent", "at_encoded", "colon", "slash_encoded", "non_ascii"):
        written, secret = PASSWORDS[name]
        url = base.replace("postgres@", f"postgres:{written}@")
        with caplog.at_level(logging.DEBUG):
            store = PostgresStore(url, node_id=f"n-{name}", lease_s=0.5)
        try:
            _assert_hidden(store.path, written, secret)
            assert "***" in store.path
        finally:
            store.close()
        _assert_hidden(caplog.text, written, secret)


@pytest.fixture(scope="module")
def focus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("secrets") / "focus"
    init_project(root, template="pomodoro")
    return root


@pytest.mark.parametrize("name", ["bad_escape", "at_raw", "non_ascii"])
@pytest.mark.parametrize("flags", [["--json"], ["--verbose"], []])
def test_the_cli_never_prints_the_password(
    name: str, flags: list[str], focus: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    written, secret = PASSWORDS[name]
    url = _url(1, written)
    scenario = focus / "scenarios" / "restart_while_focusing.toml"
    args = ["run", str(focus), "--scenario", str(scenario), "--db", url, *flags]
    if "--verbose" in flags:  # the traceback as Python prints it, from a real process
        proc = subprocess.run(
            [sys.executable, "-c", "from lineup_build.cli import main; main()", *args],
            capture_output=True,
            text=True,
            timeout=120,
            env=dict(os.environ, PYTHONPATH=str(ROOT)),
        )
        code, out, err = proc.returncode, proc.stdout, proc.stderr
    else:
        code, out, err = run_cli(args, capsys)
    assert code != 0
    _assert_hidden(out + err, written, secret)
    if "--verbose" not in flags:  # --verbose shows the traceback: without the password
        assert "Traceback" not in out + err
    expected = "usage_invalid" if name != "non_ascii" else "store_unavailable"
    assert expected in out + err, out + err


def test_a_password_in_a_db_argument_is_warned_about_and_one_in_lineup_db_is_not(
    focus: Path,
    pg_server: PgServer,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url = fresh_database(pg_server).replace("postgres@", "postgres:s3cr3t-pw@")
    scenario = focus / "scenarios" / "restart_while_focusing.toml"
    code, out, err = run_cli(
        ["run", str(focus), "--scenario", str(scenario), "--db", url, "--json"], capsys
    )
    assert code == 0, out + err
    assert "warning" in err and "process list" in err and "LINEUP_DB" in err
    assert "PGPASSWORD" in err and ".pgpass" in err
    assert "s3cr3t-pw" not in out + err
    monkeypatch.setenv("LINEUP_DB", url)  # the same URL from the environment: no warning
    code, out, err = run_cli(["run", str(focus), "--scenario", str(scenario), "--json"], capsys)
    assert code == 0, out + err
    assert "process list" not in err and "s3cr3t-pw" not in out + err


@pytest.mark.parametrize(
    "name", ["abc\n", "pg_temp", "pg_catalog", "Abc", "1abc", "a" * 64, "a-b", ""]
)
def test_a_schema_name_is_checked_in_full_and_never_postgres_own(
    name: str, tmp_path: Path, trust: TrustStore
) -> None:
    with pytest.raises(LineupError) as exc:
        check_schema_name(name)
    assert exc.value.code == "usage_invalid"
    with pytest.raises(LineupError) as exc:  # before any connection: port 1 is never tried
        Runtime.open(
            "postgresql://postgres@127.0.0.1:1/db", trust=trust, db_schema=name, apps_dir=tmp_path
        )
    assert exc.value.code == "usage_invalid"


def test_a_usable_schema_name_passes() -> None:
    for name in ("abc", "_x", "lineup_run_3f2a", "a" * 63, "pgx", "p_g"):
        assert check_schema_name(name) == name


def test_a_message_is_scrubbed_of_every_spelling_of_the_password() -> None:
    from lineup_runtime_lite.store.postgres import scrub

    url = _url(1, "s3cr%40et%C3%A9")
    text = "libpq said: s3cr%40et%C3%A9 / s3cr@eté / s3cr%40et%C3%A9 again"
    assert "s3cr" not in scrub(text, url) and scrub(text, url).count("***") == 3


def test_lineup_serve_warns_about_a_password_in_its_db_argument(
    focus: Path, pg_server: PgServer
) -> None:
    """`lineup serve` on stdio with its input closed: it starts, warns, serves nothing and
    ends."""
    url = fresh_database(pg_server).replace("postgres@", "postgres:s3cr3t-pw@")
    argv = ["serve", str(focus), "--db", url]
    proc = subprocess.run(
        [sys.executable, "-c", "from lineup_build.cli import main; main()", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    said = proc.stdout + proc.stderr
    assert "process list" in proc.stderr and "LINEUP_DB" in proc.stderr, said
    assert "s3cr3t-pw" not in said
