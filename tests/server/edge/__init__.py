"""Unit tests of perdure.server.edge (in process, over httpx's ASGI transport)."""
