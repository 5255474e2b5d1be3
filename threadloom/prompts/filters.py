"""Budget guards around every Jinja2 filter of the sandbox.

Each filter call counts as a step (so the clock is checked even for the per-item calls
``map('upper')`` makes), its result is charged to the render's allocation allowance, and
before it runs the size of what it will build is checked:

- text filters (``join``, ``tojson``, ``string``, ``upper``, ``indent``... and any filter
  not listed here) check the text of their input, with what they add (separators,
  indentation, padding);
- key filters (``sort``, ``unique``, ``dictsort``, ``groupby``) build a case-folded copy
  of each key, so they check the text of the keys;
- reference filters (``list``, ``select``, ``first``, ``length``...) only rearrange
  references, so they check the number of items.

Lazy inputs (the generators ``map``/``select`` return) are materialized, a step per item,
before a text or key filter sees them, so their size can be checked first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sized
from functools import wraps
from typing import Any

from jinja2 import Environment
from jinja2.nodes import EvalContext
from jinja2.runtime import Context

from threadloom.prompts.budget import (
    ITEM_COST,
    RenderBudget,
    RenderBudgetError,
    active_budget,
    check_int_args,
    check_join,
    check_percent,
    check_replace,
    text_weight,
)

_PASSED_ARGS = (Environment, EvalContext, Context)
REFERENCE_FILTERS = frozenset({
    "abs", "attr", "batch", "count", "d", "default", "first", "float", "int", "items", "last",
    "length", "list", "map", "max", "min", "random", "reject", "rejectattr", "reverse",
    "round", "select", "selectattr", "slice", "sum"})
KEY_FILTERS = frozenset({"sort", "unique", "dictsort", "groupby"})
_WIDTH_FILTERS = frozenset({"center", "indent", "slice", "batch", "tojson", "wordwrap"})
_CONTAINER_COST = 64
"""Allocation charged for each list ``slice``/``batch`` creates (an empty list's bytes)."""
_SPLITTING = frozenset({"list", "batch", "slice", "sort", "unique", "groupby", "map",
                        "select", "reject"})
"""Filters that, given a string, make one object per character."""


def guard_filter(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap filter ``func`` (registered as ``name``) in the budget checks above."""
    @wraps(func)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        budget = active_budget()
        budget.step()
        first = next((i for i, a in enumerate(args) if not isinstance(a, _PASSED_ARGS)), None)
        if first is not None:
            args = _prepare(budget, name, args, first, kwargs)
        result = func(*args, **kwargs)
        budget.charge_value(result, f"the result of filter {name!r}")
        return result

    return guarded


def _prepare(budget: RenderBudget, name: str, args: tuple[Any, ...], first: int,
             kwargs: dict[str, Any]) -> tuple[Any, ...]:
    value, rest = args[first], args[first + 1:]
    what = f"filter {name!r}"
    if isinstance(value, str) and name in _SPLITTING:
        budget.charge(len(value) * ITEM_COST, f"the characters {what} makes")
    if name in _WIDTH_FILTERS:
        check_int_args(budget, [*rest, *kwargs.values()], what)
    if name not in REFERENCE_FILTERS or name == "sum":
        value = _materialize(budget, value, what)
        args = (*args[:first], value, *rest)
    if name in REFERENCE_FILTERS:
        _check_reference_filter(budget, name, value, rest, kwargs)
    elif name in KEY_FILTERS:
        attribute = kwargs.get("attribute", rest[2] if name == "sort" and len(rest) > 2 else
                               rest[0] if name == "groupby" and rest else None)
        budget.check_text(_keys(value, attribute), f"the keys {what} compares")
    else:
        _check_text_filter(budget, name, value, rest, kwargs)
    return args


def _materialize(budget: RenderBudget, value: Any, what: str) -> Any:
    if not isinstance(value, Iterator):
        return value
    items = []
    for item in value:
        budget.step()
        items.append(item)
    budget.charge(len(items), f"the input of {what}")
    return items


def _check_reference_filter(budget: RenderBudget, name: str, value: Any,
                            rest: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    if isinstance(value, Sized):
        budget.check_size(len(value), f"input of filter {name!r}")
    if name == "slice" and rest and isinstance(rest[0], int):
        budget.charge(rest[0] * _CONTAINER_COST, "the lists filter 'slice' makes")
    if name == "sum":
        start = kwargs.get("start", rest[1] if len(rest) > 1 else 0)
        if not isinstance(start, int | float) and isinstance(value, Sized):
            # Adding sequences copies the running total at every item: n * total work.
            chars = budget.check_text(value, "input of filter 'sum'")
            if chars * len(value) > budget.max_alloc:
                raise RenderBudgetError(
                    f"template render budget exceeded: filter 'sum' would copy "
                    f"{chars * len(value)} items", limit="size")


def _check_text_filter(budget: RenderBudget, name: str, value: Any, rest: tuple[Any, ...],
                       kwargs: dict[str, Any]) -> None:
    what = f"filter {name!r}"
    if name == "join":
        separator = kwargs.get("d", rest[0] if rest else "")
        attribute = kwargs.get("attribute", rest[1] if len(rest) > 1 else None)
        check_join(budget, separator, _keys(value, attribute), f"result of {what}")
    elif name == "format":
        check_percent(budget, value, kwargs or tuple(rest), what)
    elif name == "replace":
        check_replace(budget, value, rest)
    elif name in ("tojson", "pprint"):
        indent = kwargs.get("indent", rest[0] if rest else None) if name == "tojson" else 1
        chars, nodes, depth = _weigh(budget, value, what)
        step = indent if isinstance(indent, int) and indent > 0 else 0
        budget.check_size(chars + nodes * (depth * step + 1), f"result of {what}")
    elif name == "indent" and isinstance(value, str):
        width = kwargs.get("width", rest[0] if rest else 4)
        pad = width if isinstance(width, int) else len(str(width))
        budget.check_size(len(value) + (value.count("\n") + 1) * max(pad, 0), f"result of {what}")
    else:
        budget.check_text(value, f"input of {what}")


def _weigh(budget: RenderBudget, value: Any, what: str) -> tuple[int, int, int]:
    chars, nodes, depth = text_weight(value, budget, budget.max_chars)
    budget.check_size(max(chars, nodes), f"input of {what}")
    return chars, nodes, depth


def _keys(value: Any, attribute: Any) -> Any:
    """The values a filter reads from each item of ``value`` (all of it without an
    attribute); dotted attributes and integer parts as Jinja2's attribute getters."""
    if attribute is None or not isinstance(value, Iterable) or isinstance(value, str | dict):
        return value
    parts = [int(p) if p.isdigit() else p for p in str(attribute).split(".")]
    keys = []
    for item in value:
        for part in parts:
            try:
                item = item[part]
            except (LookupError, TypeError):
                item = None
                break
        keys.append(item)
    return keys


def iterate(value: Any) -> Iterator[Any]:
    """Iterate ``value``, counting each item as a step (wraps every ``{% for %}``)."""
    budget = active_budget()
    for item in value:
        budget.step()
        yield item


def size_guard(value: Any) -> Any:
    """Check and charge the result of a ``~`` concatenation."""
    active_budget().charge_value(value, "concatenated string")
    return value


def text_guard(value: Any) -> Any:
    """Check the text of a ``~`` operand or ``{{ }}`` output before it is built, and
    charge it."""
    budget = active_budget()
    if isinstance(value, str):  # the text is copied into the output or a captured block
        budget.check_size(len(value), "text")
        budget.charge(len(value), "text")
        return value
    chars = budget.check_text(value, "text")
    budget.charge(chars, "text")
    return value


def capped_range(*args: int) -> range:
    """``range()`` refused when longer than the step budget (it could never finish)."""
    budget = active_budget()
    budget.step()
    result = range(*args)
    if len(result) > budget.max_steps:
        raise RenderBudgetError(
            f"range() of {len(result)} items exceeds the render budget of "
            f"{budget.max_steps} steps", limit="steps")
    return result


capped_range.threadloom_safe_call = True  # type: ignore[attr-defined]


__all__ = ["KEY_FILTERS", "REFERENCE_FILTERS", "capped_range", "guard_filter", "iterate",
           "size_guard", "text_guard"]
