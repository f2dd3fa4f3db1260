"""The listening socket of ``perdure serve``, bound before anything else starts.

uvicorn binds its socket only once the application is built and the store is open, so a
port already in use used to show up after "serving …" had been logged, as an ``[Errno 98]``
line. Binding first lets the command fail at once with one sentence saying what to do, and
tells the log the real port when ``--port 0`` asks the kernel to choose one.
"""

from __future__ import annotations

import errno
import socket

__all__ = ["ListenError", "bind_listener"]


class ListenError(Exception):
    """The address cannot be listened on; the message says why and what to do."""


def bind_listener(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` (uvicorn calls ``listen`` on it when it starts)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise ListenError(
            f"cannot listen on {host}:{port}: unknown host ({exc.strerror})"
        ) from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    # Like uvicorn: a restarted server may bind while old connections sit in TIME_WAIT.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise ListenError(_reason(host, port, exc)) from None
    sock.set_inheritable(True)
    return sock


def _reason(host: str, port: int, exc: OSError) -> str:
    where = f"cannot listen on {host}:{port}"
    if exc.errno == errno.EADDRINUSE:
        return (
            f"{where}: the port is in use (another server is listening there); "
            "stop it or choose another port with --port"
        )
    if exc.errno == errno.EACCES:
        return f"{where}: permission denied (ports below 1024 need privileges); use --port"
    if exc.errno == errno.EADDRNOTAVAIL:
        return f"{where}: this machine has no such address; check --host"
    return f"{where}: {exc.strerror or exc}"
