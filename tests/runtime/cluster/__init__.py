"""Unit tests of perdure.runtime.cluster: nodes in one process on one shared store."""
