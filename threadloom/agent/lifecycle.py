"""The agent's lifecycle (Haystack's component contract): ``warm_up``, ``close`` and their
async twins, over the model, the tools and the hooks.

Each method calls the same-named method of every object that has one, once per object
(a hook given for two points is warmed once). The async twins prefer an object's
``warm_up_async`` / ``close_async`` (or ``awarm_up`` / ``aclose``) and fall back to the
sync method. ``Agent.run`` / ``run_async`` warm up before each run, as Haystack's do.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any


class AgentLifecycle:
    """Mixin of ``Agent``: lifecycle methods."""

    model: Any
    tools: list[Any]
    agent_nodes: Any
    config: dict[str, Any]

    def _lifecycle_objects(self) -> Iterator[Any]:
        seen: set[int] = set()
        hooks = [getattr(fn, "hook_object", None) for fns in
                 self.agent_nodes.hooks.hooks.values() for fn in fns]
        for obj in (self.model, *self.tools, *(h for h in hooks if h is not None)):
            if id(obj) not in seen:
                seen.add(id(obj))
                yield obj

    def warm_up(self) -> None:
        """Call ``warm_up()`` on the model, tools and hook objects that have one."""
        for obj in self._lifecycle_objects():
            method = getattr(obj, "warm_up", None)
            if callable(method):
                method()

    async def warm_up_async(self) -> None:
        """Async ``warm_up``: ``warm_up_async()``/``awarm_up()`` where an object has one."""
        await _each(self._lifecycle_objects(), ("warm_up_async", "awarm_up", "warm_up"))

    awarm_up = warm_up_async

    def close(self) -> None:
        """Call ``close()`` on the model, tools and hook objects that have one."""
        for obj in self._lifecycle_objects():
            method = getattr(obj, "close", None)
            if callable(method):
                method()

    async def close_async(self) -> None:
        """Async ``close``: ``close_async()``/``aclose()`` where an object has one."""
        await _each(self._lifecycle_objects(), ("close_async", "aclose", "close"))

    aclose = close_async


async def _each(objects: Iterator[Any], names: tuple[str, ...]) -> None:
    for obj in objects:
        method = next((m for m in (getattr(obj, n, None) for n in names) if callable(m)), None)
        result = method() if method is not None else None
        if inspect.isawaitable(result):
            await result


__all__ = ["AgentLifecycle"]
