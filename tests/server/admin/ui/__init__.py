"""Unit tests of perdure.server.admin.ui (in process)."""
