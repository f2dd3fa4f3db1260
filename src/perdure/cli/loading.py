"""What the commands that open a store share: the store options (``--data``,
``--store``) and opening the store they name, loading the registry a command is given,
seconds as an argument, and :class:`CliError`."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

from perdure.registry import Registry
from perdure.store import open_store
from perdure.store.base import Store

__all__ = [
    "DATABASE_FILE",
    "DEFAULT_DATA_DIR",
    "CliError",
    "add_store_options",
    "load_registry",
    "open_store_at",
    "positive_seconds",
    "store_url",
]

DEFAULT_DATA_DIR = ".perdure"
DATABASE_FILE = "perdure.db"


class CliError(Exception):
    """A usage problem reported as ``error: …`` with exit status 2."""


def positive_seconds(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        seconds = 0.0
    if not 0 < seconds < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, not {text!r}")
    return seconds


def add_store_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data",
        default=DEFAULT_DATA_DIR,
        help=f"data directory; the SQLite file {DATABASE_FILE} lives inside "
        f"(default ./{DEFAULT_DATA_DIR})",
    )
    parser.add_argument(
        "--store",
        help="store URL, overrides --data (memory://, sqlite:///path.db, a path, "
        "postgresql://user@host/db?schema=name)",
    )


def store_url(args: argparse.Namespace, *, create: bool) -> str:
    if args.store:
        return str(args.store)
    data = Path(args.data)
    if create:
        data.mkdir(parents=True, exist_ok=True)
    elif not (data / DATABASE_FILE).exists():
        raise CliError(f"no perdure database in {data} (looked for {data / DATABASE_FILE})")
    return str(data / DATABASE_FILE)


def load_registry(spec: str) -> Registry:
    """Import ``module:attr`` or ``path/to/file.py:attr`` and return the registry."""
    target, sep, attr = spec.rpartition(":")
    if not sep or not target or not attr:
        raise CliError(f"expected module:attribute or file.py:attribute, got {spec!r}")
    try:
        module = _import_file(target) if _looks_like_path(target) else _import_module(target)
    except CliError:
        raise
    except ImportError as exc:
        raise CliError(f"cannot import {target!r}: {exc}") from exc
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise CliError(f"{target!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if not isinstance(obj, Registry):
        raise CliError(f"{spec} is a {type(obj).__name__}, not a registry (use setup(use=...))")
    return obj


def _looks_like_path(target: str) -> bool:
    return target.endswith(".py") or "/" in target or os.sep in target


def _import_file(target: str) -> Any:
    path = Path(target).resolve()
    if not path.is_file():
        raise CliError(f"no such file: {target}")
    # Let the file import its siblings, as `python path/to/file.py` would.
    sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    if spec is None or spec.loader is None:
        raise CliError(f"cannot load {target}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module


def _import_module(target: str) -> Any:
    # `perdure serve app:registry` should find app.py in the current directory, as
    # `python -m` and uvicorn do.
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)
    return importlib.import_module(target)


def open_store_at(url: str, *, exclusive: bool = True, store_timeout: float | None = None) -> Store:
    try:
        return open_store(url, exclusive=exclusive, store_timeout=store_timeout)
    except ValueError as exc:
        raise CliError(str(exc)) from exc
