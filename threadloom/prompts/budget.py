"""The render budget of one template render: steps, time, output and memory.

Every loop iteration, call, filter call and guarded operator counts as a step, and each
step checks the clock, so a render stops within about its time budget even when the work
happens inside filters (``map``, ``sum``...). Memory is bounded two ways:

- before an operation builds a value, the size of what it will build is estimated and
  checked (``text_weight``: the characters a value's text has, walked lazily and stopped
  as soon as the limit is passed; repetition counts, padding and format widths);
- every value built while rendering (filter, call and operator results, each ``{{ }}``
  output) is charged to an allocation allowance of ``ALLOC_FACTOR`` x ``max_chars``.

The prompt error classes live here too, as the lowest module of ``threadloom.prompts``.
"""

from __future__ import annotations

import contextvars
import re
import time
from collections.abc import Collection, Iterable, Sized
from typing import Any

from jinja2.runtime import Undefined
from jinja2.utils import Namespace

from threadloom.errors import SecurityError

ALLOC_FACTOR = 10
"""Values built during one render may total this many times ``max_chars`` characters."""

_SIZED = (str, bytes, list, tuple, dict, set, frozenset)
_CONTAINERS = (list, tuple, dict, set, frozenset)
POINTER_COST = 8
"""Allocation charged per item of a built container (the reference it holds)."""
ITEM_COST = 128
"""Allocation charged per item when a string is broken into new objects (``split``,
``|list``...): a small string object and its slot."""
_ITERABLES: tuple[type[Collection[Any]], ...] = (
    list, tuple, set, frozenset, type({}.keys()), type({}.values()), type({}.items()))
_DIGIT_RUN = re.compile(r"\d+")
_NESTED_FIELD = re.compile(r"\{[^{}]*\{")


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
    """A template ran past its render budget (steps, output size, memory or time).

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
        nonce: the random marker of this render's ``{% message %}`` blocks.
        max_alloc: characters/items all values built during the render may total;
            ``ALLOC_FACTOR * max_chars`` when None.
    """

    __slots__ = ("allocated", "blocks", "deadline", "max_alloc", "max_chars", "max_steps",
                 "nonce", "output", "steps", "time_s")

    def __init__(self, *, time_s: float, max_steps: int, max_chars: int, nonce: str,
                 max_alloc: int | None = None) -> None:
        self.time_s = time_s
        self.deadline = time.monotonic() + time_s
        self.max_steps = max_steps
        self.max_chars = max_chars
        self.max_alloc = ALLOC_FACTOR * max_chars if max_alloc is None else max_alloc
        self.steps = 0
        self.output = 0
        self.allocated = 0
        self.nonce = nonce
        self.blocks: list[tuple[str, str]] = []

    def step(self) -> None:
        """Count one step; raise ``RenderBudgetError`` past the step or time budget."""
        self.steps += 1
        if self.steps > self.max_steps:
            raise RenderBudgetError(
                f"template render budget exceeded: more than {self.max_steps} loop "
                "iterations and calls", limit="steps")
        self.check_time()

    def check_time(self) -> None:
        """Raise ``RenderBudgetError`` once the render's time is up."""
        if time.monotonic() > self.deadline:
            raise RenderBudgetError(
                f"template render budget exceeded: took more than {self.time_s} s", limit="time")

    def check_size(self, size: int, what: str = "value") -> None:
        """Raise ``RenderBudgetError`` when ``size`` characters/items exceed ``max_chars``."""
        if size > self.max_chars:
            raise RenderBudgetError(
                f"template render budget exceeded: a {what} of {size} characters/items "
                f"(limit {self.max_chars})", limit="size")

    def charge(self, size: int, what: str = "value") -> None:
        """Count ``size`` characters/items built against the allocation allowance."""
        self.allocated += size
        if self.allocated > self.max_alloc:
            raise RenderBudgetError(
                f"template render budget exceeded: building {what} brings the values built "
                f"during this render past {self.max_alloc} characters/items", limit="size")

    def charge_value(self, value: Any, what: str) -> None:
        """Check and charge a built value: strings by their length, containers by their
        length (checked) times ``POINTER_COST`` (charged)."""
        size = size_of(value)
        if size:
            self.check_size(size, what)
            self.charge(size * POINTER_COST if isinstance(value, _CONTAINERS) else size, what)

    def check_text(self, value: Any, what: str, extra: int = 0) -> int:
        """Check that the text of ``value`` (plus ``extra``) fits ``max_chars``, before it is
        built; returns the estimate (see ``text_weight``)."""
        chars = text_weight(value, self, self.max_chars)[0] + extra
        self.check_size(chars, what)
        return chars

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


def size_of(value: Any) -> int:
    """``len(value)`` for strings, bytes and built-in containers, else 0."""
    return len(value) if isinstance(value, _SIZED) else 0


