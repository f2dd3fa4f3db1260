"""The README, docs and examples run as a reader runs them (programs, servers, pages)."""
