"""Where perdure's app is mounted: the ASGI ``root_path`` it is entered with.

A host app that mounts perdure (``app.mount("/perdure", perdure_app)`` in FastAPI or
Starlette), or a server run with ``--root-path``, hands it requests whose ``path`` and
``raw_path`` still begin with the prefix and whose ``root_path`` names it (the ASGI
convention that Starlette's ``Mount`` and uvicorn follow). perdure's own routes are
written from its root (``/gateway/…``, ``/admin/…``), so the door records the prefix as
a request enters (:func:`enter`), every check and parser reads the path *below* it
(:func:`route_path`, :func:`raw_route_path`), and every link, redirect and cookie the
server makes starts with it (:func:`link_root`). A request that did not cross a mount
carries no record, and everything reads the path as it always did.

The record is needed because perdure's own ``Mount("/gateway")`` extends ``root_path``
again further in: only the value at the entrance says where perdure itself begins.
"""

from __future__ import annotations

from urllib.parse import quote, unquote

from perdure.server.edge.asgi import Scope

__all__ = ["ROOT_KEY", "enter", "link_root", "raw_route_path", "route_path"]

ROOT_KEY = "perdure.root_path"
"""The scope key holding perdure's mount prefix (decoded, no trailing ``/``); absent at
the root."""
_PATH_CHARACTERS = "/!$&'()*+,;=:@~"  # what a path segment may hold unescaped (RFC 3986)


def enter(scope: Scope) -> None:
    """Record where perdure is mounted; called once, where a request enters perdure."""
    root = scope.get("root_path")
    if root and (root := root.rstrip("/")):
        scope[ROOT_KEY] = root


def route_path(scope: Scope) -> str:
    """The request's path below perdure's mount (``/gateway/…`` wherever it is mounted),
    as Starlette's router matches it."""
    path: str = scope["path"]
    root = scope.get(ROOT_KEY)
    if root is None or not path.startswith(root):
        # A server that leaves the prefix out of `path` (older ASGI servers) already
        # gives the path below it.
        return path
    rest = path[len(root) :]
    if rest == "":
        return "/"
    return rest if rest[0] == "/" else path


def raw_route_path(scope: Scope) -> bytes:
    """The request's raw (still percent-encoded) path below perdure's mount."""
    raw: bytes = scope.get("raw_path") or scope["path"].encode()
    if ROOT_KEY not in scope:
        return raw
    return _split_raw(scope, raw)[1]


def link_root(scope: Scope) -> str:
    """The prefix to put before perdure's own paths in a link, a redirect or a cookie's
    path: ``""`` at the root, else the prefix as the client spelt it (percent-encoded)."""
    if ROOT_KEY not in scope:
        return ""
    raw: bytes = scope.get("raw_path") or scope["path"].encode()
    prefix = _split_raw(scope, raw)[0].decode("latin-1")
    if not prefix:  # the server left the prefix out of the path: spell it from root_path
        prefix = quote(scope[ROOT_KEY], safe=_PATH_CHARACTERS)
    # Never `//host`: a link or a Location that begins so leaves for another site.
    return "/" + prefix.lstrip("/")


def _split_raw(scope: Scope, raw: bytes) -> tuple[bytes, bytes]:
    """``raw`` cut into perdure's prefix and the path below it. The prefix is matched
    segment by segment, decoded, so that ``/my%20app`` is the mount ``/my app``; a raw
    path that does not begin with the prefix is left whole."""
    root: str = scope[ROOT_KEY]
    depth = root.count("/")
    parts = raw.split(b"/", depth + 1)
    if len(parts) < depth + 1:
        return b"", raw
    prefix = b"/".join(parts[: depth + 1])
    if unquote(prefix.decode("latin-1")) != root:
        return b"", raw
    return prefix, b"/" + parts[depth + 1] if len(parts) > depth + 1 else b"/"
