"""The store's schema and its versioned migrations (the only DDL in the runtime)."""

from __future__ import annotations

__all__ = [
    "MIGRATIONS",
    "PG_BUNDLES",
    "PG_FIRST_VERSION",
    "PG_MIGRATIONS",
    "SCHEMA",
    "SCHEMA_VERSION",
    "pg_schema",
]

#: The schema a new database gets (`SCHEMA`) and an older one is migrated to on open.
SCHEMA_VERSION = 6

#: The whole current schema, for a new database. A change here needs a step in
#: `MIGRATIONS` (and `SCHEMA_VERSION` bumped to it): `tests/runtime/store/test_store_migrations.py`
#: checks that a database migrated from the oldest version has exactly this schema.
SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE app_versions (
  scope TEXT NOT NULL, version TEXT NOT NULL, manifest BLOB NOT NULL,
  manifest_sha256 TEXT NOT NULL, key_id TEXT NOT NULL, dir TEXT NOT NULL,
  installed_ms INTEGER NOT NULL, PRIMARY KEY (scope, version));
CREATE TABLE apps (scope TEXT PRIMARY KEY, version TEXT NOT NULL);
CREATE TABLE app_sessions (
  app_session_id TEXT PRIMARY KEY, conversation_id TEXT NOT NULL, scope TEXT NOT NULL,
  version TEXT NOT NULL, created_ms INTEGER NOT NULL, next_seq INTEGER NOT NULL DEFAULT 1,
  UNIQUE (conversation_id, scope));
CREATE TABLE activations (
  activation_id TEXT PRIMARY KEY, app_session_id TEXT NOT NULL, trigger_call_id TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('starting','ready','failed','cancelled')),
  requires_foreground INTEGER NOT NULL, worker_ready INTEGER NOT NULL DEFAULT 0,
  foreground INTEGER NOT NULL DEFAULT 0, reason TEXT, deadline_ms INTEGER NOT NULL,
  created_ms INTEGER NOT NULL, ended_ms INTEGER);
CREATE INDEX activations_session ON activations (app_session_id, created_ms);
CREATE TABLE calls (
  call_id TEXT PRIMARY KEY, fingerprint TEXT NOT NULL, conversation_id TEXT NOT NULL,
  scope TEXT NOT NULL, method TEXT NOT NULL, params TEXT NOT NULL,
  app_session_id TEXT, activation_id TEXT, seq INTEGER,
  state TEXT NOT NULL CHECK (state IN ('queued','delivered','running','done')),
  created_ms INTEGER NOT NULL, UNIQUE (app_session_id, seq));
CREATE INDEX calls_queue ON calls (app_session_id, state, seq);
CREATE TABLE receipts (
  call_id TEXT NOT NULL, stage TEXT NOT NULL, n INTEGER NOT NULL, body TEXT NOT NULL,
  PRIMARY KEY (call_id, stage));
CREATE TABLE outbox (
  id INTEGER PRIMARY KEY AUTOINCREMENT, msg_id TEXT NOT NULL UNIQUE, call_id TEXT NOT NULL,
  body TEXT NOT NULL, acked INTEGER NOT NULL DEFAULT 0);
CREATE INDEX outbox_pending ON outbox (acked, id);
CREATE TABLE session_data (
  scope TEXT NOT NULL, app_session_id TEXT NOT NULL, revision INTEGER NOT NULL CHECK (revision >= 1),
  data TEXT NOT NULL, PRIMARY KEY (scope, app_session_id));
CREATE TABLE operations (
  operation_id TEXT PRIMARY KEY, call_id TEXT NOT NULL UNIQUE, conversation_id TEXT NOT NULL,
  app_session_id TEXT NOT NULL, kind TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('focusing','completed','interrupted')),
  started_ms INTEGER NOT NULL, ends_ms INTEGER NOT NULL, ended_ms INTEGER, params TEXT NOT NULL);
CREATE TABLE im_records (
  operation_id TEXT PRIMARY KEY, conversation_id TEXT NOT NULL, body TEXT NOT NULL,
  created_ms INTEGER NOT NULL);
CREATE TABLE host_intents (
  id INTEGER PRIMARY KEY AUTOINCREMENT, dedup_key TEXT NOT NULL UNIQUE, body TEXT NOT NULL,
  delivered INTEGER NOT NULL DEFAULT 0, instance TEXT NOT NULL DEFAULT '',
  superseded INTEGER NOT NULL DEFAULT 0);
