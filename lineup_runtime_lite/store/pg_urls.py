"""PostgreSQL URLs as the runtime reads and shows them (SPEC 15, 16.2): which targets are
PostgreSQL, URLs libpq reads as written, passwords redacted and scrubbed from messages,
and the names of the private schemas `lineup run`/`test`/`dev` create.

Pure text: nothing here connects (psycopg is imported only to parse, or to say it is
missing). `store.postgres` re-exports these names.
"""

from __future__ import annotations

import contextlib
import re
import secrets
from urllib.parse import quote, unquote

from lineup_sdk import __version__
from lineup_sdk.errors import LineupError

__all__ = [
    "INSTALL_HINT",
    "check_schema_name",
    "check_url",
    "has_password",
    "is_postgres_url",
    "private_schema",
    "redact_url",
    "require_psycopg",
    "scrub",
    "url_password",
]

_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_SCHEMES = ("postgresql://", "postgres://")
INSTALL_HINT = (
    'install the PostgreSQL store: pip install ".[postgres]" in a LineUp checkout, or '
    f'pip install "lineup_sdk-{__version__}-py3-none-any.whl[postgres]" beside the wheel'
)


def private_schema(command: str) -> str:
    """A new schema name for one `lineup run`/`test`/`dev` (`lineup_run_3f2a…`)."""
    return f"lineup_{command}_{secrets.token_hex(6)}"


def require_psycopg() -> None:
    try:
        import psycopg  # noqa: F401
    except ImportError:
        raise LineupError(
            "usage_invalid",
            "a postgresql:// database needs psycopg, which is not installed",
            hint=INSTALL_HINT,
        ) from None


def is_postgres_url(target: object) -> bool:
    """Whether `target` names a PostgreSQL database (`postgresql://…` or `postgres://…`)."""
    return isinstance(target, str) and target.startswith(_SCHEMES)


def _userinfo(url: str) -> tuple[str, str | None, str]:
    """The user, the password (None when there is none) and what follows them, as the URL
    spells them: up to the last `@` before the query, so a password holding a raw `@`, `/`
    or `:` is taken whole (libpq would cut it short; `check_url` refuses that)."""
    rest = url.partition("://")[2]
    query = rest.find("?")
    at = (rest if query < 0 else rest[:query]).rfind("@")
    if at < 0:
        return "", None, rest
    user, colon, password = rest[:at].partition(":")
    return user, (password if colon else None), rest[at + 1 :]


def _query_passwords(url: str) -> list[str]:
    """The `password=` values of the URL's query, as written."""
    _, _, query = url.partition("?")
    return [
        value
        for key, _, value in (pair.partition("=") for pair in query.split("&"))
        if key == "password" and value
    ]


def url_password(url: str) -> str | None:
    """The password as libpq reads it (percent-escapes decoded), or None."""
    _, password, _ = _userinfo(url)
    if password:
        return unquote(password)
    for value in _query_passwords(url):
        return unquote(value)
    return None


def has_password(url: str) -> bool:
    """Whether the URL carries a password (in its authority or as `?password=`)."""
    return bool(url_password(url))


def _secrets(url: str) -> list[str]:
    """Every spelling of the URL's password a message could carry (as written, decoded,
    encoded again, and as libpq parsed it), longest first."""
    raw = [p for p in (_userinfo(url)[1], *_query_passwords(url)) if p]
    found: set[str] = set()
    for text in raw:
        found |= {text, unquote(text), quote(unquote(text), safe="")}
    with contextlib.suppress(Exception):
        from psycopg.conninfo import conninfo_to_dict

        parsed = conninfo_to_dict(url).get("password")
        if parsed:
            found.add(str(parsed))
    return sorted((s for s in found if s), key=len, reverse=True)


def scrub(text: str, url: str) -> str:
    """`text` with every spelling of `url`'s password replaced by `***`."""
    for secret in _secrets(url):
        text = text.replace(secret, "***")
    return text


def redact_url(url: str) -> str:
    """`url` with any password (in the authority or as `?password=`) shown as `***`,
    whatever its characters."""
    scheme, sep, _ = url.partition("://")
    user, password, after = _userinfo(url)
    shown = f"{scheme}{sep}{user}:***@{after}" if password is not None else url
    if "?" not in shown:
        return shown
    head, _, query = shown.partition("?")
    pairs = [
        "password=***" if pair.partition("=")[0] == "password" else pair
        for pair in query.split("&")
    ]
    return f"{head}?{'&'.join(pairs)}"


def check_url(url: str) -> None:
    """A URL libpq can read, whose password libpq reads as written (SPEC 16.2).

    Raises:
        LineupError: `usage_invalid` (the URL shown redacted, the password nowhere) for a
            bad percent-escape, an unknown option, or a password holding a raw `@` or `/`.
    """
    from psycopg.conninfo import conninfo_to_dict

    shown = redact_url(url)
    encode = "percent-encode it: % as %25, @ as %40, / as %2F, : as %3A"
    try:
        parsed = conninfo_to_dict(url)
    except Exception as exc:  # libpq's parse error quotes what it could not read
        text = str(exc).strip()
        if "percent-encoded" in text:
            why = "it holds a % that is not followed by two hex digits"
            hint = f"a literal % in the URL (in a password, say) must be written %25; {encode}"
        elif "query parameter" in text:
            name = text.partition('"')[2].rpartition('"')[0]
            why = f"libpq knows no option {scrub(name, url)!r}"
            hint = "see libpq's connection parameters for the options a URL may carry"
        else:
            why = f"libpq cannot read it ({scrub(text, url)})"
            hint = encode
        raise LineupError(
            "usage_invalid", f"the PostgreSQL URL {shown} is not usable: {why}", hint=hint
        ) from None
    _, password, _ = _userinfo(url)
    if password is not None and parsed.get("password") != unquote(password):
        raise LineupError(
            "usage_invalid",
            f"the PostgreSQL URL {shown} is not usable: its password holds a character a "
            "URL must percent-encode",
            hint=f"{encode}; or leave the password out and use PGPASSWORD or ~/.pgpass",
        )


def check_schema_name(schema: str) -> str:
    """A schema name the runtime may create and drop (SPEC 16.3, "Names"): lower-case
    letters, digits and `_`, at most 63, not starting with a digit, matched in full, and
    not PostgreSQL's own (`pg_*`).

    Raises:
        LineupError: `usage_invalid`.
    """
    if (
        not isinstance(schema, str)
        or _SCHEMA_NAME.fullmatch(schema) is None
        or schema.startswith("pg_")
    ):
        raise LineupError(
            "usage_invalid",
            f"{schema!r} is not a usable schema name",
            hint="lower-case letters, digits and _ (at most 63, not starting with a digit, "
            "not pg_...)",
        )
    return schema
