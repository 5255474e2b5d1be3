"""The locked-down Jinja2 environment behind ``threadloom.prompts`` (SECURITY.md items 6-8).

Three layers, so that one missed case in a layer is still caught by another:

1. A static check of the parsed template (``check_template_ast``): no attribute or item
   whose name starts with ``_``, no ``|attr('_...')``, no dunder names, no ``self`` /
   ``cycler`` / ``joiner`` / ``lipsum`` / ``namespace``, no ``include``/``import``/
   ``extends``. Refusals raise threadloom's ``SecurityError`` when the template is built.
2. Jinja2's ``ImmutableSandboxedEnvironment`` at render time, made strict: an unsafe
   attribute raises ``SecurityError`` at once (Jinja2 would return an undefined object
   that renders as an empty string in lenient mode), and so does every sandbox refusal.
3. A render budget (``RenderBudget``): every loop iteration and every call counts as a
   step, ``range()`` longer than the step budget is refused before it starts, operators
   and string methods that could build huge values (``*``, ``**``, ``+``, ``%``, ``~``,
   ``center``, ``ljust``, ``replace``, ``format``...) are checked before they run, and the
   output size and wall-clock time are capped. A breach raises ``RenderBudgetError``.

The prompt error classes (``PromptTemplateError``, ``MissingVariablesError``,
``RenderBudgetError``) live here too, as the lowest module; ``threadloom.prompts``
re-exports them.

Not covered: work inside a single C-level operation on data the caller passed in (sorting
a ten-million-item list, say) cannot be interrupted; size the inputs you pass.
"""

from __future__ import annotations

import contextvars
import math
import re
import time
from collections.abc import Callable, Iterable, Iterator
from functools import wraps
from typing import Any

from jinja2 import Environment, StrictUndefined, nodes
from jinja2.nodes import EvalContext
from jinja2.runtime import Context
from jinja2.sandbox import ImmutableSandboxedEnvironment

from threadloom.errors import SecurityError

BLOCKED_NAMES = frozenset({"self", "cycler", "joiner", "lipsum", "namespace"})
"""Jinja2 globals and special names a template may not use (each leads to Python internals)."""

_MAX_INT_BITS = 10_000
_PASSED_ARGS = (Environment, EvalContext, Context)
_DIGIT_RUN = re.compile(r"\d+")
_SIZED = (str, bytes, list, tuple, dict)
_STR_METHODS_WITH_SIZE = frozenset({"center", "ljust", "rjust", "zfill", "expandtabs"})
_GUARDED_FILTERS = ("center", "indent", "format", "replace", "slice", "batch", "tojson", "join")


class PromptTemplateError(ValueError):
    """A template cannot be built or rendered (syntax, bad role, undefined value, bad name)."""


class MissingVariablesError(PromptTemplateError):
    """Required template variables were not given; raised before anything is rendered.

    Attributes:
        missing: the missing names, sorted.
    """

    def __init__(self, missing: Iterable[str]) -> None:
        self.missing = tuple(sorted(missing))
        super().__init__(f"missing required template variable(s): {', '.join(self.missing)}")


class RenderBudgetError(SecurityError):
    """A template ran past its render budget (steps, output size or time).

    Attributes:
        limit: which limit was hit: ``"steps"``, ``"size"`` or ``"time"``.
    """

    def __init__(self, message: str, *, limit: str) -> None:
        super().__init__(message)
        self.limit = limit


