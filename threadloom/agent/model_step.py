"""The ``model`` node's work: hooks around one model call, usage, routing.

Before every call the history is repaired (``repair_tool_pairs``: every tool call has
exactly one result, case H04) and the system prompt is put first, never stored (case
H24). Token usage is summed from each reply's ``usage_metadata`` (one per call, whether
the model streamed or not, case H25). ``wrap_model_call`` middleware wraps the call
itself: the first wrapper is the outermost, as LangChain's.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import weakref
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from threadloom.agent.agent_state import add_delta, merge_hook_changes, messages_update
from threadloom.agent.exit import FINISH_EXITS, JUMP_END, jump, max_steps_reached
from threadloom.agent.requests import (
    ModelRequest,
    RunOptions,
    answer_pending,
    repair_tool_pairs,
    request_messages,
    run_options,
)
from threadloom.agent.structured import ProviderStrategy, ToolStrategy
from threadloom.agent.usage import reply_usage, sum_usage
from threadloom.engine.runtime import Runtime, current_task
from threadloom.messages import AIMessage, BaseMessage
from threadloom.types import Command

if TYPE_CHECKING:
    from threadloom.agent.nodes import AgentNodes

Handler = Callable[[ModelRequest], Awaitable[AIMessage]]
_TRACING: list[Any] = []
_NO_SPAN = contextlib.nullcontext()


def _tracing() -> Any:
    if not _TRACING:
        try:
            from threadloom.agent import tracing
        except ImportError:
            tracing = None  # type: ignore[assignment]  # optional extra missing: None marks it
        _TRACING.append(tracing)
    return _TRACING[0]


def tracing_active() -> bool:
    """Whether agent spans are recorded (``threadloom.agent.tracing.tracing_active``)."""
    module = _tracing()
    return module is not None and bool(module.tracing_active())


def span(name: str, attributes: dict[str, Any], active: bool = True, **kwargs: Any) -> Any:
    """``threadloom.agent.tracing.agent_span(name, attributes)``; a no-op when not ``active``."""
    module = _tracing() if active else None
    return module.agent_span(name, attributes, **kwargs) if module is not None else _NO_SPAN


def usage_attributes(target: Any, usage: Any) -> None:
    """Write token usage to a span (``threadloom.agent.usage.*``)."""
    setter = getattr(target, "set_attributes", None)
    if setter is not None and usage:
        setter({f"threadloom.agent.usage.{k}": v for k, v in dict(usage).items()
                if isinstance(v, int)})


Call = Callable[[Any], Awaitable[Any]]


def chain(wrappers: Sequence[Any], base: Call) -> Call:
    """Compose ``async w(request, handler)`` wrappers around ``base``; the first is outermost."""
    handler = base
    for wrapper in reversed(wrappers):
        handler = _bind(wrapper, handler)
    return handler


def _bind(wrapper: Any, inner: Callable[[Any], Awaitable[Any]]) -> Callable[[Any], Awaitable[Any]]:
    async def call(request: Any) -> Any:
        result = wrapper(request, inner)
        return await result if inspect.isawaitable(result) else result

    return call


def context_tokens(message: AIMessage, history: Sequence[BaseMessage]) -> int:
    """The context size after a call: its total tokens, else about four characters a token."""
    usage = message.usage_metadata
    if usage and usage.get("total_tokens"):
        return int(usage["total_tokens"])
    chars = sum(len(m.text) for m in history) + len(message.text)
    return (chars + 3) // 4


class ModelStep:
    """Calls the chat model for the ``model`` node.

    Args:
        model: the chat model.
        tools: ``Tool`` objects offered by default (name -> tool).
        strategy: the structured-output strategy, or None.
        generation_kwargs: the agent's generation settings.
        merge_system: join system messages into the leading one (case H24).
        wrappers: ``wrap_model_call`` middleware.
    """

    def __init__(
        self, model: Any, tools: dict[str, Any], strategy: Any,
        generation_kwargs: dict[str, Any], merge_system: bool, wrappers: Sequence[Any],
    ) -> None:
        self.model = model
        self.tools = tools
        self.strategy = strategy
        self.generation_kwargs = dict(generation_kwargs)
        self.merge_system = merge_system
        self.wrappers = list(wrappers)
        self._wire: dict[int, tuple[Any, dict[str, Any]]] = {}
        extra = [strategy.tool_dict()] if isinstance(strategy, ToolStrategy) else []
        self.default_tools: list[Any] = [*tools.values(), *extra]
        self.default_wire = [self.wire(t) for t in self.default_tools]
        self.provider_strategy = strategy if isinstance(strategy, ProviderStrategy) else None
        self.response_format = (
            strategy.response_format() if self.provider_strategy is not None else None)
        self.handler = chain(self.wrappers, self._handle) if self.wrappers else None
        self.nodes: Any = None  # the AgentNodes this step serves (set by AgentNodes)

    def wire(self, t: Any) -> dict[str, Any]:
        """The OpenAI ``tools[]`` dict of a tool (cached per tool object)."""
        if isinstance(t, dict):
            return t
        hit = self._wire.get(id(t))
        if hit is None or hit[0] is not t:
            hit = self._wire[id(t)] = (t, t.to_openai())
        return hit[1]

    def offered(self, state: dict[str, Any], opts: RunOptions) -> list[Any]:
        """The tools offered in this run: the run's tool names (or all), plus run-time ones."""
        names = opts.tool_names
        if names is None and not opts.extra_tools:
            return self.default_tools
        chosen = list(self.tools.values()) if names is None else [
            t for t in [*self.tools.values(), *opts.extra_tools] if t.name in names]
        if names is None:
            chosen += list(opts.extra_tools)
        if isinstance(self.strategy, ToolStrategy):
            chosen.append(self.strategy.tool_dict())
        return chosen

    # -- the node ---------------------------------------------------------------------------

    async def run(self, state: dict[str, Any],
                   opts: RunOptions | None = None) -> dict[str, Any] | Command:
        """The ``model`` node (``AgentNodes.model``), for the agent ``nodes`` is bound to.

        Without hooks around the call, ``wrap_model_call`` middleware, tracing or a
        streaming callback (the usual run) the model is called right here, one coroutine
        from the engine; the writes are those of the general path (``__call__``).
        """
        nodes = self.nodes
        if opts is None:
            opts = run_options()
        hooks = nodes.hooks.hooks  # HookRunner.has(point) is bool(hooks[point])
        if (self.handler is not None or opts.trace or opts.streaming_callback is not None
                or hooks["before_llm"] or hooks["after_llm"]
                or state.get("stop_run") is not None):
            return await self(nodes, state, opts)
        stored = state["messages"]
        if (state.get("step_count") or 0) >= nodes.rules.max_steps:
            return await self(nodes, state, opts)
        history = repair_tool_pairs(stored)
        prompts = nodes.prompts
        system = prompts.system_text(prompts.values(state)) if (
            prompts.system is not None) else None
        if opts.tool_names is None and not opts.extra_tools:  # what offered() returns then
            wire = self.default_wire
        else:
            tools = self.offered(state, opts)
            wire = self.default_wire if tools is self.default_tools else [
                self.wire(t) for t in tools]
        kwargs = self.generation_kwargs
        if opts.generation_kwargs:
            kwargs = {**kwargs, **opts.generation_kwargs}
        reply = await self.model.ainvoke(
            request_messages(system, history, self.merge_system), tools=wire or None,
            tool_choice=None, response_format=self.response_format, **kwargs)
        update: dict[str, Any] = {"step_count": 1}
        usage = reply_usage(reply)
        if usage is not None:
            update["token_usage"] = usage
        update["context_tokens"] = context_tokens(reply, history)
        if self.provider_strategy is not None and _final_text(reply):
            update["structured_response"] = self.provider_strategy.parse(reply.text)
        update["messages"] = [reply] if history is stored else messages_update(
            stored, [*history, reply])
        return update

    async def __call__(self, nodes: AgentNodes, state: dict[str, Any],
                       opts: RunOptions) -> dict[str, Any] | Command:
        """The ``model`` node, every case (hooks, middleware, tracing, streaming)."""
        stored = state["messages"]
        update: dict[str, Any] = {}
        messages, view = stored, state
        hooks = nodes.hooks
        stop = state.get("stop_run")  # set by a hook since the last model call
        if hooks.has("before_llm"):
            update, control, messages, view = await hooks.run(
                "before_llm", state, messages, opts.hook_context)
            if control.stop_run is not None:
                stop = control.stop_run
            elif control.jump_to in ("end", "tools"):
                return self._leave(nodes, stored, messages, update, control)
        if stop is not None:  # Haystack: a stop ends the run before the next model call
            update["exit_reason"] = stop
            messages = answer_pending(messages, f"the run was stopped by a hook ({stop})")
            update["messages"] = messages_update(stored, messages)
            return jump(update, "end")
        steps = (state.get("step_count") or 0) + update.get("step_count", 0)
        if steps >= nodes.rules.max_steps:
            update["exit_reason"] = max_steps_reached(nodes.rules.max_steps)
            messages = answer_pending(messages, "the run reached max_agent_steps")
            update["messages"] = messages_update(stored, messages)
            return jump(update, "end")
        history = repair_tool_pairs(messages)
        system = nodes.prompts.system_text(nodes.prompts.values(view)) if (
            nodes.prompts.system is not None) else None
        if opts.trace:
            attributes = {"threadloom.agent.step": steps + 1,
                          "threadloom.agent.exit_conditions": nodes.rules.names}
            with span("threadloom.agent.step", attributes) as step_span:
                reply = await self._ask(system, history, view, opts, steps + 1)
                usage_attributes(step_span, reply.usage_metadata)
        else:
            reply = await self._ask(system, history, view, opts, steps + 1)
        add_delta(update, "step_count", 1)
        usage = reply_usage(reply)
        if usage is not None:
            add_delta(update, "token_usage", usage)
        update["context_tokens"] = context_tokens(reply, history)
        if self.provider_strategy is not None and _final_text(reply):
            update["structured_response"] = self.provider_strategy.parse(reply.text)
        if not hooks.has("after_llm"):
            # the usual case, an unchanged history plus the reply, needs no comparison
            update["messages"] = [reply] if history is stored else messages_update(
                stored, [*history, reply])
            return update
        messages = [*history, reply]
        values = _after_values(view, update, steps)
        changes, control, messages, _ = await hooks.run(
            "after_llm", values, messages, opts.hook_context)
        merge_hook_changes(update, changes)
        if control.stop_run is not None:
            update["stop_run"] = control.stop_run  # the next model call will not happen
        if control.jump_to is not None:
            return self._leave(nodes, stored, messages, update, control)
        update["messages"] = messages_update(stored, messages)
        return update

    def _leave(self, nodes: AgentNodes, stored: list[BaseMessage], messages: list[BaseMessage],
               update: dict[str, Any], control: Any) -> dict[str, Any] | Command:
        if control.jump_to == "end":
            update["exit_reason"] = JUMP_END
            why, to = "the run was ended by a hook", "end"
        else:
            why, to = f"a hook jumped to {control.jump_to!r}", control.jump_to
        if to != "tools":
            messages = answer_pending(messages, why)
        update["messages"] = messages_update(stored, messages)
        return update if to is None else jump(update, to)

    async def _ask(self, system: str | None, history: list[BaseMessage], state: dict[str, Any],
                   opts: RunOptions, step: int) -> AIMessage:
        tools = self.offered(state, opts)
        kwargs = self.generation_kwargs
        if opts.generation_kwargs:
            kwargs = {**kwargs, **opts.generation_kwargs}
        if self.handler is None:
            wire = self.default_wire if tools is self.default_tools else [
                self.wire(t) for t in tools]
            msgs = request_messages(system, history, self.merge_system)
            if not opts.trace and opts.streaming_callback is None:  # ``call``, one frame less
                return await self.model.ainvoke(msgs, tools=wire or None, tool_choice=None,
                                                response_format=self.response_format, **kwargs)
            if not opts.trace:
                return await self.call(self.model, msgs, wire, None, self.response_format,
                                       kwargs, opts)
            with span("threadloom.agent.step.llm", {"threadloom.agent.step": step}) as llm_span:
                reply = await self.call(self.model, msgs, wire, None, self.response_format,
                                        kwargs, opts)
                usage_attributes(llm_span, reply.usage_metadata)
                return reply
        task = current_task()
        config = task.config if task is not None else {}
        runtime = Runtime(config=config, node="model", step=task.step if task else 0,
                          remaining_steps=task.remaining_steps if task else 0,
                          stream_writer=lambda _: None, context=opts.user_context)
        request = ModelRequest(
            model=self.model, messages=history, system_prompt=system, tools=tools,
            response_format=self.response_format, generation_kwargs=dict(kwargs), state=state,
            config=config, runtime=runtime, merge_system_messages=self.merge_system)
        with span("threadloom.agent.step.llm", {"threadloom.agent.step": step},
                  opts.trace) as llm_span:
            reply = await self.handler(request)
            usage_attributes(llm_span, reply.usage_metadata)
            return reply

    async def _handle(self, request: ModelRequest) -> AIMessage:
        wire = [self.wire(t) for t in request.tools]
        return await self.call(request.model, request.request_messages(), wire,
                               request.tool_choice, request.response_format,
                               request.generation_kwargs, run_options())

    @staticmethod
    async def call(model: Any, messages: list[BaseMessage], tools: list[dict[str, Any]],
                   tool_choice: Any, response_format: Any, kwargs: dict[str, Any],
                   opts: RunOptions) -> AIMessage:
        """One model call; with a ``streaming_callback`` the reply is streamed through it."""
        callback = opts.streaming_callback
        if callback is None:
            return await model.ainvoke(messages, tools=tools or None, tool_choice=tool_choice,
                                       response_format=response_format, **kwargs)
        from threadloom.models.tool_calls import ChunkAccumulator

        _warn_if_blocking(callback)
        acc = ChunkAccumulator.for_model(model)
        async for chunk in model.astream(messages, tools=tools or None, tool_choice=tool_choice,
                                         response_format=response_format, **kwargs):
            result = callback(chunk)
            if inspect.isawaitable(result):
                await result
            acc.add(chunk)
        return acc.result()


