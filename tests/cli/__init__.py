"""Unit tests of perdure.cli, no server (the commands against a server: tests/scenarios/cli)."""
