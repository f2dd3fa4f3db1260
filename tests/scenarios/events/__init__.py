"""Scenarios of the event log over real servers: resume, SSE, retention, kills, clusters."""
