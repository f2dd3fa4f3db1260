"""The error tree of perdure.

Every error that can reach a caller carries a ``group`` and a ``code`` (together the
wire identifier ``"{group}.{code}"``), a human message, optional ``metadata`` and the
HTTP status a server answers with. The tree::

    PerdureError                     group.code, message, metadata, status, public
    ├── UserError                    user.<code>   raised by actor code on purpose (500)
    ├── ActorNotFound                actor.not_found (404)
    ├── ActorAlreadyExists           actor.duplicate_key (400)
    ├── ActionNotFound               actor.action_not_found (404)
    ├── ActionTimedOut               actor.action_timed_out (408)
    ├── InvalidRequest               actor.invalid_request (400)  bad arguments, bad key …
    ├── InternalError                actor.internal_error (500)   any unexpected exception
    ├── ActorAborted                 actor.aborted (500)          the actor is shutting down
    ├── ActorStopping                actor.stopping (503)         sleep/destroy already requested
    ├── StateNotSerializable         state.not_serializable (500) a value CBOR cannot store
    ├── QueueError                   queue.* (400)                full, too large, invalid …
    ├── MessageError                 message.* (400)              frame/body size, encoding
    ├── ScheduleError                schedule.* (400)             invalid cron, limits …
    ├── WorkflowError                workflow.* (500)             divergence, exhausted steps …
    ├── DefinitionError              config.invalid (500)         bad actor definition (raised
    │                                                             when the registry is built)
    ├── ArgumentError                api.* (500)                  actor code called the API with
    │                                                             an unknown keyword (a camelCase
    │                                                             one), a duration or an instant
    │                                                             of the wrong type; also a
    │                                                             TypeError and a ValueError
    ├── AccessForbidden              auth.forbidden (403)         refused by access control
    │   └── AccessUnauthorized       auth.unauthorized (401)      no or a wrong server token
    ├── NoRawHandler                 actor.route_not_found (404)  no on_request/on_websocket
    ├── StateNotEnabled              actor.state_not_enabled (500) c.state without state=
    ├── ScheduleNotFound             actor.schedule_not_found (404)
    ├── IdempotencyError             idempotency.* (400, 409)     a key too long, reused for
    │                                                             another request (409) …
    ├── KvError                      kv.* (400)                   c.kv: a key or value too
    │                                                             large, too many writes …
    ├── DbError                      db.* (400, 507)              c.db: a statement SQLite
    │                                                             refused, one that would
    │                                                             escape the actor, full …
    ├── (storage)
    │   ├── StoreUnavailable         store.unavailable (503)      the store did not answer in
    │   │                                                         time; retry (Retry-After)
    │   ├── StoreFull                store.full (507)             the disk (or the database's
    │   │                                                         size cap) is full
    │   ├── ActorOwnedElsewhere      actor.owned_elsewhere (503)  another node holds a lease
    │   ├── StoreLocked              store.locked (500)           another process has the
    │   │                                                         SQLite data directory
    │   ├── ReadOnlyUnavailable      store.check_unavailable      perdure check cannot open it
    │   └── StoreClosed              (an InternalError)           used before open()/after close()
    ├── (cluster)
    │   ├── PeerUnreachable          actor.owner_unreachable (503) the owner did not answer
    │   ├── NotOwner                 actor.not_owner (503)        forwarded to a node that
    │   │                                                         does not own the actor
    │   ├── ActorUnavailable         actor.unavailable (503)      no node can serve it yet
    │   ├── PeerForbidden            actor.forbidden (403)        claims to be a node, has
    │   │                                                         not the cluster's secret
    │   ├── ClusterSecretMismatch    cluster.secret_mismatch      a node given another secret
    │   │                                                         than its cluster's: it does
    │   │                                                         not join
    │   └── RemoteError              (as answered)                another node's error, kept
    ├── (edge: the server refuses before any actor)
    │   ├── RouteNotFound            actor.route_not_found (404)  no route for this path
    │   ├── MethodNotAllowed         actor.method_not_allowed (405)
    │   ├── RequestRefused           request.* (400, 413, 431 …)  malformed, too large, slow
    │   ├── GatewayQueryRefused      guard.query_* (400)          an unknown or repeated rvt-*
    │   │                                                         query parameter
    │   │   └── ClientCapReached     request.too_many_* (429)     one address past its caps
    │   ├── OriginNotAllowed         cors.origin_not_allowed (403)
    │   ├── AdminDenied              admin.unauthorized/forbidden the admin surface refused
    │   ├── NotLocal                 actor.not_local (503)        streamed by another node
    │   └── NotStarted               server.not_started (503)     the host app that mounts
    │                                                             perdure did not start it
    └── (workflow: WorkflowError)    workflow.*
        ├── WorkflowFailure          a step out of retries, a failed join or race
        │   ├── StepExhausted, JoinError, RaceError
        ├── HistoryDiverged          workflow.history_diverged    the code no longer matches
        ├── StepContextExpired       a step's context used after the step
        ├── RepairRefused            workflow.* (409)             cannot repair that way now
        ├── UnknownLocation          workflow.unknown_step (404)
        ├── WorkflowCancelled        workflow.cancelled (409)     the run was cancelled
        │   ├── WorkflowTimedOut     workflow.timed_out (409)     it reached its deadline
        │   └── ChildWorkflowCancelled  workflow.child_cancelled  a child it waited for was
        ├── WorkflowFailed           workflow.failed (409)        workflow_result() of a failed run
        │   └── ChildWorkflowFailed  workflow.child_failed (409)  a child it waited for failed
        └── WorkflowNotRunning       workflow.not_running (409)   cancel/pause/resume of a
                                                                  finished (or unpaused) run

    EngineSignal (BaseException)     control flow of the engine (evict, suspend); user
                                     code's ``except Exception`` cannot swallow it.
    ├── Evicted                      the actor is going to sleep: the run stops, replays later
    CriticalError (Exception)        raised in a step to fail it at once, without retries

Only errors marked ``public`` show their message to remote callers; any other exception
is reported as ``actor.internal_error`` with a generic message and logged in full.

The classes live in the modules of this package by concern (:mod:`.base`, :mod:`.actor`,
:mod:`.storage`, :mod:`.cluster`, :mod:`.edge`, :mod:`.workflow`); import them from
here. Two kinds of error sit outside, with the code that alone raises them: the clients'
(:mod:`perdure.client`: an error answered by a server, as ``ActorError``, and transport
failures) and the test kit's (:mod:`perdure.testing`: ``TimeTravelError``,
``SettleTimeout``).
"""

