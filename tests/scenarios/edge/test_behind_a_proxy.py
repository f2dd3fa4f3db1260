"""``perdure serve`` behind a reverse proxy on the same host (a real HAProxy with
``option forwardfor``, listening on this machine's non-loopback address): every request
reaches the server from 127.0.0.1, so the admin surface must not take it for the
operator's; with ``--proxy-headers`` the server sees the client's own address."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.support.cluster import Balancer
from tests.support.server import ServerProcess

from .access_server import REGISTRY, new_key

WAIT = 10.0


def _outside_address() -> str:
    """An address of this machine that is not loopback: a client there is 'remote'."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # no packet is sent: this only picks a route
        except OSError:
            pytest.skip("this machine has no non-loopback IPv4 address")
        address = str(probe.getsockname()[0])
    if address.startswith("127."):
        pytest.skip("this machine has no non-loopback IPv4 address")
    return address


@contextmanager
def _proxied(tmp_path: Path, *flags: str) -> Iterator[tuple[ServerProcess, str]]:
    """A server with ``flags`` and HAProxy in front; yields the server and the proxy's URL
    on the outside address."""
    outside = _outside_address()
    server = ServerProcess(
        REGISTRY, tmp_path / "data", extra_args=["--log-level", "warning", *flags]
    )
    server.start()
    balancer = Balancer(
        [("perdure", f"127.0.0.1:{server.port}")],
        base_dir=tmp_path / "haproxy",
        bind="0.0.0.0",
        forward_for=True,
    )
    try:
        balancer.start()
        yield server, f"http://{outside}:{balancer.port}"
    finally:
        balancer.stop()
        server.kill()


def _client_host(url: str) -> str:
    query = f"rvt-method=getOrCreate&rvt-key={new_key()}"
    answer = httpx.post(
        f"{url}/gateway/guarded/action/whoami?{query}", json={"args": []}, timeout=WAIT
    )
    assert answer.status_code == 200, answer.text
    return str(answer.json()["output"]["action"]["client_host"])


def test_a_proxied_request_is_not_the_local_operator(tmp_path: Path) -> None:
    with _proxied(tmp_path) as (server, proxy):
        # nginx's default proxy_pass sends the upstream's own Host (127.0.0.1:PORT); with
        # HAProxy, which passes the client's on, a client can send that Host itself.
        local_host = {"host": f"127.0.0.1:{server.port}"}
        remote = httpx.get(f"{proxy}/admin/actors", headers=local_host, timeout=WAIT)
        assert remote.status_code == 403, remote.text
        assert remote.headers["x-rivet-error"] == "admin.forbidden"
        metrics = httpx.get(f"{proxy}/metrics", headers=local_host, timeout=WAIT)
        assert metrics.status_code == 403
        # The operator on the machine, straight to the port, is still let in.
        assert httpx.get(f"{server.url}/admin/actors", timeout=WAIT).status_code == 200
        # Without --proxy-headers the server sees the proxy, not the client.
        assert _client_host(proxy) == "127.0.0.1"


def test_with_proxy_headers_the_server_sees_the_client(tmp_path: Path) -> None:
    with _proxied(tmp_path, "--proxy-headers") as (_, proxy):
        outside = proxy.removeprefix("http://").rpartition(":")[0]
        assert _client_host(proxy) == outside
        local_host = {"host": f"127.0.0.1:{proxy.rpartition(':')[2]}"}
        remote = httpx.get(f"{proxy}/admin/actors", headers=local_host, timeout=WAIT)
        assert remote.status_code == 403, remote.text
        # A client on this host through the proxy is the operator again.
        local_proxy = proxy.replace(outside, "127.0.0.1", 1)
        assert httpx.get(f"{local_proxy}/admin/actors", timeout=WAIT).status_code == 200
        # A remote client cannot claim to be local: the proxy appends the real hop.
        spoofed = httpx.get(
            f"{proxy}/admin/actors",
            headers={"x-forwarded-for": "127.0.0.1", **local_host},
            timeout=WAIT,
        )
        assert spoofed.status_code == 403, spoofed.text


def test_forwarded_headers_of_an_untrusted_peer_are_ignored(tmp_path: Path) -> None:
    """The proxy's address is not among the trusted ones: its X-Forwarded-For is not
    believed for the client's address, and its requests are still not local."""
    with _proxied(tmp_path, "--proxy-headers", "--trusted-proxy", "10.9.9.9") as (_, proxy):
        assert _client_host(proxy) == "127.0.0.1"
        local_host = {"host": f"127.0.0.1:{proxy.rpartition(':')[2]}"}
        refused = httpx.get(f"{proxy}/admin/actors", headers=local_host, timeout=WAIT)
        assert refused.status_code == 403, refused.text
