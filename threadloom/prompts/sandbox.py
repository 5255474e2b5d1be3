"""The locked-down Jinja2 environment behind ``threadloom.prompts`` (SECURITY.md items 6-8).

Four layers, so that one missed case in a layer is still caught by another:

1. Plain data only (``threadloom.prompts.plain``): variables are converted to JSON-like
   values before the render; anything that is not data raises ``SecurityError`` naming
   the variable. A template can therefore not reach a module, a tool, a path or a secret.
2. A static check of the parsed template (``check_template_ast``): no attribute or item
   whose name starts with ``_``, no ``|attr('_...')``, no dunder names, no ``self`` /
   ``cycler`` / ``joiner`` / ``lipsum``, no ``include``/``import``/``extends``. Refusals
   raise threadloom's ``SecurityError`` when the template is built.
3. Jinja2's ``ImmutableSandboxedEnvironment`` at render time, made strict: an unsafe
   attribute raises ``SecurityError`` at once, and so does a call to anything but the
   template's own macros, ``loop`` helpers, ``range``/``dict``/``namespace`` and the
   short list of safe methods of the plain types (``plain.SAFE_METHODS``).
4. A render budget (``threadloom.prompts.budget``): steps, time, output size, and memory
   (sizes checked before values are built, everything built charged), on every loop
   iteration, call, operator and filter call (``threadloom.prompts.filters``). A breach
   raises ``RenderBudgetError``.

The prompt error classes live in ``budget`` and are re-exported here and by
``threadloom.prompts``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import wraps
from typing import Any, cast

from jinja2 import StrictUndefined, nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

from threadloom.errors import SecurityError
from threadloom.prompts.budget import (
    ITEM_COST,
    MissingVariablesError,
    PromptTemplateError,
    RenderBudget,
    RenderBudgetError,
    activate,
    active_budget,
    check_int_args,
    check_join,
    check_percent,
    check_replace,
    check_str_format,
    deactivate,
    size_of,
)
from threadloom.prompts.filters import (
    capped_range,
    guard_filter,
    iterate,
    size_guard,
    text_guard,
)
from threadloom.prompts.plain import call_allowed, describe_callable

BLOCKED_NAMES = frozenset({"self", "cycler", "joiner", "lipsum"})
"""Jinja2 globals and special names a template may not use (each leads to Python internals)."""

_MAX_INT_BITS = 10_000
_SIZED = (str, bytes, list, tuple, dict)
_STR_METHODS_WITH_SIZE = frozenset({"center", "ljust", "rjust", "zfill"})


def _check_binop(budget: RenderBudget, operator: str, left: Any, right: Any) -> None:
    ints = all(isinstance(v, int) and not isinstance(v, bool) for v in (left, right))
    if operator == "**" and ints:
        if abs(left) > 1 and right > 0 and right * math.log2(abs(left)) > _MAX_INT_BITS:
            raise RenderBudgetError(f"{left} ** {right} is too large to compute", limit="size")
    elif operator == "*":
        if ints and left.bit_length() + right.bit_length() > _MAX_INT_BITS:
            raise RenderBudgetError("integer product too large to compute", limit="size")
        for seq, count in ((left, right), (right, left)):
            if isinstance(seq, _SIZED) and isinstance(count, int):
                budget.check_size(len(seq) * max(count, 0), "repeated sequence")
    elif operator == "+":
        budget.check_size(size_of(left) + size_of(right), "concatenation")
    elif operator == "%":
        check_percent(budget, left, right, "the % operator")


def _check_method(budget: RenderBudget, owner: Any, name: str, args: tuple[Any, ...],
                  kwargs: dict[str, Any]) -> None:
    what = f"method {name!r}"
    check_int_args(budget, [*args, *kwargs.values()], what)
    if name == "replace":
        check_replace(budget, owner, args)
    elif name == "join":
        check_join(budget, owner, args[0] if args else (), f"result of {what}")
    elif name == "expandtabs" and isinstance(owner, str):
        size = args[0] if args and isinstance(args[0], int) else 8
        budget.check_size(len(owner) + owner.count("\t") * max(size, 0), f"result of {what}")
    elif name == "strftime":
        check_str_format(budget, str(args[0]) if args else "", (), {}, what)
    elif name in _STR_METHODS_WITH_SIZE:
        budget.check_size(len(owner), what)


class SandboxEnvironment(ImmutableSandboxedEnvironment):
    """``ImmutableSandboxedEnvironment`` that raises instead of rendering unsafe values empty.

    Uses ``StrictUndefined``; missing optional variables are given to it as
    ``ChainableUndefined`` values by ``ChatPromptTemplate``. Autoescaping is off (chat
    prompts are not HTML) and the optimizer is off, so nothing is evaluated at compile time.
    Every filter is wrapped by ``filters.guard_filter`` and every ``{{ }}`` output by
    ``filters.text_guard`` (as ``finalize``).
    """

    intercepted_binops = frozenset({"*", "**", "+", "%"})

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(undefined=StrictUndefined, autoescape=False, optimized=False,
                         finalize=text_guard, **kwargs)
        for name in BLOCKED_NAMES:
            self.globals.pop(name, None)
        self.globals["range"] = capped_range
        self.filters = {name: guard_filter(name, func) for name, func in self.filters.items()}
        self.filters["_tl_iter"] = iterate
        self.filters["_tl_size"] = size_guard
        self.filters["_tl_text"] = text_guard

    def unsafe_undefined(self, obj: Any, attribute: str) -> Any:
        """Refuse at once: raise ``SecurityError`` naming the attribute and the type."""
        raise SecurityError(
            f"template refused: access to attribute {attribute!r} of "
            f"{type(obj).__name__!r} object is unsafe")

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        """Check the operands' sizes before running ``*``, ``**``, ``+`` or ``%``."""
        budget = active_budget()
        budget.step()
        _check_binop(budget, operator, left, right)
        result = super().call_binop(context, operator, left, right)
        budget.charge_value(result, f"the result of {operator!r}")
        return result

    def call(self, context: Any, obj: Any, /, *args: Any, **kwargs: Any) -> Any:
        """Refuse calls outside the allow-list (``plain.call_allowed``); count the call as a
        step and check the sizes a string method will build before it runs.

        Raises:
            SecurityError: ``obj`` may not be called from a template.
        """
        budget = active_budget()
        budget.step()
        if not call_allowed(obj):
            raise SecurityError(
                f"template refused: calling {describe_callable(obj)} is not allowed "
                "(templates may call their macros, loop helpers, range, dict, namespace "
                "and the plain methods of strings, lists and dicts)")
        owner = getattr(obj, "__self__", None)
        if isinstance(owner, _SIZED):
            _check_method(budget, owner, getattr(obj, "__name__", "?"), args, kwargs)
        result = super().call(context, obj, *args, **kwargs)
        budget.charge_value(result, "the call's result")
        if isinstance(owner, str) and isinstance(result, list | tuple):  # split() & co
            budget.charge(len(result) * ITEM_COST, "the strings of the call's result")
        return result

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        """Sandboxed ``str.format``/``format_map``, with widths and arguments checked first."""
        wrapped = super().wrap_str_format(value)
        if wrapped is None:
            return None
        fmt = value.__self__
        is_map = value.__name__ == "format_map"

        @wraps(wrapped)
        def checked(*args: Any, **kwargs: Any) -> str:
            budget = active_budget()
            mapping = args[0] if is_map and args and isinstance(args[0], dict) else {}
            check_str_format(budget, fmt, () if is_map else args, {**mapping, **kwargs},
                             "str.format")
            result = wrapped(*args, **kwargs)
            budget.charge_value(result, "the str.format result")
            return result

        checked.threadloom_safe_call = True  # type: ignore[attr-defined]
        return checked


