"""Scenarios of the official RivetKit TypeScript client against a real server (npm package)."""
