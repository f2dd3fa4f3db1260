"""Unit tests of perdure.store.postgres on the real PostgreSQL (test_store: the package's face)."""
