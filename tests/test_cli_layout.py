"""The layout of ``threadloom/cli/``: its modules import each other without a circle
(the old ``cli_demo -> cli_run -> cli_demo``), none imports the package's ``__init__``
(which assembles the app from them), and each stays under 400 lines."""

from __future__ import annotations

import ast
from pathlib import Path

CLI = Path(__file__).resolve().parents[1] / "threadloom" / "cli"


def _imports(path: Path) -> set[str]:
    """The ``threadloom.cli`` modules ``path`` imports, at any depth of its code."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "threadloom.cli":
                found.update(f"threadloom.cli.{a.name}" for a in node.names
                             if (CLI / f"{a.name}.py").is_file())
                if any(not (CLI / f"{a.name}.py").is_file() for a in node.names):
                    found.add("threadloom.cli")
            elif node.module.startswith("threadloom.cli."):
                found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("threadloom.cli"))
    return found


def _graph() -> dict[str, set[str]]:
    modules = {f"threadloom.cli.{p.stem}": p for p in CLI.glob("*.py")
               if p.stem not in ("__init__", "__main__")}
    return {name: _imports(path) for name, path in modules.items()}


def test_the_cli_modules_import_each_other_without_a_circle():
    graph = _graph()
    assert len(graph) >= 10, sorted(graph)  # the walk found the package
    done: set[str] = set()

    def visit(name: str, path: tuple[str, ...]) -> None:
        assert name not in path, f"import circle: {' -> '.join((*path, name))}"
        if name in done:
            return
        for imported in graph.get(name, ()):
            visit(imported, (*path, name))
        done.add(name)

    for name in graph:
        visit(name, ())


def test_no_cli_module_imports_the_package_init():
    importers = sorted(name for name, imported in _graph().items()
                       if "threadloom.cli" in imported)
    assert importers == []


def test_every_cli_module_is_under_400_lines():
    sizes = {p.name: len(p.read_text("utf-8").splitlines()) for p in CLI.glob("*.py")}
    assert {name: n for name, n in sizes.items() if n >= 400} == {}
