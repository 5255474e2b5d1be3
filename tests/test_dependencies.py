"""Every third-party module threadloom imports is declared in pyproject.toml.

A fresh install only has what pyproject declares: an undeclared import works on a
developer's machine and breaks for a new user.
"""

from __future__ import annotations

import ast
import importlib.metadata as md
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _declared() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    specs = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        specs.extend(extra)
    return {re.split(r"[\[<>=!~ ;]", s, maxsplit=1)[0].lower().replace("_", "-") for s in specs}


def _imported() -> dict[str, str]:
    found: dict[str, str] = {}
    for path in (ROOT / "threadloom").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                top = name.split(".")[0]
                if top != "threadloom" and top not in sys.stdlib_module_names:
                    found.setdefault(top, str(path.relative_to(ROOT)))
    return found


def test_every_third_party_import_is_a_declared_dependency():
    declared = _declared()
    dists = md.packages_distributions()
    missing = []
    for module, where in sorted(_imported().items()):
        names = {d.lower().replace("_", "-") for d in dists.get(module, [module])}
        if not names & declared:
            missing.append(f"{module} (imported in {where}; distributions {sorted(names)})")
    assert not missing, "undeclared imports: " + "; ".join(missing)
