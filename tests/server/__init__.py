"""Unit tests of perdure.server, in process (the server over HTTP is in tests/scenarios)."""
