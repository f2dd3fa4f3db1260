"""What the edge turned away, counted by reason for ``/metrics``.

The HTTP protocol (slow or oversized requests), the door (origins, tokens) and the
per-client caps refuse work before any actor sees it; an operator needs to see how often
and why. :class:`EdgeRefusals` is a plain dict of counts by the refusal's ``group.code``
(a bounded set: perdure's own codes, never a client's input), written on the event loop
only, and a prometheus_client collector read at scrape time as
``perdure_edge_refusals_total{reason}``.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.metrics_core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

__all__ = ["EdgeRefusals"]


class EdgeRefusals(Collector):
    """Counts of refused requests and closed connections, by reason."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}

    def count(self, reason: str) -> None:
        """Count one refusal for ``reason`` (an error's ``group.code``)."""
        self.counts[reason] = self.counts.get(reason, 0) + 1

    def collect(self) -> Iterator[Metric]:
        """The counts as one Prometheus counter family (called by a scrape)."""
        family = CounterMetricFamily(
            "perdure_edge_refusals",
            "Requests and connections the server refused or closed before an actor saw "
            "them (slow or oversized requests, per-client caps, origins, tokens), by reason.",
            labels=["reason"],
        )
        for reason, total in sorted(self.counts.items()):
            family.add_metric([reason], total)
        yield family
