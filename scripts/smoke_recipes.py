"""The container recipes' smoke test: runs what deploy/Dockerfile and the two compose files
run, in a clean venv on this machine, where no container engine is needed.

``python scripts/smoke_recipes.py`` (CI runs it from .ci/run; PostgreSQL and HAProxy must be
installed, as they are for the suite):

1. **The image.** Each instruction of deploy/Dockerfile is carried out with the image's paths
   mapped into a temporary folder (``/src``, ``/opt/perdure``, ``/app``, ``/data``): its
   COPY lines copy the build context as ``.dockerignore`` filters it, its RUN lines run as
   written (the same venv and ``pip install`` of the checkout), ENV and WORKDIR apply. Only
   the parts of a RUN line that manage the OS user (``useradd``, ``chown``) are left out:
   they need root and change the machine.
2. **One node** (deploy/compose.yaml): the service's command, which must be the image's CMD,
   runs from that venv with the environment compose gives it (a generated PERDURE_TOKEN).
   The image's HEALTHCHECK passes; the seed's progress workflow takes two jobs through the
   Python client with the token, and a request without it is refused; SIGTERM stops it with
   status 0 within the service's grace period; started again on the same data, its state
   is there.
3. **Three nodes behind HAProxy** (deploy/compose.cluster.yaml, deploy/haproxy.cfg): the
   machine's PostgreSQL (a schema of its own) stands in for the ``postgres`` service and the
   machine's HAProxy runs the file as written; each service's name and port are mapped to a
   free loopback port in the commands and in the HAProxy file. Jobs go through HAProxy, one
   node is killed with SIGKILL, and the jobs sent afterwards are still applied, exactly once.

Every wait is bounded. Exits 0 when all of it worked, 1 with the reason when not.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DEPLOY = REPO / "deploy"
CONTAINER_PORT = 6420
START_TIMEOUT_S = 60.0
CONVERGE_TIMEOUT_S = 60.0
HTTP_TIMEOUT_S = 10.0
PG_DSN = os.environ.get("PERDURE_TEST_POSTGRES", "postgresql://127.0.0.1:5432/test")
# The RUN parts that manage the image's OS user: they need root and change the machine.
SKIPPED_COMMANDS = ("useradd", "chown")


# ------------------------------------------------------------------ the Dockerfile


@dataclass
class Image:
    """What carrying out the Dockerfile left: the environment, working folder, command and
    health check of a container started from it, in this machine's paths."""

    env: dict[str, str] = field(default_factory=dict)
    workdir: Path | None = None
    cmd: list[str] = field(default_factory=list)
    healthcheck: list[str] = field(default_factory=list)


def instructions(text: str) -> list[tuple[str, str]]:
    """The Dockerfile's instructions as (KEYWORD, arguments), continuation lines joined and
    comments dropped."""
    joined = re.sub(
        r"\\\n\s*",
        " ",
        "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#")),
    )
    result = []
    for line in joined.splitlines():
        if line.strip():
            keyword, _, rest = line.strip().partition(" ")
            result.append((keyword.upper(), rest.strip()))
    return result


def exec_form(args: str) -> list[str]:
    """A CMD's words: the JSON exec form is the only one the recipes use."""
    words = json.loads(args)
    if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
        raise ValueError(f"not an exec-form list: {args}")
    return words


class PathMap:
    """The image's absolute paths, each mapped to a folder under ``root``."""

    def __init__(self, root: Path, roots: tuple[str, ...]) -> None:
        self.mapped = {name: root / name.strip("/").replace("/", "-") for name in roots}

    def __call__(self, text: str) -> str:
        for name, local in sorted(self.mapped.items(), key=lambda kv: -len(kv[0])):
            text = re.sub(rf"(?<![\w/]){re.escape(name)}(?=/|\b|$)", str(local), text)
        return text


def ignored_by(patterns: list[str]) -> Callable[[str, list[str]], set[str]]:
    """A copytree ignore function for .dockerignore's patterns (relative to the context)."""

    def ignore(folder: str, names: list[str]) -> set[str]:
        relative = os.path.relpath(folder, REPO)
        skipped = set()
        for name in names:
            path = name if relative == "." else f"{relative}/{name}"
            for pattern in patterns:
                bare = pattern.removeprefix("**/")
                if fnmatch.fnmatch(path, pattern) or fnmatch.fnmatch(name, bare):
                    skipped.add(name)
        return skipped

    return ignore


