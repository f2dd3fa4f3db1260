"""Unit tests of perdure.runtime.kernel (in process)."""
