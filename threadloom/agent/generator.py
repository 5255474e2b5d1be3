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
import json
from contextvars import ContextVar
from typing import Any

from threadloom.agent.serialize_refs import import_path, load_path
from threadloom.engine.runtime import current_task
from threadloom.errors import SerializationError
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

    ``supports_tools`` is whether ``run`` has a ``tools`` parameter (Haystack's test):
    ``create_agent`` refuses tools for a generator without one; ``run`` gets ``tools``
    only when there are some.

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
        # as Haystack's Agent: a generator takes tools when its run has a ``tools`` parameter
        self.supports_tools = _has_parameter(generator.run, "tools")

    def _reply(self, messages: list[BaseMessage], tools: list[dict[str, Any]] | None) -> Any:
        fetched = _FETCHED.get()
        if fetched is not None:  # ``_agenerate`` has called ``run_async`` already
            return fetched
        return self._first(self.generator.run(messages=messages, **_tools_arg(tools)))

    def _first(self, output: Any) -> Any:
        replies = (output or {}).get("replies") or []
        if not replies:
            raise ValueError(f"chat_generator {type(self.generator).__name__} returned "
                             "no replies")
        return _with_usage(replies[0])

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
        reply = self._first(await run_async(messages=msgs, **_tools_arg(tools)))
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

    def to_dict(self) -> dict[str, Any]:
        """``{"type": ..., "init_parameters": {"generator": {...}}}``: the generator's own
        ``to_dict()`` when it has one, else its class path and ``__init__`` parameters read
        from its same-named attributes (as Haystack serializes a component).

        Raises:
            SerializationError: the class is not importable, a required parameter has no
                same-named attribute, or a value is not JSON-able.
        """
        gen = self.generator
        if callable(getattr(gen, "to_dict", None)):
            data = dict(gen.to_dict())
        else:
            data = {"type": import_path(type(gen), "chat_generator class"),
                    "init_parameters": _init_parameters(gen)}
        return {"type": import_path(ChatGeneratorModel, "model class"),
                "init_parameters": {"generator": data}}

    @staticmethod
    def load(params: dict[str, Any], allowed_modules: Any) -> ChatGeneratorModel:
        """Rebuild from ``to_dict()["init_parameters"]``; the generator's class is imported
        only from ``allowed_modules`` (``threadloom.agent.serialize.load_path``)."""
        data = dict(params.get("generator") or {})
        cls = load_path(data.get("type"), allowed_modules, "chat_generator class")
        if callable(getattr(cls, "from_dict", None)):
            return ChatGeneratorModel(cls.from_dict(data))
        return ChatGeneratorModel(cls(**dict(data.get("init_parameters") or {})))

    def __repr__(self) -> str:
        return f"ChatGeneratorModel({type(self.generator).__name__}, calls={self.call_count})"


def _has_parameter(fn: Any, name: str) -> bool:
    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return True  # cannot tell: let the first call say


def _tools_arg(tools: Any) -> dict[str, Any]:
    """``run``'s ``tools`` argument, given only when there are tools (as Haystack's Agent
    calls its generator), so a generator without a ``tools`` parameter runs without."""
    return {"tools": tools} if tools else {}


def _init_parameters(gen: Any) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for name, param in inspect.signature(type(gen).__init__).parameters.items():
        if name == "self" or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        if hasattr(gen, name):
            value = getattr(gen, name)
        elif param.default is not param.empty:
            value = param.default
        else:
            raise SerializationError(
                f"cannot serialize chat_generator {type(gen).__name__}: __init__ parameter "
                f"{name!r} has no attribute of that name; give the class a to_dict()")
        try:
            json.dumps(value)
        except (TypeError, ValueError) as exc:
            raise SerializationError(
                f"cannot serialize chat_generator {type(gen).__name__}: parameter {name!r} "
                f"is not JSON-able ({exc}); give the class a to_dict()") from exc
        params[name] = value
    return params


def _with_usage(reply: Any) -> Any:
    """A reply whose token counts are only in Haystack's ``meta["usage"]``
    (``prompt_tokens``/``completion_tokens``/``total_tokens``), with ``usage_metadata`` set
    from them, so ``context_tokens`` (and a trace) counts what the generator reported;
    ``token_usage`` sums ``meta["usage"]`` itself (``threadloom.agent.usage``)."""
    if not isinstance(reply, AIMessage) or reply.usage_metadata is not None:
        return reply
    usage = reply.response_metadata.get("usage")
    if not isinstance(usage, dict) or not usage:
        return reply
    inp = int(usage.get("prompt_tokens", usage.get("input_tokens")) or 0)
    out = int(usage.get("completion_tokens", usage.get("output_tokens")) or 0)
    total = int(usage.get("total_tokens") or inp + out)
    return reply.model_copy(update={"usage_metadata": {
        "input_tokens": inp, "output_tokens": out, "total_tokens": total}})


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
