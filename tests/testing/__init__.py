"""Unit tests of perdure.testing, the test kit (the plugin run in a fresh pytest)."""
