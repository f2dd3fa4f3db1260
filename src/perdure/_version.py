"""perdure's version: the one place it is written (pyproject.toml reads it from here).

Modules that report the version import it from here, not from the package face, so that
no module depends on ``perdure/__init__.py``.
"""

__version__ = "0.1.0"
