"""Unit tests of perdure.store: base.py's contract on every backend (test_contract*), and more."""
