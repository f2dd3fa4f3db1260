"""Unit tests of perdure.store.sqlite (in process, on real SQLite files)."""
