"""The inspector web UI at ``/ui/``: pages built on the admin API (``/admin/…``).

The server renders page shells (:mod:`perdure.server.admin.ui.render`); the inspector's own
scripts under ``static/`` fill them from the admin API and keep the actor page live from
the actor's event feed. Nothing here is third-party code and nothing needs a build step:
the templates and static files ship as package data.
"""

from perdure.server.admin.ui.routes import ui_routes

__all__ = ["ui_routes"]
