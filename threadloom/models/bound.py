"""A chat model with arguments bound to every call: LangChain's ``bind_tools`` / ``bind``.

LangGraph code written for LangChain models binds the tools once and calls the bound
model inside a node (``llm.bind_tools(tools).invoke(state["messages"])``). threadloom's
models take tools per call (``model.invoke(messages, tools=[...])``); ``bind_tools`` and
``bind`` return a ``BoundChatModel`` that adds the bound arguments to each call, so both
spellings work. Arguments given to a call win over bound ones.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

from threadloom.messages.types import AIMessage, AIMessageChunk


class Bindings:
    """LangChain's ``bind_tools`` / ``bind`` / ``with_structured_output`` for any model
    class with ``invoke``/``ainvoke``/``stream``/``astream`` taking ``tools=`` and
    keyword arguments (``BaseChatModel``, ``LocalChatModel``)."""

    def bind_tools(self, tools: Sequence[Any], *, tool_choice: Any = None,
                   **kwargs: Any) -> BoundChatModel:
        """This model with ``tools`` (and ``tool_choice``, other call arguments) given to
        every call, as LangChain's ``bind_tools``; ``model.invoke(messages, tools=...)``
        is the same call. Returns a ``BoundChatModel``."""
        return BoundChatModel(self, {"tools": list(tools)}).bind(tool_choice=tool_choice,
                                                                  **kwargs)

    def bind(self, **kwargs: Any) -> BoundChatModel:
        """This model with ``kwargs`` given to every call, as LangChain's ``bind``."""
        return BoundChatModel(self, {}).bind(**kwargs)

    def with_structured_output(self, schema: Any, *, method: str | None = None,
                               include_raw: bool = False, **_: Any) -> Any:
        """This model answering with ``schema`` values (a pydantic class: instances; a
        ``TypedDict`` or JSON-schema dict: dicts), as LangChain's
        ``with_structured_output``; see ``threadloom.models.structured_output``.

        Raises:
            ValueError: an unknown ``method``.
        """
        from threadloom.models.structured_output import StructuredChatModel

        return StructuredChatModel(self, schema, method=method, include_raw=include_raw)


class BoundChatModel(Bindings):
    """``model`` with ``bound`` keyword arguments (``tools``, ``tool_choice``,
    ``response_format``, generation settings) added to every call.

    Args:
        model: any threadloom chat model (``invoke``/``ainvoke``/``stream``/``astream``
            taking ``tools=`` and keyword arguments).
        bound: the arguments to add; a call's own arguments win.

    Other attributes (``model_name``, ``supports_tools``...) are the model's own.
    """

    def __init__(self, model: Any, bound: dict[str, Any]) -> None:
        self.bound_model = model
        self.kwargs = dict(bound)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["bound_model"], name)

    def _args(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        return {**self.kwargs, **{k: v for k, v in kwargs.items() if v is not None}}

    def bind_tools(self, tools: Sequence[Any], *, tool_choice: Any = None,
                   **kwargs: Any) -> BoundChatModel:
        """These bindings with ``tools`` (and ``tool_choice``) bound too."""
        return self.bind(tools=list(tools), tool_choice=tool_choice, **kwargs)

    def bind(self, **kwargs: Any) -> BoundChatModel:
        """These bindings plus ``kwargs`` (later bindings win)."""
        return BoundChatModel(self.bound_model, self._args(kwargs))

    def invoke(self, messages: Any, **kwargs: Any) -> AIMessage:
        """The model's ``invoke`` with the bound arguments."""
        return self.bound_model.invoke(messages, **self._args(kwargs))  # type: ignore[no-any-return]

    async def ainvoke(self, messages: Any, **kwargs: Any) -> AIMessage:
        """The model's ``ainvoke`` with the bound arguments."""
        return await self.bound_model.ainvoke(messages, **self._args(kwargs))  # type: ignore[no-any-return]

    def stream(self, messages: Any, **kwargs: Any) -> Iterator[AIMessageChunk]:
        """The model's ``stream`` with the bound arguments."""
        return self.bound_model.stream(messages, **self._args(kwargs))  # type: ignore[no-any-return]

    def astream(self, messages: Any, **kwargs: Any) -> AsyncIterator[AIMessageChunk]:
        """The model's ``astream`` with the bound arguments."""
        return self.bound_model.astream(messages, **self._args(kwargs))  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        return f"BoundChatModel({self.bound_model!r}, {sorted(self.kwargs)})"
