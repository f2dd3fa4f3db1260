"""Observers perdure ships: metrics, traces, logs.

Each one is a :class:`perdure.telemetry.Observer` that a server adds to its runtime
(``runtime.observers.add(...)``): :mod:`perdure.observe.metrics` counts and times the
engine's work for Prometheus.
"""
