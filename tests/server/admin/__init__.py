"""Unit tests of perdure.server.admin (in process)."""
