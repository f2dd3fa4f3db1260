"""Scenarios of the Python clients (async and blocking) against a real server."""
