"""``GET /metrics``: the runtime's Prometheus metrics, in the text exposition format.

The route belongs to the admin surface: :class:`~perdure.server.edge.admin_access.AdminAccess`
decides who may scrape (loopback by default, anyone presenting the admin token
otherwise), and a refused scrape gets perdure's JSON error body like any other admin
request. ``perdure serve --no-metrics`` (or ``PERDURE_METRICS=0``) leaves the route and
its observer out; docs/metrics.md lists the metrics.
"""

from __future__ import annotations

from prometheus_client import CONTENT_TYPE_LATEST
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from perdure.observe.metrics import MetricsObserver
from perdure.runtime import ActorRuntime
from perdure.server.edge.admin_access import AdminAccess
from perdure.server.edge.refusals import EdgeRefusals
from perdure.server.gateway.management import json_errors

__all__ = ["METRICS_PATH", "metrics_route"]

METRICS_PATH = "/metrics"


def metrics_route(runtime: ActorRuntime, admin: AdminAccess, refusals: EdgeRefusals) -> Route:
    """Watch ``runtime`` with a new :class:`MetricsObserver` and serve it at ``/metrics``,
    with what the edge refused (``refusals``)."""
    observer = MetricsObserver(runtime.registry.actors)
    observer.registry.register(refusals)
    runtime.observers.add(observer)

    async def metrics(request: Request) -> Response:
        admin.check(request)
        await observer.refresh(runtime)
        return Response(observer.exposition(), media_type=CONTENT_TYPE_LATEST)

    return Route(METRICS_PATH, json_errors(metrics), methods=["GET"])
