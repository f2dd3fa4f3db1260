"""Durable storage: the contract (:mod:`perdure.store.base`) and its backends.

``open_store(url)`` builds a backend from a URL; call ``await store.open()`` before use
and ``await store.close()`` after.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, parse_qsl, unquote, urlencode, urlsplit, urlunsplit

from perdure.errors import ActorOwnedElsewhere, StoreClosed, StoreLocked
from perdure.store.base import (
    ActorCommit,
    ActorRecord,
    ClusterSecret,
    Durability,
    EventRecord,
    IdempotencyRecord,
    Lease,
    NodeRecord,
    QueueMessageRecord,
    ScheduleFireRecord,
    ScheduleRecord,
    Store,
    WakeupCallback,
)
from perdure.store.memory import MemoryStore
from perdure.store.sqlite.store import SQLiteStore

if TYPE_CHECKING:
    from perdure.store.postgres.store import PostgresStore

__all__ = [
    "ActorCommit",
    "ActorOwnedElsewhere",
    "ActorRecord",
    "ClusterSecret",
    "Durability",
    "EventRecord",
    "IdempotencyRecord",
    "Lease",
    "MemoryStore",
    "NodeRecord",
    "QueueMessageRecord",
    "SQLiteStore",
    "ScheduleFireRecord",
    "ScheduleRecord",
    "Store",
    "StoreClosed",
    "StoreLocked",
    "WakeupCallback",
    "open_store",
]

_SQLITE_PREFIX = "sqlite:///"
_POSTGRES_PREFIXES = ("postgresql://", "postgres://")
_POSTGRES_OPTIONS = ("schema", "pool_min", "pool_max", "durability")


def open_store(url: str, *, exclusive: bool = True, store_timeout: float | None = None) -> Store:
    """Build (but do not open) the store that ``url`` names.

    - ``memory://`` — a :class:`MemoryStore`;
    - ``sqlite:///relative/path.db`` or ``sqlite:////absolute/path.db`` (the SQLAlchemy
      convention: what follows ``sqlite:///`` is the path), optionally with
      ``?durability=power`` and ``?max_size=BYTES`` (a cap on the file: writes past it
      fail with ``store.full``);
    - ``postgresql://user@host:5432/dbname`` (or ``postgres://``) — a
      :class:`~perdure.store.postgres.store.PostgresStore` (needs ``perdure[postgres]``), with
      optional ``schema=``, ``pool_min=``, ``pool_max=`` and ``durability=``; other query
      parameters (``sslmode=``, ``connect_timeout=`` …) go to libpq unchanged;
    - a plain filesystem path (no ``scheme://``) — a :class:`SQLiteStore` on that file.

    Any other scheme raises ``ValueError``. ``exclusive=False`` opens a SQLite store
    without taking its data-directory lock (a reader beside a running server; see
    :class:`SQLiteStore`); the other stores ignore it. ``store_timeout`` (seconds, default
    5) bounds every call of a PostgreSQL store (see
    :class:`~perdure.store.postgres.store.PostgresStore`); the local stores ignore it.
    """
    if url == "memory://":
        return MemoryStore()
    if url.startswith(_SQLITE_PREFIX):
        return _sqlite_from_url(url, exclusive)
    if url.startswith(_POSTGRES_PREFIXES):
        return _postgres_from_url(url, store_timeout)
    if "://" not in url:
        if not url:
            raise ValueError("An empty store URL names no database.")
        return SQLiteStore(Path(url), exclusive=exclusive)
    scheme = url.split("://", 1)[0]
    raise ValueError(
        f"Unsupported store URL scheme {scheme!r} in {url!r}: use 'memory://', "
        "'sqlite:///path/to/file.db', 'postgresql://host/dbname' or a plain file path."
    )


def _sqlite_from_url(url: str, exclusive: bool) -> SQLiteStore:
    rest, _, query = url[len(_SQLITE_PREFIX) :].partition("?")
    path = unquote(rest)
    if not path:
        raise ValueError(f"The SQLite URL {url!r} names no file.")
    options = parse_qs(query, keep_blank_values=True, strict_parsing=bool(query))
    unknown = set(options) - {"durability", "max_size"}
    if unknown:
        raise ValueError(f"Unknown SQLite URL option(s) {sorted(unknown)} in {url!r}.")
    durability = options.get("durability", ["process"])[-1]
    max_size = _max_size(options.get("max_size", [""])[-1])
    if durability == "power":
        return SQLiteStore(Path(path), durability="power", exclusive=exclusive, max_size=max_size)
    if durability == "process":
        return SQLiteStore(Path(path), durability="process", exclusive=exclusive, max_size=max_size)
    raise ValueError(f"durability must be 'process' or 'power', not {durability!r}.")


def _max_size(text: str) -> int | None:
    if not text:
        return None
    if not text.isdigit() or int(text) <= 0:
        raise ValueError(f"max_size must be a positive number of bytes, not {text!r}.")
    return int(text)


def _postgres_from_url(url: str, store_timeout: float | None) -> PostgresStore:
    # Messages never quote the URL: it may carry a password.
    try:
        from perdure.store.postgres.store import PostgresStore
    except ImportError as exc:
        raise ValueError("PostgreSQL URLs need psycopg: pip install 'perdure[postgres]'.") from exc
    parts = urlsplit(url)
    ours: dict[str, str] = {}
    theirs: list[tuple[str, str]] = []
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if name in _POSTGRES_OPTIONS:
            ours[name] = value
        else:
            theirs.append((name, value))
    libpq_url = urlunsplit(parts._replace(query=urlencode(theirs)))
    try:
        pool_min = int(ours.get("pool_min", "1"))
        pool_max = int(ours.get("pool_max", "10"))
    except ValueError as exc:
        raise ValueError("pool_min and pool_max in a PostgreSQL URL must be integers.") from exc
    durability = ours.get("durability", "process")
    if durability not in ("process", "power"):
        raise ValueError(f"durability must be 'process' or 'power', not {durability!r}.")
    return PostgresStore(
        libpq_url,
        schema=ours.get("schema") or None,
        pool_min=pool_min,
        pool_max=max(pool_max, pool_min),
        durability="power" if durability == "power" else "process",
        store_timeout=5.0 if store_timeout is None else store_timeout,
    )
