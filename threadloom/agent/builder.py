"""``create_agent``: a tool-calling agent compiled into an explicit threadloom graph.

```
START -> before_run -> model -> tools -> exit_check -> after_run -> END
                        ^    \\________________^   |
                        |_________________________| (continue)
```

``tools`` goes straight back to ``model`` when no exit can hold there (see
``threadloom.agent.exit.tools_route``).

The result, an ``Agent``, *is* a ``CompiledGraph``: streaming, thread ids, interrupts,
time travel and drawing work on it unchanged. It adds ``run``/``arun`` (Haystack's
``Agent.run``), run-time options, lifecycle methods, ``clone`` and ``to_dict``.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from typing import Any

from threadloom.agent.agent_prompts import Prompts
from threadloom.agent.agent_state import HookBridge, hook_schema
from threadloom.agent.arguments import check_model, hooks_of, takes_tools, tools_of
from threadloom.agent.exit import (
    after_before_run,
    after_exit_check,
    after_model,
    make_rules,
    tools_route,
)
from threadloom.agent.haystack_api import HaystackAgentAPI
from threadloom.agent.lifecycle import AgentLifecycle
from threadloom.agent.model_step import ModelStep, span, tracing_active, usage_attributes
from threadloom.agent.nodes import AgentNodes, HookRunner
from threadloom.agent.requests import RunOptions
from threadloom.agent.schemas import OWNED_KEYS, build_schemas
from threadloom.agent.streams import QuietSteps, default_mode
from threadloom.agent.structured import resolve_strategy
from threadloom.agent.tool_step import ToolStep
from threadloom.engine.compiled import CompiledGraph
from threadloom.engine.graph import StateGraph
from threadloom.nodes.tool_node import ToolNode
from threadloom.tools import Tool, tool
from threadloom.types import END, START


def create_agent(
    model: Any,
    tools: Sequence[Tool | Callable[..., Any]] | None = None,
    *,
    system_prompt: str | None = None,
    user_prompt: str | None = None,
    required_variables: str | Sequence[str] | None = "*",
    state_schema: Any = None,
    response_format: Any = None,
    exit_conditions: Sequence[str] | None = None,
    max_agent_steps: int = 100,
    hooks: Any = None,
    middleware: Sequence[Any] | None = None,
    checkpointer: Any = None,
    name: str | None = None,
    generation_kwargs: Mapping[str, Any] | None = None,
    merge_system_messages: bool = False,
    handle_tool_errors: Any = True,
    interrupt_before: Sequence[str] | None = None,
    interrupt_after: Sequence[str] | None = None,
    streaming_callback: Callable[[Any], Any] | None = None,
    enable_streaming_callback_passthrough: bool = False,
    busy_timeout: float | None = None,
    render_budget: Mapping[str, Any] | None = None,
    tool_concurrency_limit: int | None = None,
) -> Agent:
    """Build a tool-calling agent (LangChain's ``create_agent`` + Haystack's ``Agent``).

    Args:
        model: a chat model (``ChatModel``), or a ``"provider:model"`` string for
            ``init_chat_model``.
        tools: ``Tool`` objects or plain functions (wrapped with ``@tool``).
        system_prompt: Jinja2 template of the system prompt; sent first in every request,
            never stored in the history (case H24).
        user_prompt: Jinja2 template rendered once per run into messages appended after
            the messages passed in (``{% message role=... %}`` blocks allowed).
        required_variables: ``"*"`` (all template variables required), None (all
            optional: missing ones render empty) or a list of names.
        state_schema: extra state keys: ``{key: {"type": T, "handler": fn}}`` (Haystack),
            or a TypedDict / pydantic class (e.g. extending ``AgentState``).
        response_format: a pydantic model class, ``ToolStrategy(...)`` or
            ``ProviderStrategy(...)``; the run then returns ``structured_response``.
        exit_conditions: ``"text"`` and/or tool names (default ``["text"]``).
        max_agent_steps: most model calls per run (exit reason ``"max_agent_steps"``).
        hooks: ``{point: [fn, ...]}`` or ``@hook("point")`` functions; see ``HOOK_POINTS``.
        middleware: ``AgentMiddleware`` objects; their hooks run after ``hooks``.
        checkpointer: where threads are saved.
        name: the agent's (graph's) name.
        generation_kwargs: model settings (``temperature``...); run-time ones win.
        merge_system_messages: join every system message of a request into the leading
            one, for chat templates that reject a system message anywhere else (off: the
            order is sent unchanged).
        handle_tool_errors: as ``ToolNode``'s, but default ``True``: a tool's exception
            becomes an error tool message (case H15, Haystack's default; LangChain's
            ``create_agent`` re-raises it). A tool's ``Command`` without its call's
            ``ToolMessage`` gets an "updated the state" one (``answer_commands``).
        interrupt_before / interrupt_after: agent node names to pause around.
        streaming_callback: called with every ``AIMessageChunk`` of every model call of
            every run (Haystack's ``Agent(streaming_callback=...)``); a run's own
            ``streaming_callback=`` wins. Sync or async.
        enable_streaming_callback_passthrough: the callback also gets each tool result
            (a ``ToolMessage``) as the tools finish.
        busy_timeout: seconds a run on a thread that another run holds waits for it to
            finish before ``ThreadBusyError`` (default: fail at once).
        render_budget: raises the prompt sandbox's limits: ``{"max_steps": n,
            "max_output_chars": n, "render_budget_s": s}``.
        tool_concurrency_limit: the most tool calls of one reply run at a time (Haystack's;
            default: all at once).

    Returns:
        An ``Agent`` (a ``CompiledGraph``).

    Raises:
        TypeError: tools (or a tool-strategy ``response_format``) for a model whose
            ``supports_tools`` is False; a bad ``response_format``.
        ValueError: a reserved key in ``state_schema``; a template variable that
            collides with a state key or run argument; an unknown exit condition or
            hook point; two tools with one name; ``tool_concurrency_limit`` below 1.
    """
    settings = {k: v for k, v in locals().items()}
    if isinstance(model, str):
        from threadloom.models import init_chat_model

        model = init_chat_model(model)
    check_model(model)
    tool_list = tools_of(tools)
    if tool_concurrency_limit is not None and (
            not isinstance(tool_concurrency_limit, int) or tool_concurrency_limit < 1):
        raise ValueError(f"create_agent(tool_concurrency_limit={tool_concurrency_limit!r}): "
                         "tool_concurrency_limit must be greater than or equal to 1 (or None)")
    if not takes_tools(model):
        raise TypeError(
            f"create_agent(model=...): {type(model).__name__}.ainvoke takes no 'tools' "
            f"parameter (tools={[t.name for t in tool_list]}); the agent calls "
            "ainvoke(messages, tools=..., tool_choice=..., response_format=..., **settings): "
            "use a chat model (ScriptedChatModel, OpenAIChatModel, a subclass of "
            "threadloom.models.BaseChatModel)")
    if tool_list and not getattr(model, "supports_tools", True):
        raise TypeError(
            f"create_agent(tools=...): {type(getattr(model, 'generator', model)).__name__} "
            "does not accept tools parameter in its run method: it cannot take tools "
            "(supports_tools is False), but "
            f"{len(tool_list)} tool(s) were given; use a tool-calling model or no tools")
    strategy = resolve_strategy(response_format, model)
    by_name = {t.name: t for t in tool_list}
    return_direct = [t.name for t in tool_list if t.return_direct]
    rules = make_rules(exit_conditions, set(by_name), return_direct, max_agent_steps)
    prompts = Prompts(system_prompt, user_prompt, required_variables, render_budget)
    schemas = build_schemas(state_schema, prompts.sources(), strategy,
                            [getattr(m, "state_schema", None) for m in middleware or ()])
    hook_map, model_wrappers, tool_wrappers = hooks_of(hooks, middleware)
    bridge = HookBridge(hook_schema(schemas.hook_entries, sorted(prompts.variables)),
                        schemas.reduced)
    tool_node = ToolNode(tool_list, handle_tool_errors=handle_tool_errors,
                         answer_commands=True, max_concurrency=tool_concurrency_limit)
    tool_node.state_keys = frozenset(schemas.state.__annotations__)
    nodes = AgentNodes(
        ModelStep(model, by_name, strategy, dict(generation_kwargs or {}),
                  merge_system_messages, model_wrappers),
        ToolStep(by_name, tool_node, strategy, tool_wrappers),
        HookRunner(hook_map, bridge), rules, prompts, strategy, schemas.defaults,
    )
    builder = StateGraph(schemas.state, input_schema=schemas.input,
                         output_schema=schemas.output)
    for node, fn in nodes.node_functions().items():
        builder.add_node(node, fn)
    builder.add_edge(START, "before_run")
    builder.add_conditional_edges("before_run", after_before_run, ["model"])
    builder.add_conditional_edges("model", after_model, ["tools", "exit_check"])
    always_check = "exit_check" in {*(interrupt_before or ()), *(interrupt_after or ())}
    after_tools = tools_route(rules, strategy is not None, always_check=always_check)
    builder.add_conditional_edges(
        "tools", after_tools, ["exit_check"] if always_check else ["model", "exit_check"])
    builder.add_conditional_edges("exit_check", after_exit_check, ["model", "after_run"])
    builder.add_edge("after_run", END)
    return Agent(builder, settings=settings, nodes=nodes, checkpointer=checkpointer,
                 busy_timeout=busy_timeout,
                 interrupt_before=interrupt_before, interrupt_after=interrupt_after,
                 name=name or "agent")


_DEFAULT_MODE = default_mode()
_RUN_OPTIONS = frozenset({"hook_context", "generation_kwargs", "streaming_callback", "tools"})
_OWNED = OWNED_KEYS


class Agent(HaystackAgentAPI, AgentLifecycle, CompiledGraph):
    """A compiled agent graph (nodes ``before_run``, ``model``, ``tools``, ``exit_check``,
    ``after_run``); everything a ``CompiledGraph`` does, plus the agent conveniences.

    Run-time options accepted by ``invoke``/``ainvoke``/``stream``/``astream`` (as
    keywords, or as keys of the input dict): ``tools`` (names of configured tools, or
    ``Tool`` objects), ``generation_kwargs``, ``streaming_callback`` (called with every
    ``AIMessageChunk``) and ``hook_context`` (given to hooks taking ``(state, context)``).
    These are never checkpointed: pass them again when resuming a paused run. Without a
    ``recursion_limit``, a run may take
    ``3 * max_agent_steps + 10`` super-steps.

    Attributes:
        config: the ``create_agent`` arguments (for ``clone`` and ``to_dict``).
    """

    def __init__(self, builder: StateGraph, *, settings: dict[str, Any], nodes: AgentNodes,
                 checkpointer: Any, interrupt_before: Sequence[str] | None,
                 interrupt_after: Sequence[str] | None, name: str,
                 busy_timeout: float | None = None) -> None:
        from threadloom.engine.analysis import validate

        before, after = list(interrupt_before or ()), list(interrupt_after or ())
        validate(builder, before + after)
        builder.compiled = True
        super().__init__(builder, checkpointer=checkpointer, interrupt_before=frozenset(before),
                         interrupt_after=frozenset(after), durability="sync", name=name,
                         busy_timeout=busy_timeout or 0.0)
        self.config = settings
        self.agent_nodes = nodes
        self.model = nodes.model_step.model
        self.tools = list(nodes.tool_step.tools.values())

    # -- running ----------------------------------------------------------------------------

    def _prepare(self, input: Any, options: dict[str, Any]) -> tuple[Any, RunOptions]:
        if isinstance(input, Mapping) and not _OWNED.isdisjoint(input):
            raise ValueError(
                f"input keys {sorted(_OWNED.intersection(input))} belong to the agent, which "
                "sets them during the run (as Haystack's reserved state keys); leave them out")
        context = options.pop("context", None)
        if isinstance(context, RunOptions):
            return input, context
        callback = self.config.get("streaming_callback")
        if options.get("_blocking_ok"):
            _refuse_async_callbacks(callback, options, input)
        passthrough = bool(self.config.get("enable_streaming_callback_passthrough"))
        if type(input) is dict and _RUN_OPTIONS.isdisjoint(input) and _RUN_OPTIONS.isdisjoint(
                options):  # the usual call: no run-time options anywhere
            return dict(input), RunOptions(
                user_context=context, trace=tracing_active(), streaming_callback=callback,
                tool_results=passthrough and callback is not None)
        picked = {key: options.pop(key, None) for key in (
            "hook_context", "generation_kwargs", "streaming_callback", "tools")}
        if isinstance(input, Mapping):
            input = dict(input)
            for key in ("hook_context", "generation_kwargs", "streaming_callback"):
                if key in input:
                    value = input.pop(key)
                    picked[key] = picked[key] if picked[key] is not None else value
            listed = input.pop("tools", None)
            picked["tools"] = picked["tools"] if picked["tools"] is not None else listed
        extra: tuple[Any, ...] = ()
        names = None
        if picked["tools"] is not None:
            names, extra = self._run_tools(picked["tools"])
        callback = picked["streaming_callback"] or callback
        return input, RunOptions(
            hook_context=picked["hook_context"], generation_kwargs=picked["generation_kwargs"],
            streaming_callback=callback, tool_results=passthrough and callback is not None,
            extra_tools=extra,
            user_context=context, tool_names=names, trace=tracing_active())

    def _run_tools(self, tools: Any) -> tuple[tuple[str, ...], tuple[Any, ...]]:
        configured = {t.name: t for t in self.tools}
        names: list[str] = []
        extra: list[Tool] = []
        for item in tools:
            if isinstance(item, str):
                if item not in configured:
                    raise ValueError(f"run-time tool {item!r} is not one of the agent's tools: "
                                     f"{sorted(configured)}")
                names.append(item)
                continue
            built = item if isinstance(item, Tool) else tool(item)
            if configured.get(built.name) is not built:
                extra.append(built)
            names.append(built.name)
        if extra and not getattr(self.model, "supports_tools", True):
            raise TypeError(f"model {self.model!r} cannot take tools (supports_tools is False)")
        return tuple(names), tuple(extra)

    def _limit(self, config: Mapping[str, Any] | None, limit: int | None) -> int | None:
        if limit is not None or (config and "recursion_limit" in config):
            return limit
        return 3 * self.agent_nodes.rules.max_steps + 10

    async def ainvoke(self, input: Any, config: Mapping[str, Any] | None = None,
                      **kwargs: Any) -> dict[str, Any]:
        """Run the agent; see ``CompiledGraph.ainvoke`` and the class docstring for options."""
        input, options = self._prepare(input, kwargs)
        kwargs["recursion_limit"] = self._limit(config, kwargs.get("recursion_limit"))
        if not options.trace:
            return await super().ainvoke(input, config, context=options, **kwargs)
        rules = self.agent_nodes.rules
        attributes = {"threadloom.agent.name": self.name,
                      "threadloom.agent.max_agent_steps": rules.max_steps,
                      "threadloom.agent.exit_conditions": rules.names}
        with span("threadloom.agent.run", attributes, config=config) as run_span:
            out = await super().ainvoke(input, config, context=options, **kwargs)
            if isinstance(out, dict):
                _result_attributes(run_span, out)
        return out

    async def astream(self, input: Any, config: Mapping[str, Any] | None = None,
                      **kwargs: Any) -> AsyncGenerator[Any, None]:
        """Stream the agent's run; see ``CompiledGraph.astream`` and the class docstring."""
        input, options = self._prepare(input, kwargs)
        kwargs["recursion_limit"] = self._limit(config, kwargs.get("recursion_limit"))
        # aclosing: closing this generator early must close (and so cancel) the run now,
        # not whenever the garbage collector finalizes the inner generator.
        quiet = QuietSteps(kwargs.get("stream_mode", _DEFAULT_MODE), kwargs.get("subgraphs", False))
        async with contextlib.aclosing(
            super().astream(input, config, context=options, **kwargs)
        ) as events:
            batched = kwargs.get("_batched", False)  # the sync stream: lists of events
            async for item in events:
                if batched:
                    yield [k for k in map(quiet.keep, item) if k is not None]
                    continue
                kept = quiet.keep(item)
                if kept is not None:
                    yield kept

    # -- configuration ----------------------------------------------------------------------

    def clone(self, **overrides: Any) -> Agent:
        """A new agent from the same ``create_agent`` arguments, with ``overrides`` applied.

        Raises:
            TypeError: an override that is not a ``create_agent`` argument.
        """
        unknown = sorted(set(overrides) - set(self.config))
        if unknown:
            raise TypeError(f"clone() got unknown argument(s) {unknown}; "
                            f"create_agent takes {sorted(self.config)}")
        return create_agent(**{**self.config, **overrides})

    def to_dict(self) -> dict[str, Any]:
        """The agent's configuration as a JSON-able dict (``threadloom.agent.serialize``)."""
        from threadloom.agent.serialize import agent_to_dict

        return agent_to_dict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, allowed_modules: Sequence[str] = (),
                  **kwargs: Any) -> Agent:
        """Rebuild an agent written by ``to_dict`` (see ``agent_from_dict``).

        Args:
            data: the dict.
            allowed_modules: module prefixes whose tools, hooks, schemas and models may
                be imported (your own code: ``"myapp"``); ``threadloom`` always is.
            **kwargs: ``checkpointer`` and ``create_agent`` overrides.
        """
        from threadloom.agent.serialize import agent_from_dict

        return agent_from_dict(data, allowed_modules=allowed_modules, **kwargs)  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        return (f"Agent(name={self.name!r}, model={self.model!r}, "
                f"tools={[t.name for t in self.tools]})")


def _refuse_async_callbacks(init: Any, options: Mapping[str, Any], input: Any) -> None:
    """A sync run (``run``, ``invoke``, ``stream``) cannot await an async
    ``streaming_callback``: ``ValueError``, with Haystack's messages."""
    runtime = options.get("streaming_callback")
    if runtime is None and isinstance(input, Mapping):
        runtime = input.get("streaming_callback")
    for which, callback in (("init", init), ("runtime", runtime)):
        if callback is not None and (inspect.iscoroutinefunction(callback) or
                                     inspect.iscoroutinefunction(type(callback).__call__)):
            raise ValueError(
                f"The {which} callback cannot be a coroutine. A sync run cannot await "
                "an async streaming_callback: use run_async()/ainvoke(), or a sync callback")


def _result_attributes(run_span: Any, out: dict[str, Any]) -> None:
    setter = getattr(run_span, "set_attributes", None)
    if setter is None:
        return
    setter({"threadloom.agent.step_count": out.get("step_count"),
            "threadloom.agent.exit_reason": str(out.get("exit_reason"))})
    usage_attributes(run_span, out.get("token_usage"))


__all__ = ["Agent", "create_agent"]
