"""Errors between the nodes of a cluster: an owner that cannot be reached, a request that
reached a node that does not own the actor, no node able to serve it in time, a request
without the cluster's secret, a node given another secret than the cluster's, and an
error another node answered with."""

from __future__ import annotations

from typing import Any

from perdure.errors.base import PerdureError


class PeerUnreachable(PerdureError):
    """The node that owns the actor could not be reached; the request was not delivered."""

    default_code = "owner_unreachable"
    status = 503


class NotOwner(PerdureError):
    """A forwarded request reached a node that does not own the actor (any more)."""

    default_code = "not_owner"
    status = 503

    def __init__(self, actor_id: str, owner_node: str | None) -> None:
        where = f"node `{owner_node}`" if owner_node else "no node"
        super().__init__(
            f"Actor `{actor_id}` is not owned by this node ({where} owns it).",
            metadata={"actor_id": actor_id, "owner_node": owner_node},
        )
        self.owner_node = owner_node


class ActorUnavailable(PerdureError):
    """No node could serve the actor in time (its owner is unreachable and its lease
    has not expired yet, or the cluster is draining). Safe to retry."""

    default_code = "unavailable"
    status = 503


class PeerForbidden(PerdureError):
    """A request that claims to come from another node of the cluster without the
    cluster's secret (a wrong secret, or a forged forwarding header): 403."""

    default_code = "forbidden"
    status = 403

    def __init__(self, message: str = "Wrong or missing cluster secret.") -> None:
        super().__init__(message)


class ClusterSecretMismatch(PerdureError):
    """A node was given another cluster secret than the one its cluster keeps (or none,
    where the cluster's was configured): it refuses to join, before it registers or
    takes any actor. The message says what to pass instead."""

    default_code = "secret_mismatch"
    group = "cluster"
    status = 500


class RemoteError(PerdureError):
    """An error another node answered with, kept as it was (group, code, status)."""

    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(
            str(error.get("message", "")),
            code=str(error.get("code", "internal_error")),
            metadata=error.get("metadata"),
            group=str(error.get("group", "actor")),
        )
        self.status = int(error.get("status", 500))  # type: ignore[misc]
