"""``perdure types``: the committed sample is what the command writes; the command's
``-o`` and ``--check``; what the generator makes of names and functions it cannot type;
its output as formatters leave it; a generated module used at run time."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import Literal

import pytest

from perdure.cli.app import main
from perdure.testing import ActorTestEnv
from perdure.typed.generate import generate
from tests.typed import edge_app
from tests.typing_sample import app

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "tests" / "typing_sample" / "app_types.py"
SPEC = "tests.typing_sample.app:registry"
EDGE_SPEC = "tests.typed.edge_app:registry"


def test_the_committed_sample_is_up_to_date() -> None:
    assert generate(app.registry, SPEC) == SAMPLE.read_text(), (
        f"run: perdure types {SPEC} -o {SAMPLE.relative_to(ROOT)}"
    )


def test_the_command_writes_prints_and_checks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "app_types.py"
    assert main(["types", SPEC, "--check", "-o", str(target)]) == 1
    assert "is missing" in capsys.readouterr().err
    assert main(["types", SPEC, "-o", str(target)]) == 0
    assert target.read_text() == SAMPLE.read_text()
    assert main(["types", SPEC, "--check", "-o", str(target)]) == 0
    target.write_text(target.read_text() + "# edited\n")
    assert main(["types", SPEC, "--check", "-o", str(target)]) == 1
    assert f"is out of date: run perdure types {SPEC} -o" in capsys.readouterr().err
    assert main(["types", SPEC]) == 0
    assert capsys.readouterr().out == SAMPLE.read_text()
    assert main(["types", SPEC, "--check"]) == 2  # nothing to check
    assert main(["types", "tests.typing_sample.app:nothing"]) == 2


def test_what_cannot_be_typed_or_named_is_said() -> None:
    text = generate(edge_app.registry, EDGE_SPEC)
    # Lambdas, closures, bound methods and partials: any arguments, an Any result.
    for name in ("closure", "bound", "partial"):
        assert f'    {name} = untyped_action("{name}")\n' in text
    assert '    echo = action("echo", lambda: _edge_app.echo)\n' in text
    # Names that cannot be attributes, listed where the actions would be.
    assert '    # "get-state", "send", "on", "class", "workflow_result"\n' in text
    # Nested mappings are nested groups; inside one, `send` is a name like any other.
    assert '    deep = action("outer.inner.deep", lambda: _edge_app.deep)\n' in text
    assert '    send = action("outer.send", lambda: _edge_app.echo)\n' in text
    assert "    inner = group(CornersOuterInner, SyncCornersOuterInner)\n" in text
    # Actor names: the identifier keeps its name, the others are made one or reached
    # by name; class names never collide.
    assert '        return self._accessor("my_counter", MyCounter2Handle)\n' in text
    assert '    # `my-counter`: `client.untyped.actor("my-counter")`\n' in text
    assert '        return self._accessor("2fa", Actor2faHandle)\n' in text
    assert '    # `close`: `client.untyped.actor("close")`\n' in text
    # Events declared as none: no name fits; undeclared: any string.
    assert "class CornersConnection(_CornersActions, TypedConnection[Never]):\n" in text
    assert "class MyCounter2Connection(_MyCounter2Actions, TypedConnection[str]):\n" in text
    # A queue whose schema cannot be written (a NewType) makes the bodies Any; one that
    # names the app is a string where it would be evaluated at import.
    assert 'TypedHandle[Literal["items", "maybe", "choice", "money"], Any]' in text
    assert 'TypedWorkflowHandle[Literal["jobs", "more"], "_edge_app.Item"]' in text
    assert "    workflow_result = workflow_output(lambda: _edge_app.run)\n" in text
    # The input of `my_counter` is a TypedDict.
    assert "TypedAccessor[MyCounter2Handle, _edge_app.Setup]" in text
    assert generate(edge_app.registry, EDGE_SPEC) == text  # deterministic


def test_schemas_that_can_be_written() -> None:
    from perdure import actor, queue, setup

    registry = setup(
        use={
            "a": actor(queues={"q": queue(list[edge_app.Item])}),
            "b": actor(queues={"q": queue(int | None), "r": queue(dict[str, int])}),
            "c": actor(queues={"q": queue(Literal["x", 2])}),
        }
    )
    text = generate(registry, "x:registry")
    assert 'TypedHandle[Literal["q"], "list[_edge_app.Item]"]' in text
    assert 'TypedHandle[Literal["q", "r"], int | None | dict[str, int]]' in text
    assert 'TypedHandle[Literal["q"], Literal["x", 2]]' in text


def _require(module: str) -> None:
    if importlib.util.find_spec(module) is None:
        message = f"{module} is not installed: pip install -e '.[dev]'"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


@pytest.mark.parametrize("width", [88, 100, 120])
def test_formatters_leave_the_output_as_it_is(tmp_path: Path, width: int) -> None:
    _require("ruff")
    for name, text in (
        ("sample.py", generate(app.registry, SPEC)),
        ("edge.py", generate(edge_app.registry, EDGE_SPEC)),
    ):
        (tmp_path / name).write_text(text)
    command = [sys.executable, "-m", "ruff", "format", "--check", "--diff", "--isolated"]
    result = subprocess.run(
        [*command, "--line-length", str(width), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]


async def test_a_generated_module_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "edge_types.py").write_text(generate(edge_app.registry, EDGE_SPEC))
    monkeypatch.syspath_prepend(str(tmp_path))
    import edge_types  # type: ignore[import-not-found]

    async with ActorTestEnv(edge_app.registry) as env:
        client = edge_types.AppClient(env.client)
        corners = client.corners.get_or_create("c")
        assert await corners.echo("ab", times=2) == "abab"
        assert await corners.closure(7) == 7
        assert await corners.bound() == "bound"
        assert await corners.partial("x") == ">x"
        assert await corners.outer.inner.deep() == 3
        assert await corners.outer.send("z") == "z"
        assert await corners.hidden() == edge_app.Item(name="hidden")
        assert await corners.untyped.action("get-state") == "state"
        with pytest.raises(TypeError, match="`loud` is keyword-only"):
            await corners.echo("a", loud=True)
        assert await client.actor_2fa.get_or_create("k").resolve()
        assert await client.untyped.actor("close").get_or_create("k").echo("c") == "c"
