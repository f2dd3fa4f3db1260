"""Unit tests of perdure.runtime, one folder per room (in process)."""
