"""Records of the store contract that stand apart from an actor's commit: cluster
nodes, the cluster's secret, schedules and their fires (re-exported by
:mod:`perdure.store.base`, which documents what the store does with them)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ClusterSecret", "NodeRecord", "ScheduleFireRecord", "ScheduleRecord"]


@dataclass(frozen=True, slots=True)
class NodeRecord:
    """One server process of a cluster as registered in the store.

    Times are epoch ms on the store's clock (see the module docstring). ``address`` is
    the URL its peers reach it at (``"http://10.0.0.5:6420"``); ``started_at`` is its
    (re)registration, ``heartbeat_at`` its last heartbeat, and after ``expires_at``
    (``heartbeat_at`` plus the ttl it asked for) it is dead to the others. A
    ``draining`` node is still alive but takes no new actors. ``actors`` counts the
    actors on which it holds an unexpired lease: filled by :meth:`Store.list_nodes`,
    0 elsewhere. ``code_version`` is the version of the code the node announced when it
    registered (``None``: it announced none).
    """

    node_id: str
    address: str
    started_at: int
    heartbeat_at: int
    expires_at: int
    draining: bool = False
    actors: int = 0
    code_version: str | None = None


@dataclass(frozen=True, slots=True)
class ClusterSecret:
    """The secret the nodes of a cluster authenticate each other with, as the store keeps
    it: exactly one of ``secret`` (the secret itself, which the nodes agreed on because
    none was configured: a node that starts later reads it) and ``digest`` (a salted
    digest of a configured secret, which never sits in the store itself).
    """

    secret: str | None = None
    digest: str | None = None

    def __post_init__(self) -> None:
        if (self.secret is None) == (self.digest is None):
            raise ValueError("a cluster secret is kept as the secret or as a digest (one of them)")


@dataclass(frozen=True, slots=True)
class ScheduleRecord:
    """One scheduled job of an actor: a one-shot (``kind="at"``) or a recurring job.

    ``id`` is unique per actor (a UUID for one-shots, ``"cron:" + name`` for recurring
    jobs). ``args`` is the encoded list of configured arguments; ``run_at`` the next due
    time. Recurring jobs carry their cadence (``expression`` and ``timezone`` for
    ``kind="cron"``, ``interval_ms`` for ``kind="every"``), ``max_history``, the time of
    their last fire, ``fire_seq`` (the sequence number of the last fire recorded) and
    ``running_seq`` (the fire in progress, if any: a crash leaves it set).
    """

    id: str
    kind: str
    action: str
    args: bytes
    run_at: int
    created_at: int
    name: str | None = None
    expression: str | None = None
    timezone: str | None = None
    interval_ms: int | None = None
    max_history: int = 0
    last_run_at: int | None = None
    fire_seq: int = 0
    running_seq: int | None = None


@dataclass(frozen=True, slots=True)
class ScheduleFireRecord:
    """One fire of a recurring job, keyed by ``(name, seq)``; ``seq`` grows per job.

    ``result`` is ``"running"``, ``"ok"``, ``"error"`` or ``"skipped"``; ``error`` is the
    encoded ``{group, code, message}`` of a failed fire.
    """

    name: str
    seq: int
    action: str
    scheduled_at: int
    fired_at: int
    result: str
    finished_at: int | None = None
    error: bytes | None = None
