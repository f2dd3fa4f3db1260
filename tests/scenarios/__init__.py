"""End-to-end scenarios: real ``perdure serve`` processes on loopback, over HTTP/WebSocket."""