def text_weight(value: Any, budget: RenderBudget, limit: int) -> tuple[int, int, int]:
    """Estimate the text of ``value`` (its ``str``/``repr``) without building it.

    Returns ``(chars, nodes, depth)``: characters (an upper bound for built-in data),
    values visited, deepest nesting. Shared references count each time they appear, as
    they would in the text. The walk stops as soon as ``chars`` or ``nodes`` passes
    ``limit``, so it costs at most ``limit`` visits; it checks the clock as it goes.
    """
    if isinstance(value, str):
        return len(value), 1, 0
    chars = nodes = depth = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack and chars <= limit and nodes <= limit:
        item, level = stack.pop()
        nodes += 1
        depth = max(depth, level)
        if nodes % 4096 == 0:
            budget.check_time()
        if isinstance(item, str | bytes):
            chars += len(item) + 3
        elif isinstance(item, bool) or item is None:
            chars += 5
        elif isinstance(item, int):
            chars += item.bit_length() // 3 + 2
        elif isinstance(item, float):
            chars += 26
        elif isinstance(item, dict):
            chars += 2 + 4 * len(item)
            stack.extend((part, level + 1) for pair in item.items() for part in pair)
        elif isinstance(item, _ITERABLES):
            chars += 2 + 2 * len(item)
            stack.extend((part, level + 1) for part in item)
        elif isinstance(item, range):  # as its items (join), more than its repr
            chars += len(item) * (len(str(max(abs(item.start), abs(item.stop)))) + 3)
        elif isinstance(item, Namespace):
            stack.append((object.__getattribute__(item, "_Namespace__attrs"), level + 1))
            chars += 14
        elif not isinstance(item, Undefined):
            chars += 80
    return chars, nodes, depth


def check_int_args(budget: RenderBudget, args: Iterable[Any], what: str) -> None:
    """Refuse integer arguments (widths, counts) larger than ``max_chars``."""
    for arg in args:
        if isinstance(arg, int) and not isinstance(arg, bool) and abs(arg) > budget.max_chars:
            raise RenderBudgetError(
                f"template render budget exceeded: {what} called with {arg} "
                f"(limit {budget.max_chars})", limit="size")


def check_digit_runs(budget: RenderBudget, text: Any, what: str) -> None:
    """Refuse numbers written in ``text`` (format widths, precisions) over ``max_chars``."""
    if isinstance(text, str):
        runs = _DIGIT_RUN.findall(text)
        if any(len(d) >= 30 for d in runs):
            raise RenderBudgetError(f"{what}: number too large in format string", limit="size")
        check_int_args(budget, (int(d) for d in runs), what)


def check_percent(budget: RenderBudget, fmt: Any, args: Any, what: str) -> None:
    """Check ``fmt % args`` before it runs: widths written in ``fmt``, ``*`` widths taken
    from ``args``, and the text of the arguments."""
    if not isinstance(fmt, str):
        return
    check_digit_runs(budget, fmt, what)
    values = list(args.values()) if isinstance(args, dict) else (
        list(args) if isinstance(args, tuple) else [args])
    if "*" in fmt:
        check_int_args(budget, values, what)
    budget.check_text(values, f"{what} arguments", len(fmt))


def check_str_format(budget: RenderBudget, fmt: str, args: tuple[Any, ...],
                     kwargs: dict[str, Any], what: str) -> None:
    """Check ``fmt.format(*args, **kwargs)`` before it runs: widths in ``fmt``, widths
    passed as arguments to nested fields (``'{0:{1}}'``), and the arguments' text."""
    check_digit_runs(budget, fmt, what)
    values = [*args, *kwargs.values()]
    if _NESTED_FIELD.search(fmt):
        check_int_args(budget, values, what)
        for value in values:
            if isinstance(value, str) and len(value) < 64:
                check_digit_runs(budget, value, what)
    budget.check_text(values, f"{what} arguments", len(fmt))


def check_replace(budget: RenderBudget, text: Any, args: tuple[Any, ...]) -> None:
    """Check the size of ``text.replace(old, new[, count])`` before it runs."""
    if isinstance(text, str) and len(args) >= 2 and isinstance(args[0], str):
        old, new = args[0], str(args[1])
        count = text.count(old) if old else len(text) + 1
        budget.check_size(len(text) + count * max(len(new) - len(old), 0), "replace() result")


def check_join(budget: RenderBudget, separator: Any, items: Any, what: str) -> None:
    """Check ``separator.join(items)`` before it runs: the items' text plus one separator
    between each two."""
    count = len(items) if isinstance(items, Sized) else 0
    gap = len(separator) if isinstance(separator, str) else 0
    budget.check_size(count * gap, what)
    budget.check_text(items, what, max(count - 1, 0) * gap)


__all__ = [
    "ALLOC_FACTOR",
    "MissingVariablesError",
    "PromptTemplateError",
    "RenderBudget",
    "RenderBudgetError",
    "activate",
    "active_budget",
    "check_int_args",
    "check_join",
    "check_percent",
    "check_replace",
    "check_str_format",
    "deactivate",
    "size_of",
    "text_weight",
]