def dockerignore() -> list[str]:
    lines = (REPO / ".dockerignore").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def build_image(paths: PathMap) -> Image:
    """Carry out deploy/Dockerfile's instructions on this machine (see the module doc)."""
    image = Image(env={"PATH": os.environ["PATH"]})
    for keyword, args in instructions((DEPLOY / "Dockerfile").read_text()):
        if keyword == "COPY":
            _copy(args, paths)
        elif keyword == "RUN":
            _run(args, paths, image)
        elif keyword == "ENV":
            for pair in shlex.split(args):
                name, _, value = pair.partition("=")
                image.env[name] = paths(
                    os.path.expandvars(value.replace("$PATH", image.env["PATH"]))
                )
        elif keyword == "WORKDIR":
            image.workdir = Path(paths(args))
            image.workdir.mkdir(parents=True, exist_ok=True)
        elif keyword == "CMD":
            image.cmd = exec_form(args)
        elif keyword == "HEALTHCHECK":
            image.healthcheck = exec_form(args.split(" CMD ", 1)[1])
    if not image.cmd or not image.healthcheck or image.workdir is None:
        raise AssertionError("the Dockerfile names no CMD, HEALTHCHECK or WORKDIR")
    return image


def _copy(args: str, paths: PathMap) -> None:
    words = args.split()
    if words[0].startswith("--from="):  # from the build stage: the same path in one venv
        source, target = words[1:]
        if paths(source) != paths(target):
            raise AssertionError(f"COPY {args}: the stages' paths differ")
        return
    source, target = words
    shutil.copytree(REPO / source, paths(target), ignore=ignored_by(dockerignore()))


def _run(args: str, paths: PathMap, image: Image) -> None:
    for part in args.split("&&"):
        command = paths(part.strip())
        if command.split()[0] in SKIPPED_COMMANDS:
            continue
        if command.startswith("mkdir "):
            command = command.replace("mkdir ", "mkdir -p ", 1)
        print(f"RUN {command}", flush=True)
        done = subprocess.run(
            ["bash", "-c", command], env=image.env, capture_output=True, text=True, timeout=600
        )
        if done.returncode != 0:
            raise AssertionError(
                f"RUN {command} exited {done.returncode}:\n"
                f"{done.stdout[-3000:]}{done.stderr[-3000:]}"
            )


# ------------------------------------------------------------------ processes


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@dataclass
class Process:
    """A command started with its output in a log file, killed on the way out."""

    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]


@contextmanager
def started(
    name: str, command: list[str], env: Mapping[str, str], cwd: Path, logs: Path
) -> Iterator[Process]:
    log = logs / f"{name}.log"
    with log.open("ab") as out:
        popen = subprocess.Popen(
            command, cwd=cwd, env=dict(env), stdout=out, stderr=subprocess.STDOUT
        )
    process = Process(name, popen, log)
    try:
        yield process
    finally:
        if popen.poll() is None:
            popen.kill()
        popen.wait(timeout=30)


def stop(process: Process, grace_s: float) -> None:
    """SIGTERM, as ``docker stop`` sends; the server must exit 0 within the grace period."""
    process.popen.send_signal(signal.SIGTERM)
    status = process.popen.wait(timeout=grace_s)
    if status != 0:
        raise AssertionError(f"{process.name} exited {status} after SIGTERM:\n{process.output()}")


def wait_until(what: str, check: Callable[[], bool], timeout_s: float, *procs: Process) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for proc in procs:
            if proc.popen.poll() is not None:
                raise AssertionError(
                    f"{proc.name} exited ({proc.popen.returncode}):\n{proc.output()}"
                )
        try:
            if check():
                return
        except Exception:  # not yet: the check is retried until the deadline
            pass
        time.sleep(0.2)
    raise AssertionError(f"{what} did not happen within {timeout_s} s")


def grace_of(service: Mapping[str, Any]) -> float:
    text = str(service.get("stop_grace_period", "10s"))
    return float(text.removesuffix("s"))


