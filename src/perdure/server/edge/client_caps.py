"""Caps per client address: open event streams, open WebSockets, and a rate of actor
creation (docs/edge.md, "Per-client caps").

One client address must not hold the whole server: :class:`ClientCaps` says how many
Server-Sent Events streams and WebSockets one address may keep open at once, and how
fast it may create actors (a token bucket, off by default). :class:`ClientLimits` keeps
the counts for one server (``create_app`` makes one and gives it to the routes). A
refusal is a :class:`~perdure.errors.ClientCapReached` (429, with ``Retry-After`` over
HTTP), counted in :class:`~perdure.server.edge.refusals.EdgeRefusals` for ``/metrics``.

The address is ``scope["client"][0]``: the peer, or, with uvicorn's proxy headers on,
the client the proxy names (no client, as over a Unix socket, counts as one address,
``""``). Loopback is not exempt: behind a proxy on the same host everything is loopback.
What another node of the cluster hands on here with the cluster's secret
(:func:`perdure.server.cluster.pipe.handed_on_by_peer`) is not counted: that node
counted it for its client, and one node carries many clients.

Cost: a dict lookup when a stream or socket opens and one when it closes, nothing per
message; the tables hold only addresses with something open, and the creation buckets
only addresses seen within one refill (at most :data:`MAX_BUCKETS`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from perdure.errors import ClientCapReached, PeerForbidden
from perdure.runtime import ClusterMember
from perdure.server.cluster.pipe import handed_on_by_peer
from perdure.server.edge.asgi import Scope
from perdure.server.edge.refusals import EdgeRefusals

__all__ = [
    "DEFAULT_MAX_STREAMS",
    "DEFAULT_MAX_WEBSOCKETS",
    "MAX_BUCKETS",
    "UNLIMITED",
    "ClientCaps",
    "ClientLimits",
    "CreationGate",
]

DEFAULT_MAX_STREAMS: Final = 64
"""Open SSE event streams per client address, unless set."""

DEFAULT_MAX_WEBSOCKETS: Final = 256
"""Open WebSockets per client address, unless set."""

MAX_BUCKETS: Final = 65536
"""Most client addresses whose creation bucket is kept. Past it, the least recently used
address's bucket is dropped even if not yet full (that address starts afresh): a bound
on memory that only a flood of distinct addresses reaches."""

CreationGate = Callable[[], None]
"""Takes one creation from the request's address; raises ``ClientCapReached`` past its rate."""


@dataclass(frozen=True, slots=True)
class ClientCaps:
    """What one client address may hold (0: no cap).

    ``max_streams``: open SSE event streams (``GET /gateway/…/events``).
    ``max_websockets``: open WebSockets (the gateway's and the top-level ``/connect``,
    raw ``on_websocket`` sockets).
    ``creation_rate``: actors created per second (getOrCreate that creates, create; over
    the gateway, ``/actors`` and a connecting WebSocket); 0, the default, is no limit.
    ``creation_burst``: creations allowed at once before the rate applies (the bucket's
    size); 0 means the rate rounded up, at least 1.
    """

    max_streams: int = DEFAULT_MAX_STREAMS
    max_websockets: int = DEFAULT_MAX_WEBSOCKETS
    creation_rate: float = 0.0
    creation_burst: int = 0

    def __post_init__(self) -> None:
        for name in ("max_streams", "max_websockets", "creation_burst"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"{name} must be an integer >= 0 (0: no cap), not {value!r}")
        rate = self.creation_rate
        if isinstance(rate, bool) or not isinstance(rate, int | float) or not 0 <= rate < math.inf:
            raise ValueError(f"creation_rate must be a number >= 0 (0: no limit), not {rate!r}")

    @property
    def burst(self) -> int:
        """The creation bucket's size: ``creation_burst``, else the rate rounded up."""
        return self.creation_burst or max(1, math.ceil(self.creation_rate))


class _OpenCounts:
    """How many items each address holds open, past ``limit`` refused (0: not counted)."""

    __slots__ = ("code", "limit", "noun", "open")

    def __init__(self, limit: int, code: str, noun: str) -> None:
        self.limit = limit
        self.code = code
        self.noun = noun
        self.open: dict[str, int] = {}  # only addresses with something open

    def take(self, address: str) -> ClientCapReached | None:
        held = self.open.get(address, 0)
        if held >= self.limit:
            return ClientCapReached(
                f"This client address has {self.limit} {self.noun} open, the most allowed; "
                "close one first.",
                code=self.code,
                metadata={"limit": self.limit},
                retry_after=1,
            )
        self.open[address] = held + 1
        return None

    def give_back(self, address: str) -> None:
        held = self.open.get(address, 0) - 1
        if held > 0:
            self.open[address] = held
        else:
            self.open.pop(address, None)


