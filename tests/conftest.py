"""The fixtures every folder may use, as plugins: runtimes on each store backend
(:mod:`tests.support.runtimes`)."""

pytest_plugins = ["tests.support.runtimes"]