def check_template_ast(ast: nodes.Template) -> None:
    """Refuse templates that name Python internals; raise threadloom ``SecurityError``.

    Args:
        ast: the parsed template (``environment.parse(source)``).

    Raises:
        SecurityError: naming the construct and its line.
    """
    for node in ast.find_all(nodes.Node):
        problem = _ast_problem(node)
        if problem:
            raise SecurityError(f"template refused (line {node.lineno}): {problem}")


def _ast_problem(node: nodes.Node) -> str | None:
    if isinstance(node, nodes.Getattr) and node.attr.startswith("_"):
        return f"attribute {node.attr!r} starts with an underscore"
    if isinstance(node, nodes.Getitem) and _underscore_const(node.arg):
        return "item names starting with an underscore are not allowed"
    if isinstance(node, nodes.Name) and (node.name in BLOCKED_NAMES or node.name.startswith("__")):
        return f"name {node.name!r} is not available in templates"
    if isinstance(node, nodes.Filter) and node.name.startswith("_"):
        return f"filter {node.name!r} is not available in templates"
    if isinstance(node, nodes.Filter) and node.name == "attr" and any(
        _underscore_const(a) for a in node.args
    ):
        return "|attr() with a name starting with an underscore"
    if isinstance(node, nodes.Include | nodes.Import | nodes.FromImport | nodes.Extends):
        return "include/import/extends are not allowed in prompt templates"
    return None


def _underscore_const(node: nodes.Node) -> bool:
    return isinstance(node, nodes.Const) and isinstance(node.value, str) and (
        node.value.startswith("_"))


def add_budget_guards(ast: nodes.Template) -> nodes.Template:
    """Wrap every ``{% for %}`` iterable and ``~`` concatenation in budget checks (in place):
    each ``~`` operand's text is checked before it is built, and the joined result after.

    Run after ``check_template_ast`` (which refuses user filters named ``_...``).
    """
    for loop in ast.find_all(nodes.For):
        loop.iter = _wrap(loop.iter, "_tl_iter")
    for concat in list(ast.find_all(nodes.Concat)):
        concat.nodes = [_wrap(part, "_tl_text") for part in concat.nodes]
    for parent in list(ast.find_all(nodes.Node)):
        for field in parent.fields:
            child = getattr(parent, field, None)
            if isinstance(child, nodes.Concat):
                setattr(parent, field, _wrap(child, "_tl_size"))
            elif isinstance(child, list):
                setattr(parent, field, [
                    _wrap(c, "_tl_size") if isinstance(c, nodes.Concat) else c for c in child])
    return ast


def _wrap(node: nodes.Node, name: str) -> nodes.Filter:
    return nodes.Filter(cast(nodes.Expr, node), name, [], [], None, None, lineno=node.lineno)


__all__ = [
    "BLOCKED_NAMES",
    "MissingVariablesError",
    "PromptTemplateError",
    "RenderBudget",
    "RenderBudgetError",
    "SandboxEnvironment",
    "activate",
    "active_budget",
    "add_budget_guards",
    "check_template_ast",
    "deactivate",
]
