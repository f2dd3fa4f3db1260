"""Durable storage: the contract (:mod:`perdure.store.base`) and its backends.

``open_store(url)`` builds a backend from a URL; call ``await store.open()`` before use
and ``await store.close()`` after.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs, unquote

from perdure.store._shared import StoreClosed
from perdure.store.base import (
    ActorCommit,
    ActorRecord,
    Durability,
    QueueMessageRecord,
    Store,
)
from perdure.store.memory import MemoryStore
from perdure.store.sqlite import SQLiteStore

__all__ = [
    "ActorCommit",
    "ActorRecord",
    "Durability",
    "MemoryStore",
    "QueueMessageRecord",
    "SQLiteStore",
    "Store",
    "StoreClosed",
    "open_store",
]

_SQLITE_PREFIX = "sqlite:///"


def open_store(url: str) -> Store:
    """Build (but do not open) the store that ``url`` names.

    - ``memory://`` — a :class:`MemoryStore`;
    - ``sqlite:///relative/path.db`` or ``sqlite:////absolute/path.db`` (the SQLAlchemy
      convention: what follows ``sqlite:///`` is the path), optionally with
      ``?durability=power``;
    - a plain filesystem path (no ``scheme://``) — a :class:`SQLiteStore` on that file.

    Any other scheme raises ``ValueError``.
    """
    if url == "memory://":
        return MemoryStore()
    if url.startswith(_SQLITE_PREFIX):
        return _sqlite_from_url(url)
    if "://" not in url:
        if not url:
            raise ValueError("An empty store URL names no database.")
        return SQLiteStore(Path(url))
    scheme = url.split("://", 1)[0]
    raise ValueError(
        f"Unsupported store URL scheme {scheme!r} in {url!r}: use 'memory://', "
        "'sqlite:///path/to/file.db' or a plain file path."
    )


def _sqlite_from_url(url: str) -> SQLiteStore:
    rest, _, query = url[len(_SQLITE_PREFIX) :].partition("?")
    path = unquote(rest)
    if not path:
        raise ValueError(f"The SQLite URL {url!r} names no file.")
    options = parse_qs(query, keep_blank_values=True, strict_parsing=bool(query))
    unknown = set(options) - {"durability"}
    if unknown:
        raise ValueError(f"Unknown SQLite URL option(s) {sorted(unknown)} in {url!r}.")
    durability = options.get("durability", ["process"])[-1]
    if durability == "power":
        return SQLiteStore(Path(path), durability="power")
    if durability == "process":
        return SQLiteStore(Path(path), durability="process")
    raise ValueError(f"durability must be 'process' or 'power', not {durability!r}.")
