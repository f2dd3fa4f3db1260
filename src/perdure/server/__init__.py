"""The HTTP and WebSocket server: the RivetKit client protocol over Starlette and uvicorn.

``create_app(runtime)`` builds the ASGI app; ``perdure serve module:registry`` runs it.
"""

from perdure.server.app import create_app

__all__ = ["create_app"]
