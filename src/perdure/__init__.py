"""perdure: durable actors and workflows for Python."""

from perdure.errors import UserError

__all__ = ["UserError"]
__version__ = "0.1.0"
