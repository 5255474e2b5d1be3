"""A Haystack-style chat generator as a threadloom chat model.

Haystack's ``Agent`` takes a ``chat_generator``: an object whose
``run(messages=..., tools=...)`` returns ``{"replies": [message, ...]}``. ``ChatGeneratorModel``
wraps such an object so ``create_agent`` can use it: each model call is one ``run`` (looked
up at call time, so a test may patch ``generator.run``), the first reply is the answer, and
the generator's lifecycle methods (``warm_up``, ``warm_up_async``, ``close``,
``close_async``) are the model's, so ``Agent.warm_up()`` / ``close()`` reach it.

Replies are taken as ``ScriptedChatModel`` takes script entries (an ``AIMessage``, a
string or a dict of fields); tools are passed as OpenAI tool dicts.
"""

from __future__ import annotations

import inspect
from typing import Any

from threadloom.messages import BaseMessage
from threadloom.models.scripted import ScriptedChatModel


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
        replies = self.generator.run(messages=messages, tools=tools).get("replies") or []
        if not replies:
            raise ValueError(f"chat_generator {type(self.generator).__name__}.run returned "
                             "no replies")
        return replies[0]

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
