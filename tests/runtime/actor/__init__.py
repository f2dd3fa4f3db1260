"""Unit tests of perdure.runtime.actor (in process); some files are named after a topic."""
