"""Unit tests of perdure.server.cluster (in process, against real sockets)."""