class _Buckets:
    """A token bucket per address: ``rate`` tokens a second, at most ``burst``.

    Entries are kept in the order they were last used (a used entry is moved to the
    end), so the idle ones are at the front: one that has not been used for a whole
    refill (``burst / rate`` seconds) is full again, the same as no entry, and is dropped
    as soon as any address uses the table."""

    __slots__ = ("burst", "clock", "rate", "refill", "table")

    def __init__(self, rate: float, burst: int, clock: Callable[[], float]) -> None:
        self.rate = rate
        self.burst = burst
        self.refill = burst / rate
        self.clock = clock
        self.table: dict[str, tuple[float, float]] = {}  # address -> (tokens, when)

    def take(self, address: str) -> float:
        """Take a token for ``address``: 0 if taken, else the seconds until one is due."""
        now = self.clock()
        entry = self.table.pop(address, None)
        tokens = (
            float(self.burst)
            if entry is None
            else min(self.burst, entry[0] + (now - entry[1]) * self.rate)
        )
        wait = 0.0
        if tokens >= 1:
            tokens -= 1
        else:
            wait = (1 - tokens) / self.rate
        self.table[address] = (tokens, now)
        self._evict(now)
        return wait

    def _evict(self, now: float) -> None:
        table = self.table
        while table:
            oldest = next(iter(table))
            if len(table) <= MAX_BUCKETS and now - table[oldest][1] < self.refill:
                return
            del table[oldest]


class ClientLimits:
    """The per-address counts of one server, for :class:`ClientCaps` (``create_app``
    shares one between the routes). Event-loop only, like the server.

    ``refusals``: where refusals are counted (``/metrics``). ``cluster``: on a cluster
    node, what another node hands on with the cluster's secret is not counted."""

    def __init__(
        self,
        caps: ClientCaps | None = None,
        refusals: EdgeRefusals | None = None,
        *,
        cluster: ClusterMember | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.caps = caps = caps or ClientCaps()
        self.refusals = refusals
        self._cluster = cluster
        self.streams = _OpenCounts(caps.max_streams, "too_many_streams", "event streams")
        self.websockets = _OpenCounts(
            caps.max_websockets, "too_many_connections", "WebSocket connections"
        )
        self.creations = (
            _Buckets(caps.creation_rate, caps.burst, clock) if caps.creation_rate > 0 else None
        )

    # ------------------------------------------------------------ open items

    def open_stream(self, scope: Scope) -> str | None:
        """Count an event stream opening; ``ClientCapReached`` past the cap. Returns
        what :meth:`close_stream` takes when the stream ends (``None``: not counted)."""
        return self._open(self.streams, scope)

    def close_stream(self, held: str | None) -> None:
        """The stream :meth:`open_stream` counted has ended."""
        if held is not None:
            self.streams.give_back(held)

    def open_websocket(self, scope: Scope) -> str | None:
        """Count a WebSocket opening; ``ClientCapReached`` past the cap. Returns what
        :meth:`close_websocket` takes when it closes (``None``: not counted)."""
        return self._open(self.websockets, scope)

    def close_websocket(self, held: str | None) -> None:
        """The socket :meth:`open_websocket` counted has closed."""
        if held is not None:
            self.websockets.give_back(held)

    def _open(self, counts: _OpenCounts, scope: Scope) -> str | None:
        if not counts.limit:
            return None
        address = self._address(scope)
        if address is None:
            return None
        refused = counts.take(address)
        if refused is not None:
            raise self._refused(refused)
        return address

    # ------------------------------------------------------------ creation

    def creation_gate(self, scope: Scope) -> CreationGate | None:
        """What takes one creation from the request's address (``None``: no limit)."""
        buckets = self.creations
        if buckets is None:
            return None
        address = self._address(scope)
        if address is None:
            return None

        def take() -> None:
            wait = buckets.take(address)
            if wait:
                raise self._refused(
                    ClientCapReached(
                        f"This client address creates actors faster than {buckets.rate:g} a "
                        f"second (bursts of {buckets.burst}); try again shortly.",
                        code="creation_rate_limited",
                        metadata={"limit": buckets.rate, "burst": buckets.burst},
                        retry_after=max(1, math.ceil(wait)),
                    )
                )

        return take

    # ------------------------------------------------------------ helpers

    def _address(self, scope: Scope) -> str | None:
        """The client address, or ``None`` for what a peer node hands on."""
        cluster = self._cluster
        if cluster is not None:
            try:
                # The secret is read now: the node agrees on it with its store as it starts.
                if handed_on_by_peer(scope, cluster.secret):
                    return None
            except PeerForbidden:
                pass  # counted like any client; the route refuses it
        client = scope.get("client")
        return str(client[0]) if client else ""

    def _refused(self, error: ClientCapReached) -> ClientCapReached:
        if self.refusals is not None:
            self.refusals.count(error.identifier)
        return error


UNLIMITED = ClientLimits(ClientCaps(max_streams=0, max_websockets=0))
"""Limits that count nothing (the routes' default when none are given)."""
