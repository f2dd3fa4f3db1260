"""Scenarios of leases and dead letters: real servers, kills, the CLI, a cluster, a browser."""
