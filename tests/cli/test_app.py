"""``perdure.cli.app`` pieces that need no server: loading a registry, printing values."""

from __future__ import annotations

import datetime as dt
import sys
from decimal import Decimal
from pathlib import Path

import pytest

from perdure.cli.app import CliError, _parser, load_registry, main, plain
from perdure.registry import Registry

REGISTRY_FILE = """
from perdure import actor, setup
registry = setup(use={"thing": actor(state={}, actions={"get": lambda c: c.state})})
not_a_registry = 42
"""


def test_load_registry_from_module() -> None:
    registry = load_registry("tests.support.apps.server:registry")
    assert isinstance(registry, Registry)
    assert "counter" in registry.actors


def test_load_registry_from_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Loading a file puts its directory on sys.path and the module in sys.modules.
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setattr(sys, "modules", dict(sys.modules))
    path = tmp_path / "my_app_for_cli_test.py"
    path.write_text(REGISTRY_FILE)
    assert set(load_registry(f"{path}:registry").actors) == {"thing"}


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("no_colon", "expected module:attribute"),
        ("tests.support.apps.server:nope", "has no attribute"),
        ("tests.no_such_module_here:registry", "cannot import"),
        ("missing/file.py:registry", "no such file"),
        ("tests.support.apps.server:counter", "not a registry"),
    ],
)
def test_load_registry_errors(spec: str, message: str) -> None:
    with pytest.raises(CliError, match=message):
        load_registry(spec)


def test_serve_with_a_bad_registry_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "tests.support.apps.server:nope", "--store", "memory://"]) == 2
    assert "has no attribute" in capsys.readouterr().err


def test_serve_tunes_the_collector_unless_told_not_to() -> None:
    assert _parser().parse_args(["serve", "app:registry"]).gc_tuning is True
    args = _parser().parse_args(["serve", "app:registry", "--no-gc-tuning"])
    assert args.gc_tuning is False


def test_plain_makes_stored_values_printable() -> None:
    value = {
        1: b"\x00\x01",
        "when": dt.datetime(2026, 1, 2, tzinfo=dt.UTC),
        "amount": Decimal("1.50"),
        "tags": {"b", "a"},
        "nested": ({"x": None},),
    }
    assert plain(value) == {
        "1": "AAE=",
        "when": "2026-01-02T00:00:00+00:00",
        "amount": "1.50",
        "tags": ["a", "b"],
        "nested": [{"x": None}],
    }
