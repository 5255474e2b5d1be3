"""The agent's prompt render budget: ``create_agent(render_budget={...})`` raises the
sandbox's limits (``threadloom.prompts.ChatPromptTemplate``), and a render that runs past
them says which argument raises it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

from threadloom.prompts import RenderBudgetError

BUDGET_KEYS = {"render_budget_s": "seconds", "max_output_chars": "characters",
               "max_steps": "loop iterations and calls"}
"""The keys ``render_budget`` takes (``ChatPromptTemplate``'s budget arguments)."""


def budget_kwargs(budget: Mapping[str, Any] | None) -> dict[str, Any]:
    """``render_budget`` as ``ChatPromptTemplate`` keyword arguments.

    Raises:
        TypeError: ``render_budget`` is not a dict, or names an unknown key.
    """
    if budget is None:
        return {}
    if not isinstance(budget, Mapping):
        raise TypeError(f"create_agent(render_budget=...) must be a dict, got {budget!r}")
    unknown = sorted(set(budget) - set(BUDGET_KEYS))
    if unknown:
        raise TypeError(f"create_agent(render_budget=...): unknown key(s) {unknown}; "
                        f"known: {sorted(BUDGET_KEYS)}")
    return dict(budget)


_KEY_OF_LIMIT = {"steps": "max_steps", "size": "max_output_chars", "time": "render_budget_s"}


@contextlib.contextmanager
def explained() -> Iterator[None]:
    """Re-raise a ``RenderBudgetError`` with the ``create_agent`` argument that raises it."""
    try:
        yield
    except RenderBudgetError as exc:
        key = _KEY_OF_LIMIT.get(exc.limit, "max_steps")
        raise RenderBudgetError(
            f"{exc}; if the prompt really needs more, raise the limit with "
            f"create_agent(render_budget={{{key!r}: ...}}) ({BUDGET_KEYS[key]})",
            limit=exc.limit) from exc


__all__ = ["BUDGET_KEYS", "budget_kwargs", "explained"]
