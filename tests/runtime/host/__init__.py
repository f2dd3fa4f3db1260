"""Unit tests of perdure.runtime.host (in process); some files are named after a topic."""