CREATE TABLE host_events (dedup_key TEXT PRIMARY KEY, body TEXT NOT NULL);
CREATE INDEX host_intents_pending ON host_intents (delivered, superseded, instance, id);
CREATE INDEX calls_queued ON calls (state, activation_id, seq) WHERE state = 'queued';
CREATE INDEX calls_delivered ON calls (state, app_session_id, seq) WHERE state = 'delivered';
CREATE INDEX calls_active ON calls (conversation_id, method) WHERE state IN ('queued', 'running');
CREATE INDEX activations_starting ON activations (state, deadline_ms) WHERE state = 'starting';
CREATE INDEX operations_focusing ON operations (state, ends_ms) WHERE state = 'focusing';
CREATE INDEX operations_session ON operations (app_session_id, started_ms);
CREATE INDEX im_records_conversation ON im_records (conversation_id, created_ms);
CREATE TABLE ui_actions (
  app_session_id TEXT NOT NULL, seq INTEGER NOT NULL, client_id TEXT NOT NULL,
  client_seq INTEGER NOT NULL, name TEXT NOT NULL, params TEXT NOT NULL,
  fingerprint TEXT NOT NULL, activation_id TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('queued','delivered','done')),
  outcome TEXT, revision INTEGER, created_ms INTEGER NOT NULL, ended_ms INTEGER,
  PRIMARY KEY (app_session_id, seq), UNIQUE (app_session_id, client_id, client_seq));
CREATE TABLE ui_action_clients (
  app_session_id TEXT NOT NULL, client_id TEXT NOT NULL, last_seq INTEGER NOT NULL,
  PRIMARY KEY (app_session_id, client_id));
CREATE INDEX ui_actions_queue ON ui_actions (app_session_id, state, seq);
CREATE INDEX ui_actions_queued ON ui_actions (state, activation_id, seq) WHERE state = 'queued';
CREATE INDEX ui_actions_delivered ON ui_actions (state, app_session_id, seq) WHERE state = 'delivered';
CREATE TABLE call_marks (
  mark TEXT NOT NULL, call_id TEXT NOT NULL, conversation_id TEXT NOT NULL,
  created_ms INTEGER NOT NULL, PRIMARY KEY (mark, call_id));
