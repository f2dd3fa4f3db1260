"""Helpers the tests share: servers, clusters, PostgreSQL, waits, apps, plugins."""