class RenderBudget:
    """Limits of one render; made by ``ChatPromptTemplate`` for each call.

    Args:
        time_s: wall-clock seconds the render may take.
        max_steps: loop iterations plus calls the render may make; also the longest
            ``range()`` allowed.
        max_chars: the largest output, and the largest string/list built on the way.
    """

    __slots__ = ("blocks", "deadline", "max_chars", "max_steps", "nonce", "output", "steps",
                 "time_s")

    def __init__(self, *, time_s: float, max_steps: int, max_chars: int, nonce: str) -> None:
        self.time_s = time_s
        self.deadline = time.monotonic() + time_s
        self.max_steps = max_steps
        self.max_chars = max_chars
        self.steps = 0
        self.output = 0
        self.nonce = nonce
        self.blocks: list[tuple[str, str]] = []

    def step(self) -> None:
        """Count one step; raise ``RenderBudgetError`` past the step or time budget."""
        self.steps += 1
        if self.steps > self.max_steps:
            raise RenderBudgetError(
                f"template render budget exceeded: more than {self.max_steps} loop "
                "iterations and calls", limit="steps")
        if time.monotonic() > self.deadline:
            raise RenderBudgetError(
                f"template render budget exceeded: took more than {self.time_s} s", limit="time")

    def check_size(self, size: int, what: str = "value") -> None:
        """Raise ``RenderBudgetError`` when ``size`` characters/items exceed ``max_chars``."""
        if size > self.max_chars:
            raise RenderBudgetError(
                f"template render budget exceeded: a {what} of {size} characters/items "
                f"(limit {self.max_chars})", limit="size")

    def add_output(self, size: int) -> None:
        """Count ``size`` output characters against ``max_chars``."""
        self.output += size
        self.check_size(self.output, "rendered output")


_ACTIVE: contextvars.ContextVar[RenderBudget | None] = contextvars.ContextVar(
    "threadloom_render_budget", default=None)


def active_budget() -> RenderBudget:
    """The budget of the render in progress; ``RuntimeError`` outside a render.

    Raising outside a render also stops Jinja2 from folding guarded calls at compile time.
    """
    budget = _ACTIVE.get()
    if budget is None:
        raise RuntimeError("no template render in progress")
    return budget


def activate(budget: RenderBudget) -> contextvars.Token[RenderBudget | None]:
    """Make ``budget`` the active one; pass the token to ``deactivate``."""
    return _ACTIVE.set(budget)


def deactivate(token: contextvars.Token[RenderBudget | None]) -> None:
    """Restore the budget active before ``activate``."""
    _ACTIVE.reset(token)


def _size_of(value: Any) -> int:
    return len(value) if isinstance(value, _SIZED) else 0


def _check_int_args(budget: RenderBudget, args: Iterable[Any], what: str) -> None:
    for arg in args:
        if isinstance(arg, int) and not isinstance(arg, bool) and abs(arg) > budget.max_chars:
            raise RenderBudgetError(
                f"template render budget exceeded: {what} called with {arg} "
                f"(limit {budget.max_chars})", limit="size")


def _check_format_string(budget: RenderBudget, fmt: Any, what: str) -> None:
    if isinstance(fmt, str):
        _check_int_args(budget, (int(d) for d in _DIGIT_RUN.findall(fmt) if len(d) < 30), what)
        if any(len(d) >= 30 for d in _DIGIT_RUN.findall(fmt)):
            raise RenderBudgetError(f"{what}: number too large in format string", limit="size")


def _check_replace(budget: RenderBudget, text: Any, args: tuple[Any, ...]) -> None:
    if isinstance(text, str) and len(args) >= 2 and isinstance(args[0], str):
        old, new = args[0], str(args[1])
        count = text.count(old) if old else len(text) + 1
        budget.check_size(len(text) + count * max(len(new) - len(old), 0), "replace() result")


