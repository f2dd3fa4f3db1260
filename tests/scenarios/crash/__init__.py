"""Crash scenarios: the seed's progress workload across ``kill -9`` of a real server."""
