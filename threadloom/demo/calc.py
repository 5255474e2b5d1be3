"""A safe arithmetic evaluator for the demo's ``calculator`` tool.

The expression is parsed with :mod:`ast` and walked over a whitelist of node types:
numbers, ``+ - * / // % **``, unary ``+``/``-``, parentheses and a few named functions
(``abs``, ``round``, ``min``, ``max``, ``sqrt``). Names, attributes, calls of anything
else, subscripts, strings, comprehensions and lambdas are refused before anything runs,
so ``__import__('os')`` is only ever a parse tree that gets rejected. Sizes are bounded:
the text length, the nesting depth, the magnitude of every intermediate result, and
exponents (checked *before* computing the power, so ``9**9**9`` never starts).

``"15% of 80"`` and ``"80 * 15%"`` are accepted as percentages (``15% of 80`` means
``15/100*80``); a ``%`` between two operands is still the modulo operator.
"""

from __future__ import annotations

import ast
import math
import operator
import re
from collections.abc import Callable

__all__ = ["CalculatorError", "MAX_LENGTH", "MAX_MAGNITUDE", "safe_eval"]

MAX_LENGTH = 200
"""Longest accepted expression, in characters."""
MAX_MAGNITUDE = 1e100
"""Largest absolute value any intermediate or final result may have."""
MAX_DEPTH = 32
"""Deepest accepted nesting of operations."""

Number = int | float

_BINOPS: dict[type[ast.operator], Callable[[Number, Number], Number]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Number], Number]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}
_FUNCTIONS: dict[str, Callable[..., Number]] = {
    "abs": abs,
    "round": round,
    "min": min,
    "max": max,
    "sqrt": math.sqrt,
}
_PERCENT_OF = re.compile(r"(\d+(?:\.\d+)?)\s*%\s*of\b", re.IGNORECASE)
_TRAILING_PERCENT = re.compile(r"(\d+(?:\.\d+)?)\s*%(?!\s*[\d.(])")


class CalculatorError(ValueError):
    """The expression is not plain arithmetic, or is too big to compute safely."""


def _rewrite_percentages(text: str) -> str:
    text = _PERCENT_OF.sub(r"(\1/100)*", text)
    return _TRAILING_PERCENT.sub(r"(\1/100)", text)


def _check(value: Number) -> Number:
    if isinstance(value, float) and not math.isfinite(value):
        raise CalculatorError("the result is not a finite number")
    if abs(value) > MAX_MAGNITUDE:
        raise CalculatorError(f"a result exceeds the limit of {MAX_MAGNITUDE:g}")
    return value


def _power(base: Number, exponent: Number) -> Number:
    if abs(exponent) > 1000:
        raise CalculatorError(f"exponent {exponent} is too large (limit 1000)")
    if base not in (0, 1, -1) and abs(exponent) * math.log10(abs(base)) > 100:
        raise CalculatorError(f"{base} ** {exponent} would exceed {MAX_MAGNITUDE:g}")
    if base == 0 and exponent < 0:
        raise CalculatorError("zero cannot be raised to a negative power")
    return base**exponent


def _call(node: ast.Call, depth: int) -> Number:
    if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCTIONS:
        shown = ast.unparse(node.func)
        raise CalculatorError(
            f"function {shown!r} is not allowed; allowed: {', '.join(sorted(_FUNCTIONS))}")
    if node.keywords:
        raise CalculatorError("keyword arguments are not allowed")
    args = [_eval(a, depth + 1) for a in node.args]
    if not args or len(args) > 10:
        raise CalculatorError(f"{node.func.id}() takes 1 to 10 arguments")
    try:
        if node.func.id == "round":
            if len(args) > 2:
                raise CalculatorError("round() takes at most 2 arguments")
            digits = int(args[1]) if len(args) == 2 else 0
            return round(args[0], max(-20, min(20, digits)))
        return _FUNCTIONS[node.func.id](*args)
    except (TypeError, ValueError) as exc:
        raise CalculatorError(f"{node.func.id}(): {exc}") from exc


def _eval(node: ast.AST, depth: int = 0) -> Number:
    if depth > MAX_DEPTH:
        raise CalculatorError(f"the expression is nested deeper than {MAX_DEPTH} levels")
    if isinstance(node, ast.Expression):
        return _eval(node.body, depth)
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, int | float):
            raise CalculatorError(f"only numbers are allowed, not {node.value!r}")
        return _check(node.value)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        left, right = _eval(node.left, depth + 1), _eval(node.right, depth + 1)
        if isinstance(node.op, ast.Pow):
            return _check(_power(left, right))
        if isinstance(node.op, ast.Div | ast.FloorDiv | ast.Mod) and right == 0:
            raise CalculatorError("division by zero")
        return _check(_BINOPS[type(node.op)](left, right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _check(_UNARY[type(node.op)](_eval(node.operand, depth + 1)))
    if isinstance(node, ast.Call):
        return _check(_call(node, depth))
    if isinstance(node, ast.Name):
        raise CalculatorError(f"names are not allowed: {node.id!r}")
    raise CalculatorError(f"{type(node).__name__} is not allowed in an arithmetic expression")


def safe_eval(expression: str) -> Number:
    """Evaluate plain arithmetic without ``eval``.

    Args:
        expression: e.g. ``"(19.99 + 5) * 3"``, ``"2 ** 10"``, ``"15% of 80"``,
            ``"sqrt(2)"``. At most ``MAX_LENGTH`` characters.

    Returns:
        The value; a float that is a whole number comes back as an ``int``, other floats
        are rounded to 10 decimal places.

    Raises:
        CalculatorError: syntax errors, anything but numbers/operators/allowed functions,
            division by zero, exponents or results beyond the limits.
    """
    if not isinstance(expression, str) or not expression.strip():
        raise CalculatorError("the expression is empty")
    if len(expression) > MAX_LENGTH:
        raise CalculatorError(f"the expression is longer than {MAX_LENGTH} characters")
    text = _rewrite_percentages(expression.replace("^", "**").replace("×", "*"))
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise CalculatorError(f"not an arithmetic expression: {expression!r}") from exc
    value = _eval(tree)
    if isinstance(value, float):
        value = round(value, 10)
        if value.is_integer() and abs(value) < 2**53:
            return int(value)
    return value
