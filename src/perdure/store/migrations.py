"""The one numbered migration ledger, shared by every SQL backend.

Each :class:`Migration` carries its SQLite and its PostgreSQL SQL side by side, so the two
schemas cannot drift apart unnoticed. A database records what it has applied in the
ledger table ``perdure_migrations(version, name, applied_at)``; opening a store applies the
pending steps (those whose version is not in the ledger) in order, in one transaction.

Rules for adding a step: append it with the next version number, never edit or reorder a
step that has shipped, and write both dialects. Schema objects are created with plain
``CREATE`` (not ``IF NOT EXISTS``) so that a ledger out of step with the schema fails
loudly instead of being papered over.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = [
    "LEDGER_POSTGRES",
    "LEDGER_SQLITE",
    "MIGRATIONS",
    "Migration",
    "SchemaTooNew",
    "apply_sqlite_migrations",
    "check_ledger",
    "pending_migrations",
    "split_sqlite_statements",
]


@dataclass(frozen=True, slots=True)
class Migration:
    """One schema step: its version, a short name, and the SQL of each dialect."""

    version: int
    name: str
    sqlite: str
    postgres: str


class SchemaTooNew(RuntimeError):
    """The database was migrated by a newer perdure than the one opening it."""


LEDGER_SQLITE = """
CREATE TABLE IF NOT EXISTS perdure_migrations (
    version    INTEGER PRIMARY KEY,
    name       TEXT    NOT NULL,
    applied_at INTEGER NOT NULL
)
"""

LEDGER_POSTGRES = """
CREATE TABLE IF NOT EXISTS perdure_migrations (
    version    INTEGER PRIMARY KEY,
    name       TEXT    NOT NULL,
    applied_at BIGINT  NOT NULL
)
"""

# Design notes for migration 1:
# - `actors` keeps its rowid: `state` and `input` can be large, and SQLite advises WITHOUT
#   ROWID only for small rows. Queue and history rows are read as a range per actor, so
#   clustering them on (actor_id, …) with WITHOUT ROWID makes `load_queue`/`load_history`
#   one contiguous b-tree scan and saves a second index per insert.
# - The wake index is partial (only actors with an alarm) and covers (wake_at, actor_id), so
#   `due_actors` reads it in order and never touches the table or sleeping actors.
# - There are no foreign keys: `delete_actor` removes dependent rows explicitly, and a
#   commit checks its actor exists before writing anything, so FK checks would only add
#   a lookup to every insert.
# - Postgres `actor_id` columns are COLLATE "C": `list_actors` pages in byte order, as
#   SQLite does, whatever the database's locale (and comparisons skip the locale).
_V1_SQLITE = """
CREATE TABLE actors (
    actor_id      TEXT    PRIMARY KEY,
    name          TEXT    NOT NULL,
    key           TEXT    NOT NULL,
    created_at    INTEGER NOT NULL,
    generation    INTEGER NOT NULL DEFAULT 0,
    initialized   INTEGER NOT NULL DEFAULT 0,
    input         BLOB,
    state         BLOB,
    wake_at       INTEGER,
    queue_next_id INTEGER NOT NULL DEFAULT 1,
    -- Ownership lease (DESIGN §5): the node running the actor, a fencing counter bumped
    -- at each change of owner, and until when (epoch ms) the claim holds.
    owner_node       TEXT,
    lease_generation INTEGER NOT NULL DEFAULT 0,
    lease_expires_at INTEGER,
    UNIQUE (name, key)
);
CREATE INDEX actors_wake_at ON actors (wake_at, actor_id) WHERE wake_at IS NOT NULL;
CREATE TABLE queue_messages (
    actor_id   TEXT    NOT NULL,
    id         INTEGER NOT NULL,
    name       TEXT    NOT NULL,
    body       BLOB    NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (actor_id, id)
) WITHOUT ROWID;
CREATE TABLE workflow_history (
    actor_id TEXT NOT NULL,
    location TEXT NOT NULL,
    entry    BLOB NOT NULL,
    PRIMARY KEY (actor_id, location)
) WITHOUT ROWID;
"""

_V1_POSTGRES = """
CREATE TABLE actors (
    actor_id      TEXT    COLLATE "C" PRIMARY KEY,
    name          TEXT    NOT NULL,
    key           TEXT    NOT NULL,
    created_at    BIGINT  NOT NULL,
    generation    BIGINT  NOT NULL DEFAULT 0,
    initialized   BOOLEAN NOT NULL DEFAULT FALSE,
    input         BYTEA,
    state         BYTEA,
    wake_at       BIGINT,
    queue_next_id BIGINT  NOT NULL DEFAULT 1,
    -- Ownership lease (DESIGN §5), claimed with FOR UPDATE SKIP LOCKED.
    owner_node       TEXT,
    lease_generation BIGINT NOT NULL DEFAULT 0,
    lease_expires_at BIGINT,
    UNIQUE (name, key)
);
CREATE INDEX actors_wake_at ON actors (wake_at, actor_id) WHERE wake_at IS NOT NULL;
CREATE TABLE queue_messages (
    actor_id   TEXT   COLLATE "C" NOT NULL,
    id         BIGINT NOT NULL,
    name       TEXT   NOT NULL,
    body       BYTEA  NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (actor_id, id)
);
CREATE TABLE workflow_history (
    actor_id TEXT  COLLATE "C" NOT NULL,
    location TEXT  NOT NULL,
    entry    BYTEA NOT NULL,
    PRIMARY KEY (actor_id, location)
);
"""

# Design notes for migration 2 (schedules):
# - Both tables are read only per actor (all jobs at wake, one job's newest fires for
#   `history`), so they are clustered on (actor_id, …) like the queue; there is no index on
#   `run_at`: the actor's earliest `run_at` is its `wake_at`, which is already indexed.
# - Fires are keyed by a per-job sequence number, so pruning a job's history to its newest
#   `max_history` fires is one range delete on the primary key.
_V2_SQLITE = """
CREATE TABLE schedules (
    actor_id    TEXT    NOT NULL,
    id          TEXT    NOT NULL,
    kind        TEXT    NOT NULL,
    name        TEXT,
    action      TEXT    NOT NULL,
    args        BLOB    NOT NULL,
    run_at      INTEGER NOT NULL,
    created_at  INTEGER NOT NULL,
    expression  TEXT,
    timezone    TEXT,
    interval_ms INTEGER,
    max_history INTEGER NOT NULL DEFAULT 0,
    last_run_at INTEGER,
    fire_seq    INTEGER NOT NULL DEFAULT 0,
    running_seq INTEGER,
    PRIMARY KEY (actor_id, id)
) WITHOUT ROWID;
CREATE TABLE schedule_fires (
    actor_id     TEXT    NOT NULL,
    name         TEXT    NOT NULL,
    seq          INTEGER NOT NULL,
    action       TEXT    NOT NULL,
    scheduled_at INTEGER NOT NULL,
    fired_at     INTEGER NOT NULL,
    result       TEXT    NOT NULL,
    finished_at  INTEGER,
    error        BLOB,
    PRIMARY KEY (actor_id, name, seq)
) WITHOUT ROWID;
"""

_V2_POSTGRES = """
CREATE TABLE schedules (
    actor_id    TEXT   NOT NULL,
    id          TEXT   NOT NULL,
    kind        TEXT   NOT NULL,
    name        TEXT,
    action      TEXT   NOT NULL,
    args        BYTEA  NOT NULL,
    run_at      BIGINT NOT NULL,
    created_at  BIGINT NOT NULL,
    expression  TEXT,
    timezone    TEXT,
    interval_ms BIGINT,
    max_history INTEGER NOT NULL DEFAULT 0,
    last_run_at BIGINT,
    fire_seq    BIGINT NOT NULL DEFAULT 0,
    running_seq BIGINT,
    PRIMARY KEY (actor_id, id)
);
CREATE TABLE schedule_fires (
    actor_id     TEXT   NOT NULL,
    name         TEXT   NOT NULL,
    seq          BIGINT NOT NULL,
    action       TEXT   NOT NULL,
    scheduled_at BIGINT NOT NULL,
    fired_at     BIGINT NOT NULL,
    result       TEXT   NOT NULL,
    finished_at  BIGINT,
    error        BYTEA,
    PRIMARY KEY (actor_id, name, seq)
);
"""

# Design notes for migration 3 (one fencing counter):
# - An actor has one fencing counter, `generation`: acquiring a lease counts one more, as
#   waking a stored actor always has (DESIGN §8), so `lease_generation`, a second counter
#   that nothing ever checked, goes. The lease is `owner_node` and `lease_expires_at`.
# - SQLite has DROP COLUMN since 3.35 (2021); it rewrites the table once.
_V3_SQLITE = "ALTER TABLE actors DROP COLUMN lease_generation;"
_V3_POSTGRES = "ALTER TABLE actors DROP COLUMN lease_generation;"

# Design notes for migration 4 (cluster membership):
# - `nodes` holds one row per server process of a cluster (a few to a few hundred), all
#   read at each heartbeat, so it has no index but its key. Times are epoch ms on the
#   store's clock, like the leases; `draining` is 0/1 on SQLite, as `initialized` is.
# - `list_nodes` counts each node's live leases: the partial index on `owner_node` holds
#   only actors that have an owner (none on a one-node server, which records none), so
#   it costs nothing to actors at rest. It leaves out `lease_expires_at` on purpose:
#   renewing a lease would then change an indexed column, and PostgreSQL could no longer
#   update the row in place (HOT) at every renewal.
# - `node_id` has the database's collation (as `owner_node` has, so that the count can use
#   the index); `list_nodes` orders by byte order explicitly.
_V4_SQLITE = """
CREATE TABLE nodes (
    node_id      TEXT    PRIMARY KEY,
    address      TEXT    NOT NULL,
    started_at   INTEGER NOT NULL,
    heartbeat_at INTEGER NOT NULL,
    expires_at   INTEGER NOT NULL,
    draining     INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX actors_owner_node ON actors (owner_node) WHERE owner_node IS NOT NULL;
"""
_V4_POSTGRES = """
CREATE TABLE nodes (
    node_id      TEXT    PRIMARY KEY,
    address      TEXT    NOT NULL,
    started_at   BIGINT  NOT NULL,
    heartbeat_at BIGINT  NOT NULL,
    expires_at   BIGINT  NOT NULL,
    draining     BOOLEAN NOT NULL DEFAULT FALSE
);
CREATE INDEX actors_owner_node ON actors (owner_node) WHERE owner_node IS NOT NULL;
"""

# Design notes for migration 5 (trace context of queue messages):
# - A message keeps the W3C `traceparent` of the span that sent it (55 characters, NULL
#   when the sender was not traced), so that its consumer is traced as part of the
#   sender's trace even across a restart. A nullable column without a default: adding it
#   rewrites no row on either database.
_V5_SQLITE = "ALTER TABLE queue_messages ADD COLUMN trace TEXT;"
_V5_POSTGRES = "ALTER TABLE queue_messages ADD COLUMN trace TEXT;"

# Design notes for migration 6 (the per-actor event log, issue 15):
# - Every event an actor emits is numbered per actor (`actors.event_seq` is the last
#   number given, so numbering continues after the log has been pruned empty) and written
#   in the same commit as the change that emitted it. Clients resume from a number.
# - The log is bounded (by count and age) and read as a range per actor from a sequence
#   number, so it is clustered on (actor_id, seq) like the queue; pruning is one range
#   delete on the primary key. `emitted_at` is epoch ms, for the age bound.
# - `event_seq` is NOT NULL with a constant default: adding it rewrites no row on either
#   database.
_V6_SQLITE = """
CREATE TABLE actor_events (
    actor_id   TEXT    NOT NULL,
    seq        INTEGER NOT NULL,
    name       TEXT    NOT NULL,
    args       BLOB    NOT NULL,
    emitted_at INTEGER NOT NULL,
    PRIMARY KEY (actor_id, seq)
) WITHOUT ROWID;
ALTER TABLE actors ADD COLUMN event_seq INTEGER NOT NULL DEFAULT 0;
"""
_V6_POSTGRES = """
CREATE TABLE actor_events (
    actor_id   TEXT   COLLATE "C" NOT NULL,
    seq        BIGINT NOT NULL,
    name       TEXT   NOT NULL,
    args       BYTEA  NOT NULL,
    emitted_at BIGINT NOT NULL,
    PRIMARY KEY (actor_id, seq)
);
ALTER TABLE actors ADD COLUMN event_seq BIGINT NOT NULL DEFAULT 0;
"""

# Design notes for migration 7 (message leases and dead letters, issue 15):
# - A completable message received outside a workflow is leased: hidden until
#   `visible_at` (epoch ms), redelivered after it unless completed. `attempts` counts the
#   deliveries and is written before the message reaches user code, so a message that
#   kills its consumer each time still counts up to the dead-letter limit. A dead letter
#   keeps its row, with `dead_at` set; `error` is the reason (or a consumer's last error).
# - All four are columns of `queue_messages`, not a table of their own: an actor loads its
#   whole queue at wake-up anyway (one range read on the primary key), and a lease change
#   is a put of the row, through the same statement as any other queue write.
# - No index: dead letters and visibility are read per actor with its queue, never across
#   actors. `attempts` is NOT NULL with a constant default and the others are nullable
#   without one, so adding them rewrites no row on either database.
_V7_SQLITE = """
ALTER TABLE queue_messages ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE queue_messages ADD COLUMN visible_at INTEGER;
ALTER TABLE queue_messages ADD COLUMN dead_at INTEGER;
ALTER TABLE queue_messages ADD COLUMN error TEXT;
"""
_V7_POSTGRES = """
ALTER TABLE queue_messages
    ADD COLUMN attempts   INTEGER NOT NULL DEFAULT 0,
    ADD COLUMN visible_at BIGINT,
    ADD COLUMN dead_at    BIGINT,
    ADD COLUMN error      TEXT;
"""

# Design notes for migration 8 (the cluster's secret, issue 29):
# - The nodes of a cluster authenticate each other with one secret (the forward route, a
#   piped socket, a relayed raw request). The store keeps it so that nodes agree on one
#   with no configuration, and so that a node given another one refuses to join. One row
#   (`id` = 1): the first node to start inserts it (`ON CONFLICT DO NOTHING`), every
#   node then reads it. `secret` is the secret the nodes agreed on (none was configured);
#   `digest` a salted digest of a configured one (`--cluster-secret`), which never sits in
#   the database itself. Exactly one of them is set.
# - Readable only by the role that owns the tables (the nodes'): PUBLIC is refused.
#   SQLite has no roles; its file is the server's own.
_V8_SQLITE = """
CREATE TABLE cluster_secret (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    secret     TEXT,
    digest     TEXT,
    created_at INTEGER NOT NULL,
    CHECK ((secret IS NULL) <> (digest IS NULL))
);
"""
_V8_POSTGRES = """
CREATE TABLE cluster_secret (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    secret     TEXT,
    digest     TEXT,
    created_at BIGINT  NOT NULL,
    CHECK ((secret IS NULL) <> (digest IS NULL))
);
REVOKE ALL ON cluster_secret FROM PUBLIC;
"""

# Design notes for migration 9 (idempotency keys, issue 30, docs/idempotency.md):
# - One row per (actor, key): the request's fingerprint, when it was applied and its
#   first answer. It is written by the same commit as the request's effects, so a crash
#   never keeps one without the other. Read by primary key, once per keyed request that
#   this instance is not already running.
# - Pruned by age per actor (`created_at` before the retention bound), now and then as
#   keyed commits go by: the index on (actor_id, created_at) makes that one range of the
#   expired rows only. `delete_actor` removes an actor's rows.
_V9_SQLITE = """
CREATE TABLE idempotency_keys (
    actor_id    TEXT    NOT NULL,
    key         TEXT    NOT NULL,
    fingerprint TEXT    NOT NULL,
    created_at  INTEGER NOT NULL,
    answer      BLOB    NOT NULL,
    PRIMARY KEY (actor_id, key)
) WITHOUT ROWID;
CREATE INDEX idempotency_keys_age ON idempotency_keys (actor_id, created_at);
"""
_V9_POSTGRES = """
CREATE TABLE idempotency_keys (
    actor_id    TEXT   COLLATE "C" NOT NULL,
    key         TEXT   COLLATE "C" NOT NULL,
    fingerprint TEXT   NOT NULL,
    created_at  BIGINT NOT NULL,
    answer      BYTEA  NOT NULL,
    PRIMARY KEY (actor_id, key)
);
CREATE INDEX idempotency_keys_age ON idempotency_keys (actor_id, created_at);
"""

# Design notes for migration 10 (an actor's KV space, issue 31, docs/storage.md):
# - One row per (actor, key). Keys are bytes with a one-byte type tag in front (b"b" for
#   a bytes key, b"s" for a UTF-8 string key: see perdure.store.kv), compared bytewise:
#   SQLite compares BLOBs with memcmp and PostgreSQL compares BYTEA bytewise, so a
#   prefix or a range is one index range of the primary key on both, in the same order.
# - Values are encoded like state (CBOR). Written by the actor's commits (fenced like
#   the rest of the commit); `delete_actor` removes an actor's rows.
_V10_SQLITE = """
CREATE TABLE actor_kv (
    actor_id TEXT NOT NULL,
    key      BLOB NOT NULL,
    value    BLOB NOT NULL,
    PRIMARY KEY (actor_id, key)
) WITHOUT ROWID;
"""
_V10_POSTGRES = """
CREATE TABLE actor_kv (
    actor_id TEXT  COLLATE "C" NOT NULL,
    key      BYTEA NOT NULL,
    value    BYTEA NOT NULL,
    PRIMARY KEY (actor_id, key)
);
"""

# Design notes for migration 11 (a node's code version, issue 33):
# - Each node announces the version of the code it runs (`perdure serve --code-version`,
#   by default a digest of its registry's definitions) so that placement can keep a
#   workflow run on the code it started with. NULL: a node of an earlier release, which
#   announces none (and is treated as running an unknown version).
_V11_SQLITE = """
ALTER TABLE nodes ADD COLUMN code_version TEXT;
"""
_V11_POSTGRES = """
ALTER TABLE nodes ADD COLUMN code_version TEXT;
"""

MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "actors_queue_history", sqlite=_V1_SQLITE, postgres=_V1_POSTGRES),
    Migration(2, "schedules", sqlite=_V2_SQLITE, postgres=_V2_POSTGRES),
    Migration(3, "one_fencing_counter", sqlite=_V3_SQLITE, postgres=_V3_POSTGRES),
    Migration(4, "nodes", sqlite=_V4_SQLITE, postgres=_V4_POSTGRES),
    Migration(5, "queue_message_trace", sqlite=_V5_SQLITE, postgres=_V5_POSTGRES),
    Migration(6, "actor_events", sqlite=_V6_SQLITE, postgres=_V6_POSTGRES),
    Migration(7, "queue_message_leases", sqlite=_V7_SQLITE, postgres=_V7_POSTGRES),
    Migration(8, "cluster_secret", sqlite=_V8_SQLITE, postgres=_V8_POSTGRES),
    Migration(9, "idempotency_keys", sqlite=_V9_SQLITE, postgres=_V9_POSTGRES),
    Migration(10, "actor_kv", sqlite=_V10_SQLITE, postgres=_V10_POSTGRES),
    Migration(11, "node_code_version", sqlite=_V11_SQLITE, postgres=_V11_POSTGRES),
)


def check_ledger(migrations: Sequence[Migration]) -> None:
    """Raise ``ValueError`` unless versions run 1, 2, 3 … without gaps or repeats."""
    for expected, migration in enumerate(migrations, start=1):
        if migration.version != expected:
            raise ValueError(
                f"Migration {migration.name!r} has version {migration.version}; "
                f"expected {expected} (versions must run 1, 2, 3 … in order)."
            )


def pending_migrations(
    applied: Iterable[int], migrations: Sequence[Migration] = MIGRATIONS
) -> list[Migration]:
    """The migrations not yet applied, in version order.

    Raises :class:`SchemaTooNew` if the database has a version this code does not know:
    running old code on a newer schema could corrupt it.
    """
    done = set(applied)
    known = {migration.version for migration in migrations}
    unknown = sorted(done - known)
    if unknown:
        raise SchemaTooNew(
            f"The database has schema version {unknown[-1]}, newer than this perdure knows "
            f"({max(known, default=0)}). Upgrade perdure to open it."
        )
    return [migration for migration in migrations if migration.version not in done]


def split_sqlite_statements(script: str) -> list[str]:
    """Split a script into complete statements (``;`` inside strings or triggers is kept).

    ``executescript`` cannot be used inside a transaction (it commits first), so a
    migration runs its statements one by one.
    """
    statements: list[str] = []
    current = ""
    for piece in script.split(";"):
        current += piece + ";"
        if sqlite3.complete_statement(current):
            if current.strip(" \t\r\n;"):
                statements.append(current.strip())
            current = ""
    if current.strip(" \t\r\n;"):
        raise ValueError(f"Incomplete SQL statement in migration: {current.strip()!r}")
    return statements


def apply_sqlite_migrations(
    db: sqlite3.Connection, migrations: Sequence[Migration] = MIGRATIONS
) -> list[int]:
    """Apply the pending migrations to ``db`` in one transaction; return their versions.

    ``db`` must be in autocommit mode (``isolation_level=None``). ``BEGIN IMMEDIATE`` takes
    the write lock before the ledger is read, so two processes opening the same new file
    cannot both apply a step.
    """
    check_ledger(migrations)
    db.execute("BEGIN IMMEDIATE")
    try:
        db.execute(LEDGER_SQLITE)
        applied = [row[0] for row in db.execute("SELECT version FROM perdure_migrations")]
        todo = pending_migrations(applied, migrations)
        for migration in todo:
            for statement in split_sqlite_statements(migration.sqlite):
                db.execute(statement)
            db.execute(
                "INSERT INTO perdure_migrations (version, name, applied_at) VALUES (?, ?, ?)",
                (migration.version, migration.name, time.time_ns() // 1_000_000),
            )
        db.execute("COMMIT")
    except BaseException:
        # Some errors (a full disk, for one) end the transaction by themselves.
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
    return [migration.version for migration in todo]
