"""Registries the tests serve (``perdure serve tests.support.apps.NAME:registry``) or run."""
