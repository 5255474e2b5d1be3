"""Every third-party module the repository imports is declared in pyproject.toml, in a
group that installs it where it is imported.

A fresh install only has what pyproject declares: an undeclared import works on a
developer's machine and breaks for a new user (issue 14: ``httpx``, imported by a test,
came with ``openai`` until ``openai`` moved to ``httpx2``).

What is read: every ``import`` and ``from ... import`` under ``threadloom/``, ``tests/``,
``benchmarks/`` and the code cells of ``notebooks/*.ipynb``, wherever it sits (inside
functions, ``try``/``except ImportError`` blocks), plus the string literal given to
``pytest.importorskip`` or ``importlib.import_module`` (a skip on an undeclared module
would otherwise hide it; ``find_spec`` only asks whether a module is there, and is not
read). The standard library and first-party modules
(``threadloom``, the helper modules of ``tests/`` and ``benchmarks/``) are left out. A
module maps to its distributions through ``importlib.metadata.packages_distributions()``;
the distribution (PEP 503 name) must be declared in:

- ``threadloom/``: ``[project.dependencies]`` or any extra;
- ``tests/``, ``notebooks/``: the dependencies, ``dev`` or ``server`` (the README's test
  command installs both; the server tests start the real server);
- ``benchmarks/``: the dependencies, ``bench``, ``dev`` or ``server``.

A module that no installed distribution provides fails, naming the file and the module.
The one exception is a peer that the benchmarks import lazily while the ``bench`` extra is
not installed (the README's test command does not install it): such a module passes only
when its distribution (its own name, or the name in ``UNINSTALLED_BENCH_NAMES``) is
declared in ``bench`` and is really absent from this environment.
"""

from __future__ import annotations

