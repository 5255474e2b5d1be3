"""Token usage of an agent run: what one reply counts, and how counts add up.

``token_usage`` is the sum, over the run's model calls, of each reply's usage, as
Haystack's ``Agent`` sums it:

- a reply carrying Haystack's ``meta["usage"]`` (``response_metadata["usage"]``, a dict)
  counts that dict with its keys as given (``prompt_tokens``, ``completion_tokens``,
  nested ``completion_tokens_details``...): a Haystack chat generator's counts read back
  under the names it reported;
- any other reply counts its ``usage_metadata`` as ``input_tokens`` / ``output_tokens`` /
  ``total_tokens`` (threadloom's models);
- a reply with neither counts nothing, and a run whose replies count nothing ends with
  ``token_usage == {}`` (Haystack's default).

Numbers add up key by key, nested dicts recursively; a value that is not a number is
replaced by the newer one (Haystack's rule).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

USAGE_KEYS = ("input_tokens", "output_tokens", "total_tokens")


def reply_usage(reply: Any) -> dict[str, Any] | None:
    """What ``reply`` (an ``AIMessage``) adds to ``token_usage``, or None (nothing).

    See the module docstring for which field is read.
    """
    meta = getattr(reply, "response_metadata", None) or {}
    given = meta.get("usage")
    if given is not None and isinstance(given, Mapping):
        return dict(given)
    usage = getattr(reply, "usage_metadata", None)
    if not usage:
        return None
    get = usage.get
    return {"input_tokens": int(get("input_tokens") or 0),  # USAGE_KEYS, unrolled
            "output_tokens": int(get("output_tokens") or 0),
            "total_tokens": int(get("total_tokens") or 0)}


def add_usage(current: Any, new: Any) -> Any:
    """``current`` plus ``new``: numbers add, dicts add key by key (recursively), any
    other value is replaced by ``new``. Neither argument is changed."""
    if type(current) in _NUMBERS and type(new) in _NUMBERS:  # the usual leaf, no isinstance
        return current + new
    if (type(current) is dict or isinstance(current, Mapping)) and (
            type(new) is dict or isinstance(new, Mapping)):
        out = dict(current)
        for key, value in new.items():
            out[key] = add_usage(out[key], value) if key in out else _copy(value)
        return out
    if _number(current) and _number(new):
        return current + new
    return _copy(new)


def usage_delta(new: Any, old: Any) -> Any:
    """What to add to ``old`` to get ``new`` (the inverse of ``add_usage`` for numbers and
    dicts of numbers): how a hook's ``state.set("token_usage", ...)`` becomes a write."""
    if isinstance(new, Mapping):
        old_map = old if isinstance(old, Mapping) else {}
        return {key: usage_delta(value, old_map.get(key)) for key, value in new.items()}
    if _number(new):
        return new - old if _number(old) else new
    return new


def sum_usage(current: Mapping[str, Any] | None,
              update: Mapping[str, Any] | None) -> dict[str, Any]:
    """Reducer of the ``token_usage`` state key: ``add_usage``; ``None`` resets to ``{}``."""
    if update is None:
        return {}
    return add_usage(dict(current or {}), update)  # type: ignore[no-any-return]


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _copy(value: Any) -> Any:
    if type(value) in _NUMBERS or type(value) is str:
        return value
    return {k: _copy(v) for k, v in value.items()} if isinstance(value, Mapping) else value


_NUMBERS = frozenset((int, float))  # exact types: bool (an int) is no number here


__all__ = ["USAGE_KEYS", "add_usage", "reply_usage", "sum_usage", "usage_delta"]
