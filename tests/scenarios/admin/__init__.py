"""Scenarios of the admin API against a real server: reads, the live feed, operations."""
