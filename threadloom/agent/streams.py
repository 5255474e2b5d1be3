"""The agent's ``updates`` and ``values`` streams as the LangChain agents guide shows them.

The agent graph keeps its bookkeeping nodes explicit (``before_run`` resets the run's
counters, ``exit_check`` names the exit reason, ``after_run`` sets ``last_message``), but
a reader of the stream wants the conversation: ``model``, ``tools``, ``model`` in
``updates``, and in ``values`` one state per change of it (1, 2, 3, 4 messages). So a
step that changed nothing a user sees is left out of both modes:

- ``updates``: a bookkeeping node's entry whose writes touch only the agent's own
  bookkeeping keys (counters, ``exit_reason``, ``last_message``, an empty message list);
  an entry that adds messages (a rendered ``user_prompt``, a hook's message) or writes a
  user key stays.
- ``values``: a state whose messages (by id) and user keys equal the last state yielded.

Other modes, subgraph namespaces and every checkpoint are untouched: ``get_state``,
``get_state_history`` and the ``debug``/``checkpoints`` modes still show every step.
"""

from __future__ import annotations

import inspect
from typing import Any

QUIET_NODES = frozenset({"before_run", "exit_check", "after_run"})
BOOKKEEPING = frozenset({
    "step_count", "token_usage", "tool_call_counts", "exit_reason", "last_message",
    "context_tokens", "stop_run", "jump_to", "continue_run",
})


def default_mode() -> Any:
    """The engine's default ``stream_mode`` (read from ``CompiledGraph.astream``)."""
    from threadloom.engine.compiled import CompiledGraph

    return inspect.signature(CompiledGraph.astream).parameters["stream_mode"].default


def _quiet_write(write: Any) -> bool:
    if write is None:
        return True
    if isinstance(write, list | tuple):
        return all(_quiet_write(w) for w in write)
    if not isinstance(write, dict):
        return False
    return all(k in BOOKKEEPING or (k == "messages" and not v) for k, v in write.items())


class QuietSteps:
    """Filters one agent stream (see the module docstring).

    Args:
        stream_mode: the run's ``stream_mode`` (a string or a list).
        subgraphs: the run yields ``(namespace, ...)`` tuples.
    """

    def __init__(self, stream_mode: Any, subgraphs: bool) -> None:
        self.single = isinstance(stream_mode, str)
        self.mode = stream_mode if self.single else None
        modes = {stream_mode} if self.single else set(stream_mode)
        self.active = bool(modes & {"updates", "values"})
        self.subgraphs = subgraphs
        self.last: Any = None

    def keep(self, item: Any) -> Any:
        """``item`` as it should be yielded, or None to leave it out."""
        if not self.active:
            return item
        if self.subgraphs:
            namespace, *rest = item
            if namespace:
                return item
            mode, chunk = (self.mode, rest[0]) if self.single else rest
        else:
            mode, chunk = (self.mode, item) if self.single else item
        if mode == "updates" and isinstance(chunk, dict):
            kept = {n: w for n, w in chunk.items() if n not in QUIET_NODES or not _quiet_write(w)}
            if not kept:
                return None
            if len(kept) != len(chunk):
                return self._rebuild(item, kept)
        elif mode == "values" and isinstance(chunk, dict):
            seen = (tuple(getattr(m, "id", None) for m in chunk.get("messages") or ()),
                    {k: v for k, v in chunk.items() if k not in BOOKKEEPING and k != "messages"})
            if self.last is not None and seen == self.last:
                return None
            self.last = seen
        return item

    def _rebuild(self, item: Any, chunk: dict[str, Any]) -> Any:
        if self.subgraphs:
            return (item[0], chunk) if self.single else (item[0], item[1], chunk)
        return chunk if self.single else (item[0], chunk)


__all__ = ["BOOKKEEPING", "QUIET_NODES", "QuietSteps", "default_mode"]
