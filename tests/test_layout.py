"""The house rules of docs/design.md, checked on the source: imports point downward in the
order its "import order:" line gives, and modules and functions stay small."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "threadloom"
DESIGN = ROOT / "docs" / "design.md"
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60  # the body, docstring left out
# Kept only so that outside code importing the earlier paths keeps working.
COMPAT_MODULES = {"threadloom.engine.errors", "threadloom.engine.types"}


def import_levels(text: str) -> dict[str, int]:
    """``{"errors": 0, ..., "cli": 12}`` from the design's ``import order:`` line, where
    ``<`` separates levels and ``,`` names units of one level."""
    lines = [line for line in text.splitlines() if line.startswith("import order:")]
    if len(lines) != 1:
        raise ValueError(f"docs/design.md needs exactly one 'import order:' line, has {lines}")
    levels: dict[str, int] = {}
    for level, group in enumerate(lines[0].split(":", 1)[1].split("<")):
        for unit in group.split(","):
            levels[unit.strip()] = level
    return levels


def unit_of(module: str) -> str | None:
    """The top-level unit of a ``threadloom.*`` module name (``threadloom.engine.tasks`` ->
    ``engine``), ``""`` for the package itself, None outside threadloom."""
    parts = module.split(".")
    if parts[0] != "threadloom":
        return None
    return parts[1] if len(parts) > 1 else ""


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(tree: ast.AST, here: str, is_package: bool) -> list[tuple[int, str]]:
    """Every threadloom module ``tree`` imports, anywhere (functions and TYPE_CHECKING
    blocks included), as ``(line, absolute module name)``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                name = ".".join([*base, node.module] if node.module else base)
            else:
                name = node.module or ""
            found.append((node.lineno, name))
    return [(line, name) for line, name in found if unit_of(name) is not None]


def upward_imports(source: str, module: str, levels: dict[str, int],
                   is_package: bool = False) -> list[str]:
    """The imports of ``source`` (the module ``module``) that break the import order."""
    unit = unit_of(module)
    problems = []
    for line, target in imported_modules(ast.parse(source), module, is_package):
        if target in COMPAT_MODULES and module not in COMPAT_MODULES:
            problems.append(f"{module}:{line} imports {target}, a re-export kept for "
                            "outside code; import from threadloom.errors / threadloom.types")
            continue
        if unit == "":  # threadloom/__init__.py re-exports the public API
            continue
        dest = unit_of(target)
        if dest == unit or dest == "":
            if dest == "":
                problems.append(f"{module}:{line} imports the threadloom package itself")
            continue
        if unit not in levels or dest not in levels:
            problems.append(f"{module}:{line}: {unit or dest!r} is not in the import order")
        elif levels[dest] >= levels[unit]:
            problems.append(f"{module}:{line} imports {target} ({dest} is not below {unit})")
    return problems


def test_the_design_names_every_unit_of_the_package() -> None:
    levels = import_levels(DESIGN.read_text())
    units = {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir()
             if (p.is_dir() and (p / "__init__.py").exists())
             or (p.suffix == ".py" and p.name != "__init__.py")}
    assert units - set(levels) == set(), "units missing from docs/design.md's import order"


def test_imports_point_downward() -> None:
    levels = import_levels(DESIGN.read_text())
    problems = []
    for path in sorted(PACKAGE.rglob("*.py")):
        problems += upward_imports(path.read_text(), module_name(path), levels,
                                   is_package=path.name == "__init__.py")
    assert problems == []


def test_the_checker_catches_an_upward_import() -> None:
    levels = import_levels("import order: errors < checkpoint < engine < cli")
    up = "from threadloom.engine.tasks import Task\n"
    assert upward_imports(up, "threadloom.checkpoint.stored", levels) == [
        "threadloom.checkpoint.stored:1 imports threadloom.engine.tasks "
        "(engine is not below checkpoint)"
    ]
    lazy = "def f():\n    from threadloom.cli import main\n"
    assert upward_imports(lazy, "threadloom.engine.graph", levels) != []
    relative = "from ..engine import tasks\n"
    assert upward_imports(relative, "threadloom.checkpoint.stored", levels) != []
    compat = "from threadloom.engine.errors import CheckpointError\n"
    assert upward_imports(compat, "threadloom.cli.common", levels) != []
    down = "from threadloom.errors import CheckpointError\nfrom threadloom.checkpoint import x\n"
    assert upward_imports(down, "threadloom.engine.graph", levels) == []


def _function_lengths(tree: ast.AST) -> list[tuple[str, int, int]]:
    rows = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            start = node.body[0].lineno
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str) and len(node.body) > 1:
                start = node.body[1].lineno
            rows.append((node.name, node.lineno, (node.end_lineno or start) - start + 1))
    return rows


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(
    p.relative_to(PACKAGE)))
def test_modules_and_functions_stay_small(path: Path) -> None:
    source = path.read_text()
    assert source.count("\n") < MAX_MODULE_LINES, f"{path.name} has over {MAX_MODULE_LINES} lines"
    long = [f"{name} (line {line}): {n} lines" for name, line, n in
            _function_lengths(ast.parse(source)) if n > MAX_FUNCTION_LINES]
    assert long == []


def test_the_length_rule_counts_bodies_without_docstrings() -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(61))
    source = f'def f():\n    """Doc.\n\n    More.\n    """\n{body}\n'
    assert _function_lengths(ast.parse(source)) == [("f", 1, 61)]
    assert re.fullmatch(r"\d+", str(MAX_FUNCTION_LINES))
