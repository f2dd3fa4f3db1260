"""A sample app and the code that calls it through the typed clients: the mypy run of
tests/typed/test_typed_mypy.py must report exactly the mistakes planted in usage.py."""
