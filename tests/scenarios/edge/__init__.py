"""Scenarios of the server's edge: limits, tokens, CORS, decoding, raw handlers, outages."""
