"""Unit tests of perdure.store.sqlite on real SQLite files (test_store: the package's face)."""