def substitute_ports(words: list[str], ports: Mapping[str, str]) -> list[str]:
    """``words`` with each ``host:port`` (or bare port) of ``ports`` replaced where it
    stands alone: not inside a longer name or number (a random schema name may hold the
    digits of a port)."""
    out = []
    for word in words:
        for old, new in ports.items():
            word = re.sub(rf"(?<![\w.-]){re.escape(old)}(?!\w)", new, word)
        out.append(word)
    return out


# ------------------------------------------------------------------ compose files


def compose(name: str, variables: Mapping[str, str]) -> dict[str, Any]:
    """A compose file with its ``${NAME}`` / ``${NAME:?message}`` variables filled in from
    ``variables`` (as ``docker compose`` would from the shell); a missing one fails."""
    import yaml

    def fill(match: re.Match[str]) -> str:
        if match.group(1) not in variables:
            raise AssertionError(f"{name} wants ${{{match.group(1)}}}, which is not set")
        return variables[match.group(1)]

    text = re.sub(r"\$\{(\w+)(?::\?[^}]*)?\}", fill, (DEPLOY / name).read_text())
    loaded: dict[str, Any] = yaml.safe_load(text)
    return loaded


def service_env(image: Image, service: Mapping[str, Any]) -> dict[str, str]:
    env = dict(image.env)
    env.update({k: str(v) for k, v in (service.get("environment") or {}).items()})
    return env


# ------------------------------------------------------------------ what a user does


def progress_sum(url: str, token: str, key: str) -> int:
    from perdure.client import Client

    with Client(url, token=token) as client:
        state = client.actor("progressActor").get_or_create(key).getState()
    total: int = state["sum"]
    return total


def send_job(url: str, token: str, key: str, value: int, idempotency_key: str) -> None:
    """Send one job, again while its outcome is unknown (a node died under it): the key
    makes a retry of a send that did land a no-op, so each job counts once."""
    from perdure.client import Client

    deadline = time.monotonic() + CONVERGE_TIMEOUT_S
    while True:
        try:
            with Client(url, token=token) as client:
                handle = client.actor("progressActor").get_or_create(key)
                handle.send("jobs", {"value": value}, idempotency_key=idempotency_key)
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.3)


