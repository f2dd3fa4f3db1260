"""What every admin command shares: the admin API's HTTP client (:class:`AdminApi`), the
actor a command names (its arguments and resolving them), JSON output and confirmation.

The admin commands are clients of the admin API over HTTP: this module, like them, loads
no engine module.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from typing import Any

import httpx

from perdure._version import __version__
from perdure.cli.admin_report import actor_label
from perdure.errors import PerdureError
from perdure.keys import Key, normalize_key, serialize_key

__all__ = [
    "DEFAULT_URL",
    "Actor",
    "AdminApi",
    "AdminCliError",
    "Json",
    "Subparsers",
    "add_actor_arguments",
    "check_actor_name",
    "confirmed",
    "print_json",
    "resolve_actor",
]


DEFAULT_URL = "http://127.0.0.1:6420"


Subparsers = argparse._SubParsersAction  # the type add_subparsers returns


Json = Any


class AdminCliError(Exception):
    """A failure to report on stderr: ``perdure: error: MESSAGE``, then an optional hint."""

    def __init__(self, message: str, *, hint: str | None = None, status: int = 1) -> None:
        super().__init__(message)
        self.hint = hint
        self.status = status


def add_actor_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", metavar="NAME", help="the actor's name")
    parser.add_argument(
        "key",
        metavar="KEY",
        nargs="*",
        help="the actor's key, one argument per part (none: the empty key)",
    )


class AdminApi:
    """The admin API of one server, over one HTTP connection pool."""

    def __init__(self, url: str, token: str | None, timeout: float) -> None:
        if not url.startswith(("http://", "https://")):
            raise AdminCliError(f"--url must be an http:// or https:// URL, got {url!r}", status=2)
        self.url = url.rstrip("/")
        self.timeout = timeout
        headers = {"user-agent": f"perdure-cli/{__version__}"}
        if token:
            headers["authorization"] = f"Bearer {token}"
        self._http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout)

    def __enter__(self) -> AdminApi:
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.close()

    def call(self, method: str, path: str, **options: Any) -> Json:
        """Send one request (httpx ``params=``, ``json=``); the decoded JSON answer."""
        try:
            response = self._http.request(method, path, **options)
        except (httpx.ConnectError, httpx.ConnectTimeout):
            raise AdminCliError(f"no server answers at {self.url}") from None
        except httpx.TimeoutException:
            raise AdminCliError(
                f"the server at {self.url} did not answer within {self.timeout:g} s",
                hint="a longer --timeout waits longer",
            ) from None
        except httpx.HTTPError as exc:
            raise AdminCliError(f"cannot talk to the server at {self.url}: {exc}") from None
        if not response.is_success:
            raise _refusal(response, f"{method} {path}")
        try:
            return response.json()
        except ValueError:
            raise AdminCliError(
                f"the server at {self.url} answered {method} {path} with something not JSON"
            ) from None


def _refusal(response: httpx.Response, request: str) -> AdminCliError:
    """The error a non-2xx answer reports: perdure's error body, or the bare status."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if not (isinstance(body, dict) and {"group", "code", "message"} <= body.keys()):
        return AdminCliError(
            f"the server answered HTTP {response.status_code} to {request}",
            hint="is it a perdure server with the admin API on (not --no-admin)?"
            if response.status_code == 404
            else None,
        )
    message = f"{body['message']} ({body['group']}.{body['code']})"
    return AdminCliError(message, hint=_access_hint(response.status_code, str(body["message"])))


def _access_hint(status: int, message: str) -> str | None:
    if status == 401:
        return "pass the server's admin token with --token TOKEN (or PERDURE_ADMIN_TOKEN)"
    # Other refusals (--no-admin, a foreign Origin) say all there is to say themselves.
    if status == 403 and "loopback" in message:
        return (
            "run this command on the server's host with a loopback --url "
            "(http://127.0.0.1:PORT), or start the server with --admin-token and pass the "
            "token here with --token"
        )
    return None


@dataclass(frozen=True, slots=True)
class Actor:
    """An actor resolved from its name and key."""

    actor_id: str
    name: str
    key: Key

    @property
    def label(self) -> str:
        """``name [key]``, the key in its serialised form."""
        return actor_label(self.name, self.key)


def resolve_actor(api: AdminApi, args: argparse.Namespace) -> Actor:
    """The actor ``NAME KEY…`` names, by the management API; ``actor.not_found`` if none."""
    try:
        key = normalize_key(list(args.key))
    except PerdureError as exc:
        raise AdminCliError(f"bad key: {exc}", status=2) from None
    answer = api.call("GET", "/actors", params={"name": args.name, "key": serialize_key(key)})
    actors = answer.get("actors") if isinstance(answer, dict) else None
    if not actors:
        check_actor_name(api, args.name)
        raise AdminCliError(
            f"no actor {actor_label(args.name, key)} on the server at {api.url} (actor.not_found)"
        )
    return Actor(str(actors[0]["actor_id"]), args.name, key)


def check_actor_name(api: AdminApi, name: str) -> None:
    """Say so when the server has no actor type ``name`` at all (a typo, most likely)."""
    answer = api.call("GET", "/actors/names")
    names = sorted(answer.get("names") or {}) if isinstance(answer, dict) else []
    if names and name not in names:
        raise AdminCliError(
            f"the server at {api.url} has no actor type {name!r} (actor.unknown_name)",
            hint=f"its actor types: {', '.join(names)}",
        )


def print_json(value: Json) -> None:
    print(json.dumps(value, indent=2, ensure_ascii=False))


def confirmed(yes: bool, doing: str, question: str, declined: str) -> bool:
    """True with ``--yes`` or when the user answers yes on a terminal; ``declined`` is
    printed otherwise. Without a terminal to ask on, refuses (exit status 2)."""
    if yes:
        return True
    if not sys.stdin.isatty():
        raise AdminCliError(
            f"not {doing} without --yes (stdin is not a terminal to ask on)", status=2
        )
    if _confirm(question):
        return True
    print(declined, file=sys.stderr)
    return False


def _confirm(question: str) -> bool:
    try:
        answer = input(f"{question} [y/N] ")
    except (EOFError, KeyboardInterrupt):
        print(file=sys.stderr)
        return False
    return answer.strip().lower() in ("y", "yes")