def _warn_if_blocking(callback: Any) -> None:
    """Warn (once per callback) that a sync ``streaming_callback`` in an async run runs on
    the event loop and may block it (as Haystack warns)."""
    if inspect.iscoroutinefunction(callback) or inspect.iscoroutinefunction(
            type(callback).__call__):
        return
    task = current_task()
    if task is not None and not task.blocking_ok:
        try:
            if callback in _WARNED:
                return
            _WARNED.add(callback)
        except TypeError:  # not weakly referable: warned at every call
            pass
        _LOG.warning("A sync streaming callback is used in an async run: it runs on the event "
                     "loop and may block it; pass an async callback")


_WARNED: weakref.WeakSet[Any] = weakref.WeakSet()
_LOG = logging.getLogger("threadloom.agent")


def _final_text(reply: AIMessage) -> bool:
    return not (reply.tool_calls or reply.invalid_tool_calls) and bool(
        reply.text.strip()) and reply.finish_reason not in FINISH_EXITS


def _after_values(view: dict[str, Any], update: dict[str, Any], steps: int) -> dict[str, Any]:
    values = {**view, "step_count": steps + 1}
    if "token_usage" in update:
        values["token_usage"] = sum_usage(view.get("token_usage"), update["token_usage"])
    for key in ("context_tokens", "structured_response"):
        if key in update:
            values[key] = update[key]
    return values


__all__ = ["ModelStep", "chain", "context_tokens", "span", "tracing_active",
           "usage_attributes"]
