"""Scenarios of the gateway: raw HTTP and WebSocket against a real ``perdure serve``."""
