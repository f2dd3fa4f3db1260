"""The shape of the source tree (docs/DESIGN.md §2, "The rooms").

import-linter (tests/test_layers.py) checks the layers and the runtime's face; these
checks cover what it does not: import circles (counting imports made only for type
checkers and imports inside functions, which import-linter's layers do not order), the
size of folders and modules, and that nothing inside the runtime imports the face that
lists it. Each check is first shown to fail on a small tree that breaks it.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

from tests.support.server import REPO_ROOT

SOURCE = REPO_ROOT / "src"
MAX_CIRCLE = 4
MAX_MODULES_PER_FOLDER = 15
MAX_LINES = 600


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules(root: Path) -> dict[str, Path]:
    return {_module_name(path, root): path for path in sorted(root.rglob("*.py"))}


def _imported(tree: ast.Module, module: str, is_package: bool) -> Iterable[str]:
    """Every name imported anywhere in ``tree`` (top level, ``TYPE_CHECKING`` blocks,
    function bodies); ``from X import Y`` gives ``X.Y``."""
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = parts[: len(parts) - (node.level - 1)]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            yield from (f"{source}.{alias.name}" for alias in node.names)


def import_graph(root: Path, package: str = "perdure") -> dict[str, set[str]]:
    """Module -> the modules of ``package`` it imports: for ``from X import Y``, the
    module ``X.Y`` if there is one, else ``X``."""
    modules = _modules(root)
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        for target in _imported(tree, name, path.name == "__init__.py"):
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name and target.split(".")[0] == package:
                graph[name].add(target)
    return graph


def circles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm,
    iterative: the graph is deep enough to make recursion a risk)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in graph:
        if start in index:
            continue
        work: list[tuple[str, Iterable[str]]] = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(iter(children), None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                group: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return found


def _folder(module: str, modules: Mapping[str, Path]) -> Path:
    return modules[module].parent


def _check_circles(root: Path) -> list[str]:
    modules = _modules(root)
    problems = []
    for group in circles(import_graph(root)):
        folders = {_folder(m, modules) for m in group}
        if len(folders) > 1:
            problems.append(f"an import circle spans {len(folders)} folders: {group}")
        if len(group) > MAX_CIRCLE:
            problems.append(f"an import circle of {len(group)} modules: {group}")
    return problems


def _write(root: Path, files: Mapping[str, str]) -> Path:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_the_circle_check_fails_on_a_circle_across_folders(tmp_path: Path) -> None:
    root = _write(
        tmp_path,
        {
            "perdure/__init__.py": "",
            "perdure/a/__init__.py": "",
            "perdure/a/one.py": "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n    from perdure.b.two import Two\n",
            "perdure/b/__init__.py": "",
            "perdure/b/two.py": "def f():\n    from perdure.a import one\n",
        },
    )
    (problem,) = _check_circles(root)
    assert "spans 2 folders" in problem
    assert "perdure.a.one" in problem
    assert "perdure.b.two" in problem


def test_the_circle_check_fails_on_a_long_circle(tmp_path: Path) -> None:
    files = {"perdure/__init__.py": ""}
    for i in range(5):
        files[f"perdure/m{i}.py"] = f"from perdure import m{(i + 1) % 5}\n"
    problems = _check_circles(_write(tmp_path, files))
    assert problems == [f"an import circle of 5 modules: {[f'perdure.m{i}' for i in range(5)]}"]


def test_no_import_circle_spans_two_folders_or_is_long() -> None:
    assert _check_circles(SOURCE) == []


def test_no_source_folder_holds_more_than_15_modules() -> None:
    crowded = {
        str(folder.relative_to(SOURCE)): count
        for folder in SOURCE.rglob("*")
        if folder.is_dir() and (count := len(list(folder.glob("*.py")))) > MAX_MODULES_PER_FOLDER
    }
    assert crowded == {}


def test_no_module_is_over_600_lines() -> None:
    long = {
        str(path.relative_to(SOURCE)): lines
        for path in SOURCE.rglob("*.py")
        if (lines := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}


def test_nothing_inside_the_runtime_imports_its_face() -> None:
    # The face imports every room; a room importing the face back would load it whole
    # (and could see it half-initialised).
    graph = import_graph(SOURCE)
    inside = [m for m in graph if m.startswith("perdure.runtime.")]
    assert inside, "the runtime's modules were not found"
    assert [m for m in inside if "perdure.runtime" in graph[m]] == []


def test_the_face_lists_the_runtime_rooms() -> None:
    # Every room the face names exists, and the graph sees the face's imports.
    assert {t.split(".")[2] for t in import_graph(SOURCE)["perdure.runtime"]} >= {
        "actor",
        "dispatch",
        "host",
        "kernel",
    }


def test_no_module_is_named_like_a_standard_library_module() -> None:
    # `inspect.py` or `queue.py` inside a package is one relative import away from
    # shadowing the standard library's, and misleads a reader either way.
    named = {
        str(path.relative_to(SOURCE))
        for path in (SOURCE / "perdure").rglob("*")
        if (path.is_dir() or path.suffix == ".py")
        and path.stem != "__init__"
        and path.stem in sys.stdlib_module_names
    }
    assert named == set()


def test_the_parts_of_an_actor_take_its_core_not_the_instance() -> None:
    # The queues, schedules, event log, kernel, contexts and connections know the actor
    # through ActorCore (or a protocol of their own); only the instance's room composes.
    runtime = SOURCE / "perdure" / "runtime"
    parts = [
        *(runtime / room for room in ("queues", "schedules", "events", "kernel")),
        runtime / "actor" / "contexts.py",
        runtime / "actor" / "connections.py",
    ]
    files = [p for part in parts for p in ([part] if part.is_file() else part.glob("*.py"))]
    assert len(files) >= 14
    assert [str(p.relative_to(SOURCE)) for p in files if "ActorInstance" in p.read_text()] == []
