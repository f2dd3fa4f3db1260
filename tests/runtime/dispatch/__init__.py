"""Unit tests of perdure.runtime.dispatch (in process)."""