def status_of(url: str, token: str | None = None) -> int:
    request = urllib.request.Request(url)
    if token:
        request.add_header("authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_S) as answer:
            status: int = answer.status
    except urllib.error.HTTPError as refused:
        status = refused.code
    return status


def healthy(image: Image, port: int) -> bool:
    command = substitute_ports(image.healthcheck, {str(CONTAINER_PORT): str(port)})
    return subprocess.run(command, env=image.env, capture_output=True, timeout=10).returncode == 0


# ------------------------------------------------------------------ the three checks


def check_one_node(image: Image, root: Path) -> None:
    token = secrets.token_hex(16)
    service = compose("compose.yaml", {"PERDURE_TOKEN": token})["services"]["perdure"]
    if service["command"] != image.cmd:
        raise AssertionError(f"compose.yaml runs {service['command']}, the image {image.cmd}")
    port = free_port()
    command = substitute_ports(image.cmd, {str(CONTAINER_PORT): str(port)})
    url = f"http://127.0.0.1:{port}"
    env = service_env(image, service)
    assert image.workdir is not None
    for round_ in (1, 2):
        with started(f"one-node-{round_}", command, env, image.workdir, root) as node:
            wait_until(
                "the image's HEALTHCHECK", lambda: healthy(image, port), START_TIMEOUT_S, node
            )
            if round_ == 1:
                refused = status_of(
                    f"{url}/gateway/progressActor/action/getState?rvt-method=getOrCreate&rvt-key=a"
                )
                if refused not in (401, 403, 405):
                    raise AssertionError(f"a request without the token answered {refused}")
                send_job(url, token, "a", 5, "job-1")
                send_job(url, token, "a", 7, "job-2")
            wait_until(
                "both jobs applied",
                lambda: progress_sum(url, token, "a") == 12,
                CONVERGE_TIMEOUT_S,
                node,
            )
            stop(node, grace_of(service))
    print("one node: served, guarded by the token, stopped cleanly, kept its data")


def check_cluster(image: Image, root: Path) -> None:
    token, password = secrets.token_hex(16), secrets.token_hex(16)
    spec = compose("compose.cluster.yaml", {"PERDURE_TOKEN": token, "POSTGRES_PASSWORD": password})
    nodes = {name: s for name, s in spec["services"].items() if s.get("image") == "perdure:latest"}
    if sorted(nodes) != ["node-a", "node-b", "node-c"]:
        raise AssertionError(f"compose.cluster.yaml's nodes: {sorted(nodes)}")
    schema = f"smoke_{secrets.token_hex(4)}"
    local = {f"{name}:6421": f"127.0.0.1:{free_port()}" for name in nodes}
    balancer = free_port()
    try:
        with _cluster(image, root, nodes, local, schema) as procs:
            config = (
                (DEPLOY / "haproxy.cfg")
                .read_text()
                .replace("bind :6420", f"bind 127.0.0.1:{balancer}")
            )
            for old, new in local.items():
                config = config.replace(old, new)
            (root / "haproxy.cfg").write_text(config)
            haproxy = shutil.which("haproxy") or "/usr/sbin/haproxy"
            with started(
                "haproxy", [haproxy, "-db", "-f", str(root / "haproxy.cfg")], os.environ, root, root
            ) as lb:
                _drive_cluster(f"http://127.0.0.1:{balancer}", token, procs, lb)
    finally:
        _drop_schema(schema)
    print("three nodes behind HAProxy: served, lost a node to SIGKILL, every job applied once")


@contextmanager
def _cluster(
    image: Image, root: Path, nodes: Mapping[str, Any], local: Mapping[str, str], schema: str
) -> Iterator[dict[str, Process]]:
    assert image.workdir is not None
    store = f"{PG_DSN}?schema={schema}"
    procs: dict[str, Process] = {}
    with ExitStack() as stack:
        for name, service in nodes.items():
            words = [
                w.replace("postgresql://perdure@postgres:5432/perdure?schema=perdure", store)
                for w in service["command"]
            ]
            port = local[f"{name}:6421"].rsplit(":", 1)[1]
            words = substitute_ports(words, {**local, "6421": port})
            if [w for w in words if "postgres" in w and not w.startswith(PG_DSN)]:
                raise AssertionError(f"{name}'s store is not the one mapped: {words}")
            procs[name] = stack.enter_context(
                started(name, words, service_env(image, service), image.workdir, root)
            )
        for name, proc in procs.items():
            url = "http://" + local[f"{name}:6421"]
            wait_until(
                f"{name} healthy",
                lambda url=url: status_of(f"{url}/health") == 200,
                START_TIMEOUT_S,
                proc,
            )
        yield procs


def _drive_cluster(url: str, token: str, procs: Mapping[str, Process], lb: Process) -> None:
    wait_until("HAProxy up", lambda: status_of(f"{url}/health") == 200, START_TIMEOUT_S, lb)
    keys = [f"k{i}" for i in range(6)]
    for key in keys:
        send_job(url, token, key, 1, f"{key}-before")
    procs["node-a"].popen.kill()  # SIGKILL: its actors wait out the lease TTL, then move
    procs["node-a"].popen.wait(timeout=30)
    for key in keys:
        send_job(url, token, key, 10, f"{key}-after")
        send_job(url, token, key, 10, f"{key}-after")  # the same key again: applied once
    for key in keys:
        wait_until(
            f"{key}'s jobs applied",
            lambda key=key: progress_sum(url, token, key) == 11,
            CONVERGE_TIMEOUT_S,
            lb,
        )
    for name in ("node-b", "node-c"):
        stop(procs[name], 70)


def _drop_schema(schema: str) -> None:
    import psycopg

    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="perdure-recipes-") as folder:
        root = Path(folder)
        paths = PathMap(root, ("/src", "/opt/perdure", "/app", "/data"))
        try:
            image = build_image(paths)
            print("the image: built as deploy/Dockerfile builds it", flush=True)
            check_one_node(image, root)
            check_cluster(image, root)
        except Exception as exc:  # the reason is the script's answer
            print(f"smoke_recipes failed: {type(exc).__name__}: {exc}")
            return 1
    print("smoke_recipes passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
