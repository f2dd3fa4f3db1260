"""The inspector's routes: page shells, the sign-in form and the inspector's own files.

Every route follows the admin access rule (:class:`perdure.server.edge.admin_access.AdminAccess`).
A browser refused only for lack of a token gets the sign-in page instead of a JSON error;
signing in stores the token in the ``perdure_admin`` cookie (HttpOnly, SameSite=Strict),
which the browser then sends with the pages' calls to the admin API and with the live
feed's ``EventSource`` (which cannot carry an ``Authorization`` header).

Mounted in a host app (docs/embedding.md), every link, redirect and the cookie's path
start with perdure's prefix (:func:`perdure.server.edge.mount.link_root`), and the
cookie is sent to perdure's paths only.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import cache
from importlib import resources
from urllib.parse import parse_qs

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from perdure.errors import AdminDenied, PerdureError
from perdure.runtime import ActorRuntime
from perdure.server.admin.ui.render import SECURITY_HEADERS, page
from perdure.server.edge.admin_access import (
    ADMIN_COOKIE,
    AdminAccess,
    AdminUnauthorized,
)
from perdure.server.edge.asgi import read_body
from perdure.server.edge.mount import link_root

__all__ = ["ui_routes"]

Endpoint = Callable[[Request], Awaitable[Response]]

_HOME = "/ui/"
_LOGIN = "/ui/login"
_MAX_FORM = 8192
_MEDIA_TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}


@dataclass(frozen=True, slots=True)
class _Asset:
    body: bytes
    media_type: str
    etag: str


@cache
def _asset(name: str) -> _Asset | None:
    """A file of the inspector's ``static/`` folder, or None (unknown names, subfolders)."""
    suffix = name[name.rfind(".") :] if "." in name else ""
    if "/" in name or "\\" in name or name.startswith(".") or suffix not in _MEDIA_TYPES:
        return None
    path = resources.files(__package__).joinpath("static", name)
    if not path.is_file():
        return None
    body = path.read_bytes()
    return _Asset(body, _MEDIA_TYPES[suffix], '"' + hashlib.sha256(body).hexdigest()[:16] + '"')


def _safe_next(target: str | None, root: str) -> str:
    """Where to go after signing in: an inspector path on this server, nothing else
    (``root``: where perdure is mounted)."""
    home = root + _HOME
    if target and target.startswith(home) and "//" not in target and "\\" not in target:
        return target
    return home


def _cross_site_navigation(request: Request) -> bool:
    """A link on another site's page opened an inspector page (the access rule refuses
    every request another site starts; the page then offers the same link to follow)."""
    site = request.headers.get("sec-fetch-site")
    return request.headers.get("sec-fetch-mode") == "navigate" and site in (
        "cross-site",
        "same-site",
    )


