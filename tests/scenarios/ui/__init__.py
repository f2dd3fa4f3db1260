"""Scenarios of the inspector in a real headless Chromium against a real server."""
