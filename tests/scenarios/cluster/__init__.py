"""Scenarios of a cluster: real nodes on one PostgreSQL, behind a real HAProxy."""
