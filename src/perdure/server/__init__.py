"""The HTTP and WebSocket server: the RivetKit client protocol over Starlette and uvicorn.

``create_app(runtime)`` builds the ASGI app (a :class:`PerdureApp`); ``perdure serve
module:registry`` runs it, and a host app can mount it at any prefix (docs/embedding.md).
"""

from perdure.server.app import PerdureApp, create_app

__all__ = ["PerdureApp", "create_app"]