class _Inspector:
    """The endpoints, sharing the access rule."""

    def __init__(self, admin: AdminAccess, node: str) -> None:
        self.admin = admin
        self.node = node  # shown in the header: which cluster node answers

    @property
    def uses_token(self) -> bool:
        return self.admin.token is not None

    def verdict(self, request: Request) -> AdminDenied | None:
        """None when the access rule lets ``request`` in, else why it does not.

        The rule checks that the admin surface is on and that no other site's page made
        the request before it looks for a token: an :class:`AdminUnauthorized` verdict
        means that only the token is missing or wrong.
        """
        try:
            self.admin.check(request)
        except AdminDenied as exc:
            return exc
        return None

    def beyond_token(self, request: Request) -> Response | None:
        """The refusal page, unless ``request`` lacks at most a token (then None).

        For the sign-in and sign-out forms and the inspector's own files (scripts and
        styles hold no data, and the sign-in page needs its stylesheet).
        """
        refused = self.verdict(request)
        if refused is None or isinstance(refused, AdminUnauthorized):
            return None
        return _denied(refused, link_root(request.scope))

    def guarded(self, handler: Endpoint) -> Endpoint:
        """``handler`` behind the access rule; refusals answer with a page, not JSON."""

        async def endpoint(request: Request) -> Response:
            refused = self.verdict(request)
            if refused is None:
                return await handler(request)
            if isinstance(refused, AdminUnauthorized):
                return self.sign_in_page(_here(request), request, status=401)
            return _refused(request, refused)

        return endpoint

    def sign_in_page(
        self, target: str, request: Request, *, status: int = 200, problem: str = ""
    ) -> Response:
        if not problem and AdminAccess.presented_token(request) is not None:
            problem = "The saved admin token is no longer valid: sign in again."
        root = link_root(request.scope)
        return page(
            "login.html",
            title="Sign in",
            root=root,
            status=status,
            next=_safe_next(target, root),
            problem=problem,
            problem_hidden="" if problem else "hidden",
        )

    async def overview(self, request: Request) -> Response:
        return page(
            "overview.html",
            title="Actors",
            root=link_root(request.scope),
            script="overview.js",
            signed_in=self.uses_token,
            node=self.node,
        )

    async def actor(self, request: Request) -> Response:
        actor_id = request.path_params["actor_id"]
        return page(
            "actor.html",
            title=f"Actor {actor_id}",
            root=link_root(request.scope),
            script="actor.js",
            signed_in=self.uses_token,
            node=self.node,
            actor_id=actor_id,
        )

    async def login_form(self, request: Request) -> Response:
        root = link_root(request.scope)
        target = request.query_params.get("next", root + _HOME)
        refused = self.verdict(request)
        if refused is None:
            # Already allowed (signed in, or a loopback client on a server without a token).
            return RedirectResponse(_safe_next(target, root), 303)
        if isinstance(refused, AdminUnauthorized):
            return self.sign_in_page(target, request)
        return _refused(request, refused)

    async def login(self, request: Request) -> Response:
        if (refused := self.beyond_token(request)) is not None:
            return refused
        try:
            form = parse_qs((await read_body(request.scope, request.receive, _MAX_FORM)).decode())
        except (PerdureError, UnicodeDecodeError):
            form = {}
        token = (form.get("token") or [""])[0].strip()
        root = link_root(request.scope)
        target = _safe_next((form.get("next") or [""])[0], root)
        if self.admin.token is None:
            return RedirectResponse(target, 303)  # no token to check: loopback rules apply
        if not token or not hmac.compare_digest(token.encode(), self.admin.token.encode()):
            problem = "That is not this server's admin token." if token else "Enter the token."
            return self.sign_in_page(target, request, status=401, problem=problem)
        response = RedirectResponse(target, 303)
        response.set_cookie(
            ADMIN_COOKIE,
            token,
            httponly=True,
            samesite="strict",
            path=root + "/",
            secure=request.url.scheme == "https",
        )
        return response

    async def logout(self, request: Request) -> Response:
        if (refused := self.beyond_token(request)) is not None:
            return refused
        root = link_root(request.scope)
        response = RedirectResponse(root + _LOGIN, 303)
        response.delete_cookie(ADMIN_COOKIE, path=root + "/", httponly=True, samesite="strict")
        return response

    async def static(self, request: Request) -> Response:
        if (refused := self.beyond_token(request)) is not None:
            return refused
        asset = _asset(request.path_params["name"])
        if asset is None:
            return Response("Not found.", 404, media_type="text/plain")
        headers = {"etag": asset.etag, "cache-control": "no-cache", **_NOSNIFF}
        if request.headers.get("if-none-match") == asset.etag:
            return Response(status_code=304, headers=headers)
        return Response(asset.body, media_type=asset.media_type, headers=headers)


_NOSNIFF = {"x-content-type-options": SECURITY_HEADERS["x-content-type-options"]}


def _refused(request: Request, exc: AdminDenied) -> Response:
    """The page for a page request the access rule refused."""
    if _cross_site_navigation(request):
        return page(
            "continue.html",
            title="Open the inspector",
            root=link_root(request.scope),
            status=exc.status,
            target=_here(request),
        )
    return _denied(exc, link_root(request.scope))


def _here(request: Request) -> str:
    """The path and query of ``request`` (a link back to the same page)."""
    query = request.url.query
    return request.url.path + (f"?{query}" if query else "")


def _denied(exc: AdminDenied, root: str) -> Response:
    return page(
        "denied.html",
        title="Not available",
        root=root,
        status=exc.status,
        code=exc.identifier,
        message=exc.message,
    )


async def _to_home(request: Request) -> Response:
    return RedirectResponse(link_root(request.scope) + _HOME, 308)


def ui_routes(runtime: ActorRuntime, admin: AdminAccess) -> list[Route]:
    """The inspector's routes under ``/ui``, following ``admin``'s access rule."""
    cluster = runtime.cluster
    ui = _Inspector(admin, "" if cluster is None else f"node {cluster.node_id}")
    return [
        Route("/ui", _to_home, methods=["GET"]),
        Route("/ui/", ui.guarded(ui.overview), methods=["GET"]),
        Route("/ui/actors/{actor_id}", ui.guarded(ui.actor), methods=["GET"]),
        Route(_LOGIN, ui.login_form, methods=["GET"]),
        Route(_LOGIN, ui.login, methods=["POST"]),
        Route("/ui/logout", ui.logout, methods=["POST"]),
        Route("/ui/static/{name}", ui.static, methods=["GET"]),
    ]
