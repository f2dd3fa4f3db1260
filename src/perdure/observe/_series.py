"""Counters, histograms and gauges kept as plain numbers, exposed by one collector.

prometheus_client's own ``Counter`` and ``Histogram`` take a lock on every increment
and look their labelled children up through a locked dict: 3-4 µs for an action's count
and duration on the machine of bench/README.md, a tenth of a durable step. Here a hot
path adds to a number (a histogram: ``bisect`` into its bucket list) and the work of
building Prometheus' metric families moves to the scrape (:class:`Families` is a
prometheus_client collector, so the registry and the text format are still
prometheus_client's).

No locks: each series is written by one thread only (the event loop; store commits by
the store's single writer thread), and a scrape reading a number another thread is
adding to sees it before or after, never torn. A histogram's count is read from its
buckets, so its ``+Inf`` bucket and ``_count`` always agree.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

__all__ = ["CounterFamily", "Families", "GaugeFamily", "HistogramFamily", "Series"]

Labels = tuple[str, ...]
_F = TypeVar("_F", bound="_Family")
# How prometheus_client writes a bucket's bound (its function has no annotations).
_bound_text: Callable[[float], str] = floatToGoString


class Series:
    """One histogram series: observations per bucket and their sum."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # the last one is +Inf's own
        self.sum = 0.0

    def observe(self, value: float) -> None:
        """Count ``value`` in the first bucket whose upper bound is >= it."""
        self.sum += value
        self.counts[bisect_left(self.bounds, value)] += 1

    def total(self) -> int:
        """How many observations."""
        return sum(self.counts)


class _Family:
    """A metric's name, help text and label names."""

    def __init__(self, name: str, doc: str, labels: Sequence[str]) -> None:
        self.name = name
        self.doc = doc
        self.labels = list(labels)

    def metric(self) -> Metric:
        """The family as prometheus_client exposes it."""
        raise NotImplementedError


class CounterFamily(_Family):
    """A counter: a number per label values (``name`` without ``_total``)."""

    def __init__(self, name: str, doc: str, labels: Sequence[str]) -> None:
        super().__init__(name, doc, labels)
        self.values: dict[Labels, float] = {}

    def inc(self, labels: Labels, amount: float = 1) -> None:
        """Add ``amount`` (>= 0) to the series ``labels``."""
        values = self.values
        values[labels] = values.get(labels, 0) + amount

    def metric(self) -> Metric:
        family = CounterMetricFamily(self.name, self.doc, labels=self.labels)
        for labels, value in list(self.values.items()):
            family.add_metric(labels, value)
        return family


class HistogramFamily(_Family):
    """A histogram: a :class:`Series` per label values, all with the same buckets."""

    def __init__(self, name: str, doc: str, labels: Sequence[str], bounds: Sequence[float]):
        super().__init__(name, doc, labels)
        self.bounds = tuple(float(bound) for bound in bounds)
        self._bucket_names = [_bound_text(bound) for bound in self.bounds] + ["+Inf"]
        self.series: dict[Labels, Series] = {}

    def get(self, labels: Labels) -> Series:
        """The series ``labels``, made on first use."""
        series = self.series.get(labels)
        if series is None:
            series = self.series[labels] = Series(self.bounds)
        return series

    def metric(self) -> Metric:
        family = HistogramMetricFamily(self.name, self.doc, labels=self.labels)
        for labels, series in list(self.series.items()):
            cumulative = 0
            buckets: list[tuple[str, float]] = []
            for name, count in zip(self._bucket_names, list(series.counts), strict=True):
                cumulative += count
                buckets.append((name, cumulative))
            family.add_metric(labels, buckets, series.sum)
        return family


class TotalsFamily(_Family):
    """A counter read from a histogram's series: how many observations each has (an
    action's count is its duration histogram's count, not a second number to keep)."""

    def __init__(self, name: str, doc: str, source: HistogramFamily) -> None:
        super().__init__(name, doc, source.labels)
        self.source = source

    def metric(self) -> Metric:
        family = CounterMetricFamily(self.name, self.doc, labels=self.labels)
        for labels, series in list(self.source.series.items()):
            family.add_metric(labels, series.total())
        return family


class GaugeFamily(_Family):
    """A gauge whose values a scrape sets all at once (:meth:`replace`)."""

    def __init__(self, name: str, doc: str, labels: Sequence[str]) -> None:
        super().__init__(name, doc, labels)
        self.values: dict[Labels, float] = {}

    def replace(self, values: dict[Labels, float]) -> None:
        """Every series' value, as of now."""
        self.values = values

    def metric(self) -> Metric:
        family = GaugeMetricFamily(self.name, self.doc, labels=self.labels)
        for labels, value in list(self.values.items()):
            family.add_metric(labels, value)
        return family


class Families(Collector):
    """The families of one registry, exposed in the order they were made."""

    def __init__(self) -> None:
        self.families: list[_Family] = []

    def counter(self, name: str, doc: str, labels: Sequence[str] = ()) -> CounterFamily:
        return self._add(CounterFamily(name, doc, labels))

    def histogram(
        self, name: str, doc: str, labels: Sequence[str], bounds: Sequence[float]
    ) -> HistogramFamily:
        return self._add(HistogramFamily(name, doc, labels, bounds))

    def totals(self, name: str, doc: str, source: HistogramFamily) -> TotalsFamily:
        return self._add(TotalsFamily(name, doc, source))

    def gauge(self, name: str, doc: str, labels: Sequence[str]) -> GaugeFamily:
        return self._add(GaugeFamily(name, doc, labels))

    def _add(self, family: _F) -> _F:
        self.families.append(family)
        return family

    def collect(self) -> Iterator[Metric]:
        for family in self.families:
            yield family.metric()
