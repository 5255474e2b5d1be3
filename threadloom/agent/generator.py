"""A Haystack-style chat generator as a threadloom chat model.

Haystack's ``Agent`` takes a ``chat_generator``: an object whose
``run(messages=..., tools=...)`` returns ``{"replies": [message, ...]}``. ``ChatGeneratorModel``
wraps such an object so ``create_agent`` can use it: each model call is one ``run`` (looked
up at call time, so a test may patch ``generator.run``), the first reply is the answer, and
the generator's lifecycle methods (``warm_up``, ``warm_up_async``, ``close``,
``close_async``) are the model's, so ``Agent.warm_up()`` / ``close()`` reach it.

Replies are taken as ``ScriptedChatModel`` takes script entries (an ``AIMessage``, a
string or a dict of fields); tools are passed as OpenAI tool dicts. Sync runs
(``invoke``, ``Agent.run``) call its ``run``; async runs (``ainvoke``, ``Agent.run_async``)
its ``run_async`` when it has one, else its ``run`` in a worker thread.
"""

from __future__ import annotations

import inspect
from contextvars import ContextVar
from typing import Any

from threadloom.engine.runtime import current_task
from threadloom.messages import AIMessage, BaseMessage
from threadloom.models.scripted import ScriptedChatModel
from threadloom.workers import to_worker

# the reply ``run_async`` gave, for the ``_generate`` call that turns it into the answer
_FETCHED: ContextVar[Any] = ContextVar("threadloom_generator_reply", default=None)


class ChatGeneratorModel(ScriptedChatModel):
    """A chat model that forwards each call to ``generator.run(messages=, tools=)``.

    Args:
        generator: the Haystack-style chat generator.
        name: the ``model_name`` put in ``response_metadata`` when the reply has none.

    Raises:
        TypeError: ``generator`` has no callable ``run``.
        ValueError: (when called) ``run`` returned no replies.
    """

    def __init__(self, generator: Any, *, name: str = "chat_generator") -> None:
        if not callable(getattr(generator, "run", None)):
            raise TypeError("chat_generator must have a run(messages=..., tools=...) method, "
                            f"got {type(generator).__name__}")
        self.generator = generator
        super().__init__(self._reply, name=name)

    def _reply(self, messages: list[BaseMessage], tools: list[dict[str, Any]] | None) -> Any:
        fetched = _FETCHED.get()
        if fetched is not None:  # ``_agenerate`` has called ``run_async`` already
            return fetched
        return self._first(self.generator.run(messages=messages, tools=tools))

    def _first(self, output: Any) -> Any:
        replies = (output or {}).get("replies") or []
        if not replies:
            raise ValueError(f"chat_generator {type(self.generator).__name__} returned "
                             "no replies")
        return replies[0]

    async def _agenerate(self, msgs: list[BaseMessage], tools: list[dict] | None,
                         opts: dict[str, Any]) -> AIMessage:
        """An async call: the generator's ``run_async`` when it has one, else its ``run``
        in a worker thread (as Haystack's ``Agent.run_async``)."""
        task = current_task()
        if task is not None and task.blocking_ok:  # a sync run (``invoke``, ``Agent.run``)
            return self._generate(msgs, tools, opts)
        run_async = getattr(self.generator, "run_async", None)
        if not callable(run_async):
            return await to_worker(self._generate, msgs, tools, opts)
        reply = self._first(await run_async(messages=msgs, tools=tools))
        token = _FETCHED.set(reply)
        try:
            return self._generate(msgs, tools, opts)
        finally:
            _FETCHED.reset(token)

    def warm_up(self) -> None:
        """The generator's ``warm_up()``, when it has one."""
        _call(self.generator, ("warm_up",))

    async def warm_up_async(self) -> None:
        """The generator's ``warm_up_async()`` (else its ``warm_up()``)."""
        await _acall(self.generator, ("warm_up_async", "warm_up"))

    def close(self) -> None:
        """The generator's ``close()``, when it has one."""
        _call(self.generator, ("close",))

    async def close_async(self) -> None:
        """The generator's ``close_async()`` (else its ``close()``)."""
        await _acall(self.generator, ("close_async", "close"))

    def __repr__(self) -> str:
        return f"ChatGeneratorModel({type(self.generator).__name__}, calls={self.call_count})"


def _method(obj: Any, names: tuple[str, ...]) -> Any:
    return next((m for m in (getattr(obj, n, None) for n in names) if callable(m)), None)


def _call(obj: Any, names: tuple[str, ...]) -> None:
    method = _method(obj, names)
    if method is not None:
        method()


async def _acall(obj: Any, names: tuple[str, ...]) -> None:
    method = _method(obj, names)
    result = method() if method is not None else None
    if inspect.isawaitable(result):
        await result


__all__ = ["ChatGeneratorModel"]