def _guard_filter(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    @wraps(func)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        budget = active_budget()
        budget.step()
        values = [a for a in args if not isinstance(a, _PASSED_ARGS)]
        _check_int_args(budget, [*values[1:], *kwargs.values()], f"filter {name!r}")
        if name == "format" and values:
            _check_format_string(budget, values[0], "filter 'format'")
        if name == "replace" and values:
            _check_replace(budget, values[0], tuple(values[1:]))
        result = func(*args, **kwargs)
        budget.check_size(_size_of(result), f"result of filter {name!r}")
        return result

    return guarded


def _budget_iter(value: Any) -> Iterator[Any]:
    """Iterate ``value``, counting each item as a step (wraps every ``{% for %}``)."""
    budget = active_budget()
    for item in value:
        budget.step()
        yield item


def _size_guard(value: Any) -> Any:
    """Check the size of a ``~`` concatenation result."""
    active_budget().check_size(_size_of(value), "concatenated string")
    return value


def _capped_range(*args: int) -> range:
    """``range()`` refused when longer than the step budget (it could never finish)."""
    budget = active_budget()
    budget.step()
    result = range(*args)
    if len(result) > budget.max_steps:
        raise RenderBudgetError(
            f"range() of {len(result)} items exceeds the render budget of "
            f"{budget.max_steps} steps", limit="steps")
    return result


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
        budget.check_size(_size_of(left) + _size_of(right), "concatenation")
    elif operator == "%":
        _check_format_string(budget, left, "the % operator")


class SandboxEnvironment(ImmutableSandboxedEnvironment):
    """``ImmutableSandboxedEnvironment`` that raises instead of rendering unsafe values empty.

    Uses ``StrictUndefined``; missing optional variables are given to it as
    ``ChainableUndefined`` values by ``ChatPromptTemplate``. Autoescaping is off (chat
    prompts are not HTML) and the optimizer is off, so nothing is evaluated at compile time.
    """

    intercepted_binops = frozenset({"*", "**", "+", "%"})

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(undefined=StrictUndefined, autoescape=False, optimized=False, **kwargs)
        for name in BLOCKED_NAMES:
            self.globals.pop(name, None)
        self.globals["range"] = _capped_range
        for name in _GUARDED_FILTERS:
            self.filters[name] = _guard_filter(name, self.filters[name])
        self.filters["_tl_iter"] = _budget_iter
        self.filters["_tl_size"] = _size_guard

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
        return super().call_binop(context, operator, left, right)

    def call(self, context: Any, obj: Any, /, *args: Any, **kwargs: Any) -> Any:
        """Count the call as a step and check size arguments of string/list methods."""
        budget = active_budget()
        budget.step()
        owner = getattr(obj, "__self__", None)
        if isinstance(owner, _SIZED):
            name = getattr(obj, "__name__", "?")
            _check_int_args(budget, [*args, *kwargs.values()], f"method {name!r}")
            if name == "replace":
                _check_replace(budget, owner, args)
            if name in _STR_METHODS_WITH_SIZE or name == "join":
                budget.check_size(len(owner), f"method {name!r}")
        result = super().call(context, obj, *args, **kwargs)
        budget.check_size(_size_of(result), "call result")
        return result

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        """Sandboxed ``str.format``/``format_map``, with widths and numbers checked first."""
        wrapped = super().wrap_str_format(value)
        if wrapped is None:
            return None
        fmt = value.__self__

        @wraps(wrapped)
        def checked(*args: Any, **kwargs: Any) -> str:
            budget = active_budget()
            _check_format_string(budget, fmt, "str.format")
            values = list(args[0].values()) if args and isinstance(args[0], dict) else []
            _check_int_args(budget, [*args, *values, *kwargs.values()], "str.format")
            result = wrapped(*args, **kwargs)
            budget.check_size(len(result), "str.format result")
            return result

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
    """Wrap every ``{% for %}`` iterable and ``~`` concatenation in budget checks (in place).

    Run after ``check_template_ast`` (which refuses user filters named ``_...``).
    """
    for loop in ast.find_all(nodes.For):
        loop.iter = nodes.Filter(loop.iter, "_tl_iter", [], [], None, None, lineno=loop.lineno)
    for parent in list(ast.find_all(nodes.Node)):
        for field in parent.fields:
            child = getattr(parent, field, None)
            if isinstance(child, nodes.Concat):
                setattr(parent, field, _wrap_size(child))
            elif isinstance(child, list):
                setattr(parent, field, [
                    _wrap_size(c) if isinstance(c, nodes.Concat) else c for c in child])
    return ast


def _wrap_size(node: nodes.Concat) -> nodes.Filter:
    return nodes.Filter(node, "_tl_size", [], [], None, None, lineno=node.lineno)
