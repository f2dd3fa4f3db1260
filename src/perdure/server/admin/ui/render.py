"""The inspector's page shells: ``string.Template`` files filled with escaped values.

The pages are shells that the inspector's own scripts fill from the admin API, so the
server renders little: a title, a page's static markup, a few values. Everything given to
:func:`page` is HTML-escaped unless wrapped in :class:`Safe` (markup this module built).
"""

from __future__ import annotations

import html
from functools import cache
from importlib import resources
from string import Template

from starlette.responses import HTMLResponse

__all__ = ["SECURITY_HEADERS", "Safe", "page"]

# The pages load only the inspector's own files and talk only to this server; framing is
# refused so that no other site can overlay its buttons (destroy, replay) on a page.
SECURITY_HEADERS = {
    "content-security-policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
    ),
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
    "cache-control": "no-store",
}


class Safe(str):
    """Markup that is inserted as is (built here from escaped parts)."""

    __slots__ = ()


@cache
def _template(name: str) -> Template:
    text = resources.files(__package__).joinpath("templates", name).read_text("utf-8")
    return Template(text)


def _fill(name: str, values: dict[str, str]) -> str:
    escaped = {k: v if isinstance(v, Safe) else html.escape(v) for k, v in values.items()}
    return _template(name).substitute(escaped)


def page(
    template: str,
    *,
    title: str,
    root: str = "",
    status: int = 200,
    script: str | None = None,
    signed_in: bool = False,
    node: str = "",
    **values: str,
) -> HTMLResponse:
    """``template`` inside the common layout, as a response with the security headers.

    ``root`` is where perdure is mounted (``""`` at the root,
    :func:`perdure.server.edge.mount.link_root`): every link, form and file of the page
    starts with it (``$root`` in the templates), and the layout hands it to the scripts
    (``<meta name="perdure-root">``, read by ``static/api.js``). ``script`` names a
    module under ``/ui/static/`` that the page loads; ``signed_in`` shows the sign-out
    button (only useful when the server has an admin token); ``node`` names the cluster
    node that answers, in the header.
    """
    scripts = ""
    if script is not None:
        src = f"{root}/ui/static/{script}"
        scripts = f'<script type="module" src="{html.escape(src)}"></script>'
    sign_out = _fill("signout.html", {"root": root}) if signed_in else ""
    body = _fill(
        "layout.html",
        {
            "root": root,
            "title": title,
            "node": node,
            "scripts": Safe(scripts),
            "signout": Safe(sign_out),
            "content": Safe(_fill(template, {"root": root, **values})),
        },
    )
    return HTMLResponse(body, status, headers=SECURITY_HEADERS)
