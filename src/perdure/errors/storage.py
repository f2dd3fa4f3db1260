"""Errors of storage: the store not answering or full, ownership (leases, the data
lock), and a store used while closed or that cannot be opened read-only."""

from __future__ import annotations

from pathlib import Path

from perdure.errors.base import InternalError, PerdureError


class StoreUnavailable(PerdureError):
    """The store did not answer within its bound (PostgreSQL down, unreachable or stalled).

    Nothing of the call was applied, unless a write's acknowledgement itself was lost, in
    which case the actor is reloaded from what the store holds. ``retry_after`` (seconds)
    is what a server sends as ``Retry-After``.
    """

    group = "store"
    default_code = "unavailable"
    status = 503
    retry_after = 1

    def __init__(
        self, message: str = "The store is unavailable; try again shortly.", *, timeout: float
    ) -> None:
        super().__init__(message, metadata={"timeout": timeout})
        self.timeout = timeout


class StoreFull(PerdureError):
    """The store has no room for the write (a full disk, or SQLite's size cap); nothing of
    it was applied. ``retry_after`` (seconds) is what a server sends as ``Retry-After``."""

    group = "store"
    default_code = "full"
    status = 507
    retry_after = 30

    def __init__(
        self, message: str = "The store is out of space; the write was not applied."
    ) -> None:
        super().__init__(message)


class ActorOwnedElsewhere(PerdureError):
    """Another node holds an unexpired lease on the actor.

    ``metadata`` is ``{"actor_id", "owner_node", "expires_at"}``: where to forward the
    request, and from when (epoch ms, on the store's clock) the actor can be taken over
    if that node does not renew its lease.
    """

    default_code = "owned_elsewhere"
    status = 503

    def __init__(self, actor_id: str, owner_node: str, expires_at: int) -> None:
        super().__init__(
            f"Actor `{actor_id}` is owned by node `{owner_node}` (its lease runs until "
            f"{expires_at} ms since the epoch).",
            metadata={"actor_id": actor_id, "owner_node": owner_node, "expires_at": expires_at},
        )
        self.actor_id = actor_id
        self.owner_node = owner_node
        self.expires_at = expires_at


class StoreLocked(PerdureError):
    """Another process has this SQLite database (its data directory) open.

    ``holder`` is what that process wrote in the lock file (``pid``, ``host``,
    ``command``, ``since``), or ``{}`` if it could not be read.
    """

    group = "store"
    default_code = "locked"
    status = 500
    public = False  # names paths and processes of the host

    def __init__(self, database: Path, lock_file: Path, holder: dict[str, object]) -> None:
        pid = holder.get("pid")
        who = f"process {pid}" if pid is not None else "another process (pid unknown)"
        host = holder.get("host")
        if host:
            who += f" on {host}"
        command = holder.get("command")
        if command:
            who += f" ({command})"
        since = holder.get("since")
        if since:
            who += f", since {since}"
        super().__init__(
            f"The data directory {database.parent} is in use: its database {database.name} "
            f"is held by {who}. Only one perdure server may use a data directory; stop that "
            f"process or give this one another directory. (Lock file: {lock_file}.)",
            metadata={"database": str(database), "lock_file": str(lock_file), **holder},
        )
        self.database = database
        self.lock_file = lock_file
        self.holder = holder


class StoreClosed(InternalError):
    """A store was used before ``open()`` or after ``close()``."""

    def __init__(self, backend: str) -> None:
        super().__init__(
            f"The {backend} store is not open: call `await store.open()` before using it "
            "(or it has been closed)."
        )


class ReadOnlyUnavailable(PerdureError):
    """The store cannot be opened read-only (no database there, or a store that keeps
    nothing between runs)."""

    group = "store"
    default_code = "check_unavailable"
