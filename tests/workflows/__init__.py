"""Unit tests of perdure.workflows: the engine on a real database, history, judge, port, repair."""