CREATE INDEX call_marks_conversation ON call_marks (mark, conversation_id, created_ms, call_id);
"""

#: Schema 4's indexes (SQL both engines run: PostgreSQL's migration is the same); a
#: database that has one already (made by a test from today's schema) keeps it.
_V4_INDEXES = (
    "CREATE INDEX IF NOT EXISTS calls_queued ON calls (state, activation_id, seq) WHERE state = 'queued'",
    "CREATE INDEX IF NOT EXISTS calls_delivered ON calls (state, app_session_id, seq) WHERE state = 'delivered'",
    "CREATE INDEX IF NOT EXISTS calls_active ON calls (conversation_id, method) "
    "WHERE state IN ('queued', 'running')",
    "CREATE INDEX IF NOT EXISTS activations_starting ON activations (state, deadline_ms) WHERE state = 'starting'",
    "CREATE INDEX IF NOT EXISTS operations_focusing ON operations (state, ends_ms) WHERE state = 'focusing'",
    "CREATE INDEX IF NOT EXISTS operations_session ON operations (app_session_id, started_ms)",
    "CREATE INDEX IF NOT EXISTS im_records_conversation ON im_records (conversation_id, created_ms)",
)

#: Schema 5: UI Actions (SPEC 17), the same SQL on both engines (a table's `rowid` on
#: PostgreSQL is added by the PostgreSQL twin).
_V5_TABLES = (
    "CREATE TABLE ui_actions ("
    "app_session_id TEXT NOT NULL, seq INTEGER NOT NULL, client_id TEXT NOT NULL, "
    "client_seq INTEGER NOT NULL, name TEXT NOT NULL, params TEXT NOT NULL, "
    "fingerprint TEXT NOT NULL, activation_id TEXT NOT NULL, "
    "state TEXT NOT NULL CHECK (state IN ('queued','delivered','done')), "
    "outcome TEXT, revision INTEGER, created_ms INTEGER NOT NULL, ended_ms INTEGER, "
    "PRIMARY KEY (app_session_id, seq), UNIQUE (app_session_id, client_id, client_seq))",
    "CREATE TABLE ui_action_clients ("
    "app_session_id TEXT NOT NULL, client_id TEXT NOT NULL, last_seq INTEGER NOT NULL, "
    "PRIMARY KEY (app_session_id, client_id))",
)
_V5_INDEXES = (
    "CREATE INDEX ui_actions_queue ON ui_actions (app_session_id, state, seq)",
    "CREATE INDEX ui_actions_queued ON ui_actions (state, activation_id, seq) "
    "WHERE state = 'queued'",
    "CREATE INDEX ui_actions_delivered ON ui_actions (state, app_session_id, seq) "
    "WHERE state = 'delivered'",
)

#: Schema 6: an embedder's marks of calls (`Runtime.mark_call`; `lineup serve`'s MCP tasks)
#: in a table of their own, found by mark and conversation oldest first through its index
#: (they were meta rows, read whole by every `tasks/list`). A mark lives as long as the call
#: it marks: the runtime keeps every accepted call (a call_id replays its answer forever,
#: SPEC 5.2 and 15), so there is at most one row per call and mark.
_V6_TABLE = (
    "CREATE TABLE call_marks ("
    "mark TEXT NOT NULL, call_id TEXT NOT NULL, conversation_id TEXT NOT NULL, "
    "created_ms INTEGER NOT NULL, PRIMARY KEY (mark, call_id))"
)
_V6_INDEX = (
    "CREATE INDEX call_marks_conversation ON call_marks "
    "(mark, conversation_id, created_ms, call_id)"
)
#: The meta rows `call_mark:<mark>:<call_id>` move into it (a mark has no `:`; a mark of a
#: call the database does not hold has nothing to list and is dropped).
_V6_MOVE_SQLITE = (
    "INSERT OR IGNORE INTO call_marks (mark, call_id, conversation_id, created_ms) "
    "SELECT substr(m.key, 11, instr(substr(m.key, 11), ':') - 1), c.call_id, "
    "c.conversation_id, c.created_ms FROM meta m JOIN calls c "
    "ON c.call_id = substr(m.key, 12 + length(substr(m.key, 11, instr(substr(m.key, 11), ':') - 1))) "
    "WHERE substr(m.key, 1, 10) = 'call_mark:'"
)
_V6_MOVE_PG = (
    "INSERT INTO call_marks (mark, call_id, conversation_id, created_ms) "
    "SELECT split_part(m.key, ':', 2), c.call_id, c.conversation_id, c.created_ms "
    "FROM meta m JOIN calls c "
    "ON c.call_id = substr(m.key, 12 + length(split_part(m.key, ':', 2))) "
    "WHERE substr(m.key, 1, 10) = 'call_mark:' ON CONFLICT DO NOTHING"
)
_V6_DROP = "DELETE FROM meta WHERE substr(key, 1, 10) = 'call_mark:'"


def _if_not_exists(stmt: str) -> str:
    """`CREATE TABLE|INDEX name` as `CREATE TABLE|INDEX IF NOT EXISTS name` (SQLite records
    the statement without the clause, so the migrated schema reads as `SCHEMA`)."""
    for kind in ("CREATE TABLE ", "CREATE INDEX "):
        if stmt.startswith(kind):
            return kind + "IF NOT EXISTS " + stmt[len(kind) :]
    return stmt


#: The versioned steps, in one place: `MIGRATIONS[n]` moves a database from schema n-1 to
#: n. Each step runs in one transaction with its version bump, so a failed or interrupted
#: migration leaves the database at the version before it. Never edit a released step; add
#: the next one.
MIGRATIONS: dict[int, tuple[str, ...]] = {
    # 2: Host intents are ordered per instance (SPEC 5.7): each names its instance (the
    # activation), and one whose activation ended is marked superseded, never delivered.
    # Intents of activations that ended before this version are superseded by the relay.
    2: (
        "ALTER TABLE host_intents ADD COLUMN instance TEXT NOT NULL DEFAULT ''",
        "ALTER TABLE host_intents ADD COLUMN superseded INTEGER NOT NULL DEFAULT 0",
        "UPDATE host_intents SET instance = json_extract(body, '$.instance')",
        "CREATE INDEX host_intents_pending ON host_intents (delivered, superseded, instance, id)",
    ),
    # 3: installed folders are stored relative to the apps folder (SPEC 13.1), so that a
    # database and its apps folder can move together and a relative path given at open
    # is never resolved again. Every version was unpacked to `<apps>/<scope>/<version>`.
    3: ("UPDATE app_versions SET dir = scope || '/' || version",),
    # 4: work proportional to what is pending, not to history (issue 36): what a timer
    # tick, a pump, recovery and open look for is found through partial indexes holding
    # only the unfinished rows (queued and delivered calls, starting activations, focusing
    # operations), and a conversation's operations and IM records through their own.
    4: _V4_INDEXES,
    # 5: UI Actions and one ordered queue per App session (SPEC 17): the actions in their
    # own table (their `seq` from the App session's `next_seq`, shared with its calls), the
    # per-client high-water marks in theirs, and partial indexes of the unfinished actions.
    # A database that has them already (made by a test or a benchmark from today's schema,
    # then set back to an older version) keeps them, as with schema 4's indexes.
    5: tuple(_if_not_exists(stmt) for stmt in (*_V5_TABLES, *_V5_INDEXES)),
    # 6: call marks in their own table, found by mark and conversation (issue 36: every
    # `tasks/list` read every mark ever written), moved there from `meta`.
    # As with schema 5, a database that has the table already keeps it.
    6: (_if_not_exists(_V6_TABLE), _if_not_exists(_V6_INDEX), _V6_MOVE_SQLITE, _V6_DROP),
}
assert sorted(MIGRATIONS) == list(range(2, SCHEMA_VERSION + 1)), "one step per version"


def _pg_statements(sql: str) -> list[str]:
    out = []
    for stmt in sql.strip().split(";"):
        stmt = " ".join(stmt.split())
        if not stmt:
            continue
        stmt = stmt.replace(
            "INTEGER PRIMARY KEY AUTOINCREMENT",
            "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY",
        )
        stmt = stmt.replace("INTEGER", "BIGINT").replace("BLOB", "BYTEA")
        if stmt.startswith("CREATE TABLE"):
            assert stmt.endswith(")"), stmt
            stmt = stmt[:-1] + ", rowid BIGINT GENERATED ALWAYS AS IDENTITY)"
        out.append(stmt)
    return out


def _pg_table(stmt: str) -> str:
    """A `CREATE TABLE` in PostgreSQL's SQL (`pg_schema`'s rules)."""
    (out,) = _pg_statements(stmt)
    return out


#: The first schema a PostgreSQL database was created at (the store came with schema 3).
PG_FIRST_VERSION = 3
#: The PostgreSQL twin of each step after `PG_FIRST_VERSION`, in PostgreSQL's SQL: run in
#: one transaction with its version bump, under the migration lock.
PG_MIGRATIONS: dict[int, tuple[str, ...]] = {
    4: _V4_INDEXES,
    5: (*(_pg_table(stmt) for stmt in _V5_TABLES), *_V5_INDEXES),
    6: (
        _if_not_exists(_pg_table(_V6_TABLE)),
        _if_not_exists(_V6_INDEX),
        _V6_MOVE_PG,
        _V6_DROP,
    ),
}
assert sorted(PG_MIGRATIONS) == list(range(PG_FIRST_VERSION + 1, SCHEMA_VERSION + 1)), (
    "a PostgreSQL twin for every step"
)


#: PostgreSQL only (SPEC 15): the verified bundle of every installed version, so a node
#: with an empty cache unpacks it from the database. SQLite keeps the unpacked folder beside
#: its file instead; dumps list the digests only.
PG_BUNDLES = (
    "CREATE TABLE bundles (manifest_sha256 TEXT PRIMARY KEY, bytes BYTEA NOT NULL, "
    "rowid BIGINT GENERATED ALWAYS AS IDENTITY)"
)


def pg_schema() -> list[str]:
    """The current schema in PostgreSQL's SQL, derived from `SCHEMA` (one definition of
    the tables): `INTEGER` is `BIGINT` (times are milliseconds), `BLOB` is `BYTEA`, an
    `AUTOINCREMENT` key an identity, and every table gets a last column `rowid`, an
    identity standing in for SQLite's own (the facts order by it; dumps leave it out).

    PostgreSQL databases start at `SCHEMA_VERSION`; a later step of `MIGRATIONS` needs its
    PostgreSQL twin beside it.
    """
    return [*_pg_statements(SCHEMA), PG_BUNDLES]
