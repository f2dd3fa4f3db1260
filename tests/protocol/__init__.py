"""Unit tests of perdure.protocol; captures, malformed, roundtrip: topics over all codecs."""
