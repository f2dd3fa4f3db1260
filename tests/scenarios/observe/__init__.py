"""Scenarios of metrics, logs and traces of a real ``perdure serve`` process."""
