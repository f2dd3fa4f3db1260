"""Tests of the benches' own helpers (bench/, outside perdure), kept in step with the store."""
