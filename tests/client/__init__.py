"""Unit tests of perdure.client, no server (against a real one: tests/scenarios/client)."""
