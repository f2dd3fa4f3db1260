"""The runtime's face: what the server, the CLI, the test kit, the clients and the package
root may use of the runtime. They import from here and from nowhere deeper (an
import-linter contract keeps it so); what is not listed here is the runtime's own
business and may change without notice.

The rooms behind the face (docs/DESIGN.md §2 draws them, and what each may import):
``kernel`` (the core every part of a live actor builds on), ``queues``, ``schedules``
and ``events`` (the parts, independent of each other), ``actor`` (the live instance
that composes them), ``cluster`` (membership and leases), ``dispatch`` (the one way into
an actor), ``local`` (the in-process client), ``admin`` (the inspector) and ``host``
(the runtime that holds it all).
"""

from perdure.runtime.actor.connections import (
    RequestInfo,
    Transport,
    bind_request,
    inherit_request,
)
from perdure.runtime.actor.contexts import ActionContext, ActorContext
from perdure.runtime.actor.operations import (
    NO_CONNECTION,
    ActorAddress,
    Administer,
    CallAction,
    Forwardable,
    Operation,
    ResolveMethod,
    SendMessage,
)
from perdure.runtime.admin.inspector import ActorInspector, AwakeFilter, shown
from perdure.runtime.cluster.member import ClusterMember, NodeConfig, PeerNode, RemoteConnection
from perdure.runtime.cluster.secret import agree_cluster_secret
from perdure.runtime.dispatch.dispatcher import ActorDispatch, ActorSummary
from perdure.runtime.dispatch.refs import ActorRef, ConnectionRef
from perdure.runtime.events.log import EventSink, LoggedEvent, Since, parse_since
from perdure.runtime.host.actor_runtime import ActorRuntime
from perdure.runtime.kernel.clock import Clock, ManualClock, SystemClock
from perdure.runtime.kernel.core import ActorIdentity
from perdure.runtime.kernel.db_view import DbRows, db_query
from perdure.runtime.kernel.idempotency import check_key as check_idempotency_key
from perdure.runtime.local.client import LocalClient
from perdure.runtime.queues.actor_queue import QueueSendResult
from perdure.runtime.schedules.info import (
    CronFire,
    CronJobInfo,
    ScheduledEventInfo,
    ScheduledFireInfo,
)

__all__ = [
    "NO_CONNECTION",
    "ActionContext",
    "ActorAddress",
    "ActorContext",
    "ActorDispatch",
    "ActorIdentity",
    "ActorInspector",
    "ActorRef",
    "ActorRuntime",
    "ActorSummary",
    "Administer",
    "AwakeFilter",
    "CallAction",
    "Clock",
    "ClusterMember",
    "ConnectionRef",
    "CronFire",
    "CronJobInfo",
    "DbRows",
    "EventSink",
    "Forwardable",
    "LocalClient",
    "LoggedEvent",
    "ManualClock",
    "NodeConfig",
    "Operation",
    "PeerNode",
    "QueueSendResult",
    "RemoteConnection",
    "RequestInfo",
    "ResolveMethod",
    "ScheduledEventInfo",
    "ScheduledFireInfo",
    "SendMessage",
    "Since",
    "SystemClock",
    "Transport",
    "agree_cluster_secret",
    "bind_request",
    "check_idempotency_key",
    "db_query",
    "inherit_request",
    "parse_since",
    "shown",
]
