"""Scenarios of typed models over the wire, against a real server."""
