"""The config of one run: merged, normalised and checked once per ``invoke``/``stream``.

Only cheap type checks run here (this is on every run's path): a config that is not a
dict, a ``configurable`` that is not one, a ``recursion_limit`` that is no number, an
unknown durability, and, with a checkpointer, a missing, ``None`` or empty thread id
each raise at once with what was given, instead of a raw Python error later (or, for the
thread id, every such run sharing one thread named ``"None"``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from threadloom.engine.graph_api import merge_bound_config
from threadloom.engine.runtime import propagate_metadata
from threadloom.types import Durability

DURABILITIES = ("sync", "async", "exit")
_SHAPE = "{'configurable': {'thread_id': ...}}"
_UNSET: Any = object()
NO_THREAD = ("this graph has a checkpointer, so every run needs a thread id: pass "
             "thread_id='...' or config={'configurable': {'thread_id': '...'}}")


def check_durability(durability: Any, where: str) -> Durability:
    """Return ``durability`` if it is ``"sync"``, ``"async"`` or ``"exit"``.

    Raises:
        ValueError: any other value, naming ``where`` it was given (LangGraph accepts any
            value silently; an unknown one then acts as none of the three).
    """
    if durability in DURABILITIES:
        return durability  # type: ignore[no-any-return]
    raise ValueError(f"{where}(durability={durability!r}): durability must be one of "
                     "'sync' | 'async' | 'exit'")


def run_config(
    bound: Mapping[str, Any] | None,
    config: Any,
    thread_id: Any,
    recursion_limit: Any,
    needs_thread: bool,
) -> dict[str, Any]:
    """``config`` over the ``with_config`` one, with the ``thread_id``/``recursion_limit``
    shortcuts applied, ``checkpoint_ns`` defaulted and the thread id a string.

    Args:
        bound: the config bound by ``with_config`` (or None).
        config: the run's config: a dict like ``{"configurable": {"thread_id": ...}}``
            or None.
        thread_id: the ``thread_id=`` shortcut (None: not given).
        recursion_limit: the ``recursion_limit=`` shortcut (None: not given).
        needs_thread: the graph has a checkpointer, so a thread id is required.

    Raises:
        TypeError: ``config`` or ``config["configurable"]`` not a dict;
            ``recursion_limit`` not a number (LangGraph raises a bare ``TypeError`` there).
        ValueError: ``thread_id=`` differs from the config's thread id.
        CheckpointError: ``needs_thread`` and no thread id, or ``None`` or ``""``.
    """
    if config is not None and not isinstance(config, Mapping):
        raise TypeError(f"config must be a dict like {_SHAPE}, got {_shown(config)}")
    out = merge_bound_config(bound, config or {}) if bound else dict(config or {})
    raw = out.get("configurable")
    if raw is not None and not isinstance(raw, Mapping):
        raise TypeError(f"config['configurable'] must be a dict like {{'thread_id': ...}}, "
                        f"got {_shown(raw)}")
    conf = dict(raw or {})
    if thread_id is not None:
        before = conf.get("thread_id")
        if before is not None and str(before) != str(thread_id):
            raise ValueError(
                f"thread_id={thread_id!r} differs from the config's "
                f"configurable thread_id {before!r}; pass the thread id once"
            )
        conf["thread_id"] = thread_id
    given = conf.get("thread_id", _UNSET)
    if given is not _UNSET:
        tid = given
        if tid is None:
            del conf["thread_id"]
        elif not isinstance(tid, str):
            conf["thread_id"] = str(tid)
    propagate_metadata(out, conf)
    conf.setdefault("checkpoint_ns", "")
    out["configurable"] = conf
    if recursion_limit is not None:
        out["recursion_limit"] = _limit(recursion_limit, "recursion_limit=")
    elif "recursion_limit" in out:
        if out["recursion_limit"] is None:  # as LangGraph: the default
            del out["recursion_limit"]
        else:
            _limit(out["recursion_limit"], "config['recursion_limit']")
    if needs_thread and not conf.get("thread_id"):
        from threadloom.errors import CheckpointError

        got = "" if given is _UNSET else f" (got thread_id={given!r})"
        raise CheckpointError(NO_THREAD + got)
    return out


def _limit(value: Any, where: str) -> Any:
    if isinstance(value, (int, float)):  # a float too, as LangGraph compares it
        return value
    raise TypeError(f"{where}: recursion_limit must be an int, got {repr(value)[:80]}")


def _shown(value: Any) -> str:
    text = repr(value)
    text = text if len(text) <= 80 else text[:77] + "..."
    return f"{type(value).__name__} {text}"


__all__ = ["DURABILITIES", "NO_THREAD", "check_durability", "run_config"]