from __future__ import annotations

from perdure.errors.actor import (
    AccessForbidden,
    AccessUnauthorized,
    DbError,
    IdempotencyError,
    KvError,
    NoRawHandler,
    ScheduleNotFound,
    StateNotEnabled,
)
from perdure.errors.base import (
    ActionNotFound,
    ActionTimedOut,
    ActorAborted,
    ActorAlreadyExists,
    ActorNotFound,
    ActorStopping,
    ArgumentError,
    DeadLetterNotFound,
    DefinitionError,
    EngineSignal,
    InternalError,
    InvalidRequest,
    MessageError,
    MessageNotDead,
    PerdureError,
    QueueError,
    ScheduleError,
    StateNotSerializable,
    UserError,
    WorkflowError,
    status_for,
)
from perdure.errors.cluster import (
    ActorUnavailable,
    ClusterSecretMismatch,
    NotOwner,
    PeerForbidden,
    PeerUnreachable,
    RemoteError,
)
from perdure.errors.edge import (
    AdminDenied,
    ClientCapReached,
    GatewayQueryRefused,
    MethodNotAllowed,
    NotLocal,
    NotStarted,
    OriginNotAllowed,
    RequestRefused,
    RouteNotFound,
)
from perdure.errors.storage import (
    ActorOwnedElsewhere,
    ReadOnlyUnavailable,
    StoreClosed,
    StoreFull,
    StoreLocked,
    StoreUnavailable,
)
from perdure.errors.workflow import (
    ChildWorkflowCancelled,
    ChildWorkflowFailed,
    CriticalError,
    Evicted,
    HistoryDiverged,
    JoinError,
    RaceError,
    RepairRefused,
    StepContextExpired,
    StepExhausted,
    UnknownLocation,
    WorkflowCancelled,
    WorkflowFailed,
    WorkflowFailure,
    WorkflowNotRunning,
    WorkflowTimedOut,
)

__all__ = [
    "AccessForbidden",
    "AccessUnauthorized",
    "ActionNotFound",
    "ActionTimedOut",
    "ActorAborted",
    "ActorAlreadyExists",
    "ActorNotFound",
    "ActorOwnedElsewhere",
    "ActorStopping",
    "ActorUnavailable",
    "AdminDenied",
    "ArgumentError",
    "ChildWorkflowCancelled",
    "ChildWorkflowFailed",
    "ClientCapReached",
    "ClusterSecretMismatch",
    "CriticalError",
    "DbError",
    "DeadLetterNotFound",
    "DefinitionError",
    "EngineSignal",
    "Evicted",
    "GatewayQueryRefused",
    "HistoryDiverged",
    "IdempotencyError",
    "InternalError",
    "InvalidRequest",
    "JoinError",
    "KvError",
    "MessageError",
    "MessageNotDead",
    "MethodNotAllowed",
    "NoRawHandler",
    "NotLocal",
    "NotOwner",
    "NotStarted",
    "OriginNotAllowed",
    "PeerForbidden",
    "PeerUnreachable",
    "PerdureError",
    "QueueError",
    "RaceError",
    "ReadOnlyUnavailable",
    "RemoteError",
    "RepairRefused",
    "RequestRefused",
    "RouteNotFound",
    "ScheduleError",
    "ScheduleNotFound",
    "StateNotEnabled",
    "StateNotSerializable",
    "StepContextExpired",
    "StepExhausted",
    "StoreClosed",
    "StoreFull",
    "StoreLocked",
    "StoreUnavailable",
    "UnknownLocation",
    "UserError",
    "WorkflowCancelled",
    "WorkflowError",
    "WorkflowFailed",
    "WorkflowFailure",
    "WorkflowNotRunning",
    "WorkflowTimedOut",
    "status_for",
]
