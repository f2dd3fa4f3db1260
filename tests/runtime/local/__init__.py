"""Unit tests of perdure.runtime.local, the in-process client."""
