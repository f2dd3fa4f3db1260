"""Scenarios of the admin commands: the real ``perdure`` script against a real server."""
