"""Unit tests of perdure.runtime.queues (in process)."""