import ast
import importlib.metadata as md
import json
import re
import sys
import tomllib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DEPS = ""  # the group name used here for [project.dependencies]
# Where a module is imported -> the groups that may declare its distribution (None: any).
ALLOWED: dict[str, frozenset[str] | None] = {
    "threadloom": None,
    "tests": frozenset({DEPS, "dev", "server"}),
    "notebooks": frozenset({DEPS, "dev", "server"}),
    "benchmarks": frozenset({DEPS, "bench", "dev", "server"}),
}
# Import name -> distribution, for bench peers whose import name is not their distribution
# name; used only while that distribution is not installed.
UNINSTALLED_BENCH_NAMES = {"haystack": "haystack-ai"}
_DYNAMIC = {"importorskip", "import_module"}
_REQ_NAME = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def normalize(name: str) -> str:
    """A distribution name in its PEP 503 form (``PyYAML`` -> ``pyyaml``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def declared_groups(pyproject: Mapping[str, object]) -> dict[str, set[str]]:
    """Normalized distribution name -> the groups declaring it (``""`` for dependencies).

    Args:
        pyproject: the parsed ``pyproject.toml``.
    """
    project: dict = pyproject["project"]  # type: ignore[assignment]
    groups = {DEPS: project.get("dependencies", []),
              **project.get("optional-dependencies", {})}
    out: dict[str, set[str]] = {}
    for group, specs in groups.items():
        for spec in specs:
            match = _REQ_NAME.match(spec)
            assert match, f"pyproject.toml: unreadable requirement {spec!r} in {group!r}"
            out.setdefault(normalize(match.group(1)), set()).add(group)
    return out


def imports_of(source: str) -> Iterator[tuple[str, int]]:
    """``(dotted module name, line)`` of every absolute import in ``source``.

    ``from a import b`` yields ``a.b`` (``b`` may be a submodule); relative imports are
    first-party and left out. Raises SyntaxError for source that does not parse.
    """
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                yield f"{node.module}.{alias.name}", node.lineno
        elif isinstance(node, ast.Call) and node.args:
            func, arg = node.func, node.args[0]
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in _DYNAMIC and isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                yield arg.value, node.lineno


def notebook_cells(text: str) -> Iterator[tuple[int, str]]:
    """``(cell number, Python source)`` of each code cell of an ``.ipynb`` text; IPython
    magics and shell lines (``%...``, ``!...``) become blank lines."""
    for number, cell in enumerate(json.loads(text)["cells"]):
        if cell.get("cell_type") != "code":
            continue
        source = cell["source"]
        source = "".join(source) if isinstance(source, list) else source
        lines = ["" if line.lstrip().startswith(("%", "!")) else line
                 for line in source.splitlines()]
        yield number, "\n".join(lines)


def first_party_modules(root: Path = ROOT) -> set[str]:
    """``threadloom`` and the modules that live in ``tests/`` and ``benchmarks/``."""
    names = {"threadloom"}
    for folder in ("tests", "benchmarks"):
        names |= {p.stem for p in (root / folder).rglob("*.py")}
    return names


@dataclass
class Environment:
    """What the check compares against: the declared groups, the installed modules."""

    declared: dict[str, set[str]]
    dists: Mapping[str, list[str]] = field(default_factory=md.packages_distributions)
    first_party: set[str] = field(default_factory=first_party_modules)

    def providers(self, dotted: str) -> set[str] | None:
        """The normalized distributions that provide module ``dotted``, or None when no
        installed distribution does. A top-level name shared by several distributions (a
        namespace such as ``opentelemetry``) is narrowed by the files each one installs."""
        found = self.dists.get(dotted.split(".")[0])
        if not found:
            return None
        names = {normalize(d) for d in found}
        if len(names) == 1:
            return names
        parts = dotted.split(".")
        for depth in range(len(parts), 1, -1):
            narrowed = {n for n in names if _installs(n, parts[:depth])}
            if narrowed:
                return narrowed
        return names


def _installs(dist: str, parts: list[str]) -> bool:
    """True when the installed distribution ``dist`` has the module ``parts`` among its
    files (``a/b.py`` or anything under ``a/b/``)."""
    stem = "/".join(parts)
    files = md.distribution(dist).files or []
    return any(str(f) == f"{stem}.py" or str(f).startswith(f"{stem}/") for f in files)


def _absent(dist: str) -> bool:
    try:
        md.distribution(dist)
    except md.PackageNotFoundError:
        return True
    return False


def problems_in(source: str, where: str, env: Environment) -> list[str]:
    """What is wrong with the imports of ``source`` read from ``where``.

    Args:
        source: Python source text.
        where: its path relative to the repository root (``tests/test_x.py``, or
            ``notebooks/n.ipynb cell 3``); its first folder chooses the allowed groups.
        env: the declared groups and installed modules.

    Returns:
        One message per undeclared or uninstalled module, naming ``where`` and the module.
    """
    folder = where.split("/", 1)[0]
    allowed = ALLOWED[folder]
    out: list[str] = []
    seen: set[str] = set()
    for dotted, line in imports_of(source):
        top = dotted.split(".")[0]
        if top in sys.stdlib_module_names or top in env.first_party or top in seen:
            continue
        seen.add(top)
        message = _problem(dotted, folder, allowed, env)
        if message:
            out.append(f"{where}:{line}: module {top!r} {message}")
    return out


def _problem(dotted: str, folder: str, allowed: frozenset[str] | None,
             env: Environment) -> str | None:
    top = dotted.split(".")[0]
    wanted = "any group" if allowed is None else " or ".join(
        "dependencies" if g == DEPS else f"[{g}]" for g in sorted(allowed))
    providers = env.providers(dotted)
    if providers is None:
        guess = UNINSTALLED_BENCH_NAMES.get(top, normalize(top))
        if folder == "benchmarks" and "bench" in env.declared.get(guess, ()) and _absent(guess):
            return None  # a bench peer, declared, and the bench extra is not installed
        return (f"is not installed (no distribution provides it): declare its distribution "
                f"in pyproject.toml ({wanted}) and install it")
    for dist in providers:
        groups = env.declared.get(dist, set())
        if groups and (allowed is None or groups & allowed):
            return None
    declared_in = sorted({g or "dependencies" for d in providers
                          for g in env.declared.get(d, ())})
    return (f"comes from {sorted(providers)}, which pyproject.toml declares "
            f"{'in ' + ', '.join(declared_in) if declared_in else 'nowhere'}; "
            f"code under {folder}/ needs it in {wanted}")


def repository_sources(root: Path = ROOT) -> Iterable[tuple[str, str]]:
    """``(where, source)`` for every Python file and notebook code cell checked."""
    for folder in ("threadloom", "tests", "benchmarks"):
        for path in sorted((root / folder).rglob("*.py")):
            yield str(path.relative_to(root)), path.read_text(encoding="utf-8")
    for path in sorted((root / "notebooks").glob("*.ipynb")):
        for number, source in notebook_cells(path.read_text(encoding="utf-8")):
            yield f"{path.relative_to(root)} cell {number}", source


@pytest.fixture(scope="module")
def env() -> Environment:
    return Environment(declared_groups(tomllib.loads((ROOT / "pyproject.toml").read_text())))


def test_every_third_party_import_is_declared_where_it_is_needed(env: Environment):
    problems = [p for where, source in repository_sources()
                for p in problems_in(source, where, env)]
    assert not problems, "undeclared imports:\n" + "\n".join(problems)


def test_the_check_reads_every_place(env: Environment):
    wheres = [where for where, _ in repository_sources()]
    for folder in ALLOWED:
        assert any(w.startswith(folder + "/") for w in wheres), folder
    assert any(".ipynb cell " in w for w in wheres)
    assert {"conftest", "cli_graphs", "harness", "threadloom"} <= env.first_party


def test_the_readme_test_command_installs_dev():
    # ALLOWED lets tests/ rely on [dev] and [server] because the README's test command
    # (which .ci/run runs in a new virtual environment) installs them.
    block = (ROOT / "README.md").read_text(encoding="utf-8").split("<!-- test-command -->")[1]
    command = block.split("```bash\n", 1)[1].split("\n```", 1)[0]
    installed = re.search(r"pip install -e '\.\[([^\]]*)\]'", command)
    assert installed and {"dev", "server"} <= set(installed.group(1).split(",")), command


# -- the check can fail: synthetic sources ------------------------------------------------

def test_a_module_nobody_installs_fails_naming_file_and_module(env: Environment):
    problems = problems_in("import json\nimport nonexistent_pkg.sub\n", "tests/test_x.py", env)
    assert len(problems) == 1
    assert problems[0].startswith("tests/test_x.py:2: module 'nonexistent_pkg' is not installed")


@pytest.mark.parametrize("source", [
    "def f():\n    try:\n        import nonexistent_pkg\n    except ImportError:\n        pass\n",
    "from nonexistent_pkg.a import b\n",
    "import pytest\nnp = pytest.importorskip('nonexistent_pkg')\n",
    "import importlib\nimportlib.import_module('nonexistent_pkg')\n",
])
def test_hidden_and_guarded_imports_are_read(env: Environment, source: str):
    [problem] = problems_in(source, "threadloom/x.py", env)
    assert "'nonexistent_pkg' is not installed" in problem


def test_undeclared_and_misplaced_distributions_fail(env: Environment):
    # yaml comes from PyYAML; declared only for benchmarks, a test may not import it.
    placed = Environment({"pyyaml": {"bench"}}, env.dists, env.first_party)
    [wrong] = problems_in("import yaml\n", "tests/test_x.py", placed)
    assert "'yaml' comes from ['pyyaml']" in wrong and "declares in bench" in wrong
    assert problems_in("import yaml\n", "benchmarks/b.py", placed) == []
    assert problems_in("import yaml\n", "threadloom/m.py", placed) == []
    [nowhere] = problems_in("import yaml\n", "threadloom/m.py", Environment({}, env.dists))
    assert "declares nowhere" in nowhere


def test_stdlib_relative_and_first_party_imports_pass(env: Environment):
    source = ("import os, json\nfrom . import x\nimport conftest, harness\n"
              "from threadloom import y\nimportlib.util.find_spec('probe_only')\n")
    assert problems_in(source, "tests/test_x.py", env) == []


def test_a_bench_peer_passes_only_declared_in_bench_and_absent(env: Environment):
    absent = "nonexistent-pkg"
    bench = Environment({absent: {"bench"}}, env.dists, env.first_party)
    assert problems_in("import nonexistent_pkg\n", "benchmarks/b.py", bench) == []
    assert problems_in("import nonexistent_pkg\n", "tests/test_b.py", bench) != []
    dev = Environment({absent: {"dev"}}, env.dists, env.first_party)
    assert problems_in("import nonexistent_pkg\n", "benchmarks/b.py", dev) != []


def test_a_namespace_package_is_narrowed_to_the_distribution_that_has_the_module(
        env: Environment):
    if len(env.dists.get("opentelemetry", [])) < 2:
        pytest.fail("the dev extra installs opentelemetry-api and -sdk: both should be here")
    assert env.providers("opentelemetry.sdk.trace") == {"opentelemetry-sdk"}
    assert env.providers("opentelemetry.trace.Status") == {"opentelemetry-api"}
    only_api = Environment({"opentelemetry-api": {"dev"}}, env.dists, env.first_party)
    [problem] = problems_in("from opentelemetry.sdk.trace import T\n", "tests/t.py", only_api)
    assert "['opentelemetry-sdk']" in problem


def test_notebook_code_cells_are_read_and_magics_ignored():
    text = json.dumps({"cells": [
        {"cell_type": "markdown", "source": ["import not_code\n"]},
        {"cell_type": "code", "source": ["%matplotlib inline\n", "!pip list\n",
                                         "import nonexistent_pkg\n"]},
    ]})
    [(number, source)] = list(notebook_cells(text))
    assert number == 1
    assert list(imports_of(source)) == [("nonexistent_pkg", 3)]


def test_requirement_names_are_read_and_normalized():
    groups = declared_groups({"project": {
        "dependencies": ["PyYAML>=6", "typing_extensions>=4.7"],
        "optional-dependencies": {"postgres": ["psycopg[binary,pool]>=3.1"],
                                  "dev": ["Zope.Interface ; python_version>'3'"]}}})
    assert groups == {"pyyaml": {""}, "typing-extensions": {""}, "psycopg": {"postgres"},
                      "zope-interface": {"dev"}}
