"""Unit tests of perdure.observe: metrics, logs, traces, in process."""
