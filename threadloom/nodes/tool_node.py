"""``ToolNode``: run the tool calls of the last AI message, concurrently, as one graph node.

As LangGraph's prebuilt ``ToolNode`` and ``tools_condition``. Every call gets exactly one
``ToolMessage`` answer, in the order of the calls (never completion order). Problems the
model caused (unknown tool, arguments that are not a JSON object, calls cut off by the
output token limit) never run anything and always become error tool messages the model can
read and fix. Arguments that fail validation, and exceptions raised by a tool's own code,
are governed by ``handle_tool_errors`` (LangGraph's default: the first answered, the
others raised).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from threadloom.engine.concurrency import bounded
from threadloom.engine.runtime import GraphInterrupt, current_task, scoped_interrupts
from threadloom.engine.sync import run_sync
from threadloom.errors import ToolError, ToolException
from threadloom.messages import AIMessage, ToolMessage, parse_tool_args
from threadloom.nodes.tool_context import call_runtime, idempotency_key
from threadloom.nodes.tool_errors import (
    ErrorHandler,
    default_handler,
    error_text,
    invocation_error,
    own_error_text,
    unknown_tool_text,
)
from threadloom.nodes.tool_input import last_ai, messages_of, tools_condition
from threadloom.nodes.tool_outputs import (
    InputKind,
    Missing,
    Output,
    agent_shape,
    check_command,
    combine,
    to_output,
)
from threadloom.nodes.tool_request import ToolCallRequest
from threadloom.nodes.truncation import excerpt, looks_truncated, truncated_text
from threadloom.tools import Tool, tool
from threadloom.tools.markers import MessagesOnlyState, StateInjectionError
from threadloom.types import Command
from threadloom.workers import to_worker

__all__ = ["ToolNode", "idempotency_key", "looks_truncated", "tools_condition"]


class ToolNode:
    """A graph node that runs the tool calls of the last ``AIMessage`` in the state.

    As LangGraph's ``ToolNode``. The engine calls ``await node(state, config)``; calls run
    concurrently (``asyncio.gather``; sync tools in worker threads, except a lone call
    in a sync ``invoke``/``stream`` run, which runs on the run's own thread: see
    ``TaskContext.blocking_ok``). Its input is a state (``{messages_key: [...]}`` or an
    object with that attribute), a list of messages, or a list of tool calls
    (``{"name", "args", "id", "type": "tool_call"}``). The result is
    ``{messages_key: [ToolMessage, ...]}`` in call order (first ``tool_calls``, then
    ``invalid_tool_calls``; a list of messages gives a list); when tools return
    ``Command``s it is LangGraph's list of items, see ``tool_outputs.combine`` (a tool
    may return a ``Command`` or a list of ``Command``s and ``ToolMessage``s).

    Problems the model caused (every error message has ``status="error"``):

    - unknown tool name: LangGraph's text, naming the available tools (H16);
    - arguments that are not valid JSON or not an object: says so, quotes an excerpt and
      gives the expected JSON schema; ``""`` means ``{}`` (H17, H22);
    - arguments failing validation: a ``ToolInvocationError`` naming each bad field
      (with the schema), answered as ``handle_tool_errors`` says (H17);
    - a message whose ``finish_reason`` is ``"length"``: none of its calls run, each is
      answered "truncated, send again in full"; so is any call whose arguments were cut
      off (H14).

    ``handle_tool_errors`` (LangGraph's rules, ``tool_errors.error_text``): the default
    (``default_handler``, LangGraph's) answers invalid arguments and raises a tool's own
    exceptions, and the ``ValueError`` of a ``Command`` it refuses; ``True`` answers
    every exception (``"Error: <repr>"``); ``False`` raises them (the first in call order,
    after all calls finished); a ``str`` is the text; a callable ``exc -> str`` covers
    the exception types its first parameter is annotated with; an exception class or a
    tuple covers those. A tool's own ``handle_tool_error`` answers its
    ``ToolException``s first. ``interrupt()`` inside a tool always propagates; so do
    state fields an ``InjectedState`` parameter needs and the state lacks.

    Args:
        tools: ``Tool`` objects or plain functions (wrapped with ``@tool``).
        handle_tool_errors: see above.
        answer_commands: what a tool's ``Command`` to this graph with no ``ToolMessage``
            answering its call gets: False (LangGraph's) raises ``ValueError``; True puts
            an "updated the state" message in front of it (``create_agent``'s).
        messages_key: the state key holding the messages (read and written).
        name: the node's name.
        max_concurrency: the most calls of one message run at a time (None: all at once).
        wrap_tool_call: ``(request, execute) -> result`` around each call, as LangGraph's:
            ``request`` a ``ToolCallRequest`` (its ``runtime`` the call's ``ToolRuntime``;
            ``request.override(tool=...)`` may run a tool the node was not given),
            ``execute(request)`` runs it and returns its ``ToolMessage``/``Command``.
        awrap_tool_call: the async twin (``await execute(request)``); preferred when both.

    Raises:
        ValueError: two tools share a name; ``max_concurrency`` below 1.
    """

    def __init__(
        self,
        tools: Sequence[Tool | Callable[..., Any]],
        *,
        handle_tool_errors: ErrorHandler = default_handler,
        answer_commands: bool = False,
        messages_key: str = "messages",
        name: str = "tools",
        max_concurrency: int | None = None,
        wrap_tool_call: Callable[[ToolCallRequest, Callable[[ToolCallRequest], Any]], Any]
        | None = None,
        awrap_tool_call: Callable[[ToolCallRequest, Callable[[ToolCallRequest], Any]], Any]
        | None = None,
    ) -> None:
        self.tools_by_name: dict[str, Tool] = {}
        for item in tools:
            built = item if isinstance(item, Tool) else tool(item)
            if built.name in self.tools_by_name:
                raise ValueError(f"ToolNode: two tools are named {built.name!r}")
            self.tools_by_name[built.name] = built
        self.handle_tool_errors = handle_tool_errors
        self.answer_commands = answer_commands
        self.messages_key = messages_key
        self.name = name
        if max_concurrency is not None and (
                not isinstance(max_concurrency, int) or max_concurrency < 1):
            raise ValueError(f"ToolNode(max_concurrency={max_concurrency!r}): max_concurrency "
                             "must be an int greater than or equal to 1, or None")
        self.max_concurrency = max_concurrency
        self.state_keys: frozenset[str] | None = None  # see state_update_of
        self.wrap_tool_call = wrap_tool_call
        self.awrap_tool_call = awrap_tool_call

    async def __call__(self, state: Any, config: dict[str, Any] | None = None) -> Any:
        """Run the input's calls; see the class docstring for the result shape."""
        kind: InputKind
        if isinstance(state, list) and state and isinstance(state[-1], dict) and (
                state[-1].get("type") == "tool_call"):
            message, kind = AIMessage(content="", tool_calls=state), "tool_calls"
        else:
            kind = "list" if isinstance(state, list) else "dict"
            message = last_ai(messages_of(state, self.messages_key))
            if kind == "list":
                state = MessagesOnlyState({self.messages_key: state})
        outputs = await self._outputs(message, state, config, kind)
        return combine(outputs, kind, self.messages_key)

    def invoke(self, state: Any, config: dict[str, Any] | None = None) -> Any:
        """Run the calls outside a graph, as LangGraph's ``ToolNode.invoke``: a state
        ``{"messages": [...]}`` gives ``{"messages": [ToolMessage, ...]}``, a list of
        messages gives the list of ``ToolMessage``s."""
        return run_sync(self(state, config))

    async def ainvoke(self, state: Any, config: dict[str, Any] | None = None) -> Any:
        """Async ``invoke``."""
        return await self(state, config)

    async def run_tool_calls(
        self,
        message: AIMessage,
        *,
        state: Any = None,
        config: dict[str, Any] | None = None,
        alone: bool = True,
    ) -> list[ToolMessage | tuple[list[ToolMessage], Command | list[Command]]]:
        """Answer every call of ``message``, in call order (the agent's tool step).

        Each item is a ``ToolMessage``, or ``(tool messages, Command or Commands)`` for
        a tool that returned ``Command``s (their messages answering the call moved out).
        Hooks that rewrite or veto calls can build a new ``AIMessage`` and pass it here.
        Pass ``alone=False`` when ``message`` holds one of several calls run
        concurrently (so a sync tool goes to a worker thread even in a sync run).

        Raises:
            Exception: a tool's exception, when ``handle_tool_errors`` does not cover it.
        """
        outputs = await self._outputs(message, state, config, "dict", alone)
        return [o if type(o) is ToolMessage else agent_shape(o, self._splitter(c))
                for o, c in zip(outputs, [*message.tool_calls, *message.invalid_tool_calls],
                                strict=True)]

    def _splitter(self, call: Mapping[str, Any]) -> Callable[[Command], Any]:
        return lambda command: self._split_command(command, call.get("id") or "")

    async def _outputs(self, message: AIMessage, state: Any, config: dict[str, Any] | None,
                       kind: InputKind, alone: bool = True) -> list[Output]:
        task = current_task()
        if config is None:
            config = task.config if task is not None else {}
        task_id = task.task_id if task is not None else None
        # A router may relabel "length" as "tool_calls": one cut-off call marks the whole
        # reply as cut off, and then even its complete calls are suspect (H14).
        invalid = message.invalid_tool_calls
        truncated = message.finish_reason == "length" or (bool(invalid) and any(
            looks_truncated(call.get("args")) for call in invalid))
        # A lone call in a step the engine marks blocking_ok (a sync run's private loop)
        # runs a sync tool on this thread: there is nothing to overlap it with.
        calls = message.tool_calls
        lone = len(calls) + len(invalid) == 1
        inline = alone and lone and task is not None and task.blocking_ok
        run = _Run(state, config, task_id, inline, kind)
        if lone and calls:  # the loop below for one call: no list, no extra event-loop turn
            return [await self._answer(calls[0], truncated, run)]
        # the calls are only read, never kept; each call's interrupt() ids come from its
        # call id, not from which call got there first, so a resume map answers each (H05)
        jobs = [scoped_interrupts(str(call.get("id") or i), self._answer(
            call, truncated, run)) for i, call in enumerate(calls)]
        jobs += [self._answer_invalid(bad, truncated) for bad in invalid]
        if lone:  # nothing to run concurrently: no task, no extra event-loop turn
            return [await jobs[0]]
        outcomes = await asyncio.gather(*bounded(jobs, self.max_concurrency),
                                        return_exceptions=True)
        interrupts = [o for o in outcomes if isinstance(o, GraphInterrupt)]
        if interrupts:
            raise GraphInterrupt([i for exc in interrupts for i in exc.interrupts])
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome
        return outcomes  # type: ignore[return-value]

    async def _answer_invalid(self, call: Mapping[str, Any], truncated: bool) -> ToolMessage:
        call_id, name, raw = call.get("id") or "", call.get("name") or "", call.get("args")
        if truncated:
            return _error(call_id, name, truncated_text(name, raw))
        if name not in self.tools_by_name:
            return self._unknown(call_id, name)
        _, problem = parse_tool_args(raw)
        problem = problem or call.get("error") or "the call could not be parsed"
        return self._bad_args(call_id, name, f"{problem}; got: {excerpt(raw)}")

    async def _answer(self, call: Mapping[str, Any], truncated: bool, run: _Run) -> Output:
        call_id, name = call.get("id") or "", call.get("name") or ""
        if truncated:
            return _error(call_id, name, truncated_text(name, None))
        if self.wrap_tool_call is not None or self.awrap_tool_call is not None:
            return await self._wrapped(call, run)
        return await self._execute(call, self.tools_by_name.get(name), run)

    async def _wrapped(self, call: Mapping[str, Any], run: _Run) -> Output:
        """One call through ``awrap_tool_call`` (or ``wrap_tool_call``, run on a worker
        thread, its ``execute`` waiting for the call to run on this loop)."""
        call_id = call.get("id") or ""
        runtime = call_runtime(self.tools_by_name, run.state, run.config, call_id)
        request = ToolCallRequest(tool_call=dict(call), tool=self.tools_by_name.get(
            call.get("name") or ""), state=run.state, config=run.config, runtime=runtime)

        async def execute(req: ToolCallRequest) -> Output:
            again = _Run(req.state, req.config, run.task_id, False, run.kind, req.runtime)
            return await self._execute(req.tool_call, req.tool, again)

        if self.awrap_tool_call is not None:
            result = await self.awrap_tool_call(request, execute)
        else:
            loop = asyncio.get_running_loop()

            def execute_sync(req: ToolCallRequest) -> Output:
                return asyncio.run_coroutine_threadsafe(execute(req), loop).result()

            result = await to_worker(self.wrap_tool_call, request, execute_sync)  # type: ignore[arg-type]
        if isinstance(result, Command):
            return check_command(result, call_id, call.get("name") or "", self.messages_key,
                                 run.kind, missing=self._missing)
        return result  # type: ignore[no-any-return]

    async def _execute(self, call: Mapping[str, Any], selected: Tool | None,
                       run: _Run) -> Output:
        call_id, name = call.get("id") or "", call.get("name") or ""
        if selected is None:
            return self._unknown(call_id, name)
        raw = call.get("args")
        inline = run.inline
        if (inline and selected.coroutine is None and selected.func is not None
                and type(selected) is Tool):
            # A lone sync call of a plain Tool with plain arguments (see
            # Tool.plain_kwargs): what the general path below does for it, its keyword
            # arguments made without the pydantic round trip.
            kwargs = selected.plain_kwargs(raw)
            if kwargs is not None:
                try:
                    value = selected.func(**kwargs)  # type: ignore[misc]
                    return self._to_result(value, call_id, name, run.kind)
                except Exception as exc:
                    return self._failed(exc, selected, call_id, name)
        args, problem = parse_tool_args(raw)
        if args is None:
            return self._bad_args(call_id, name, f"{problem}; got: {excerpt(call.get('args'))}")
        try:
            try:
                validated = selected.parse_args(args)
            except ToolError as exc:
                raise invocation_error(name, args, exc, selected.json_schema()) from exc
            state, config = run.state, run.config
            key = idempotency_key(config, call_id, run.task_id) if (
                selected.takes_injections) else None  # only injections read it
            runtime = run.runtime if run.runtime is not None and (
                run.runtime.tool_call_id == call_id) else call_runtime(
                self.tools_by_name, state, config, call_id) if selected.takes_runtime else None
            if inline and selected.coroutine is None and (  # arun_validated's inline case
                    type(selected).arun_validated is Tool.arun_validated):
                value = selected.run_inline(validated, state=state, tool_call_id=call_id,
                                            config=config, idempotency_key=key,
                                            runtime=runtime)
            else:
                value = await selected.arun_validated(
                    validated, state=state, tool_call_id=call_id, config=config,
                    idempotency_key=key, inline=inline, runtime=runtime)
            return self._to_result(value, call_id, name, run.kind)
        except StateInjectionError:
            raise
        except Exception as exc:
            return self._failed(exc, selected, call_id, name)

    def _failed(self, exc: Exception, selected: Tool, call_id: str, name: str) -> ToolMessage:
        own = getattr(selected, "handle_tool_error", None)
        if own and isinstance(exc, ToolException):
            return _error(call_id, name, own_error_text(exc, own))
        return _error(call_id, name, error_text(exc, self.handle_tool_errors))

    def _unknown(self, call_id: str, name: str) -> ToolMessage:
        return _error(call_id, name, unknown_tool_text(name, list(self.tools_by_name)))

    def _bad_args(self, call_id: str, name: str, problem: str) -> ToolMessage:
        schema = json.dumps(self.tools_by_name[name].json_schema(), ensure_ascii=False)
        text = (
            f"Error: tool {name!r} was not run: {problem}. Call it again with arguments "
            f"as one JSON object matching this schema: {schema}"
        )
        return _error(call_id, name, text)

    def _to_result(self, value: Any, call_id: str, name: str, kind: InputKind = "dict"
                   ) -> Output:
        return to_output(value, call_id, name, kind, self.messages_key, self.state_keys,
                         self.tools_by_name.get(name), self._missing)

    @property
    def _missing(self) -> Missing:
        return "answer" if self.answer_commands else "raise"

    def _split_command(self, command: Command, call_id: str
                       ) -> tuple[list[ToolMessage], Command]:
        """``command``'s messages answering ``call_id`` moved out of its update (the
        agent keeps its messages in call order); a parent ``Command`` is left whole."""
        if command.graph == Command.PARENT:
            return [], command
        update = command.update
        found: list[ToolMessage] = []
        if isinstance(update, dict) and isinstance(update.get(self.messages_key), list):
            rest: list[Any] = []
            for item in update[self.messages_key]:
                mine = isinstance(item, ToolMessage) and item.tool_call_id == call_id
                (found if mine else rest).append(item)
            update = {**update, self.messages_key: rest} if rest else {
                k: v for k, v in update.items() if k != self.messages_key
            }
        return found, Command(update=update or None, goto=command.goto, graph=command.graph)


@dataclass(slots=True)
class _Run:
    """What every call of one ``ToolNode`` step shares."""

    state: Any
    config: dict[str, Any]
    task_id: str | None
    inline: bool
    kind: InputKind
    runtime: Any = None  # the ToolRuntime a wrap_tool_call request carried


def _error(call_id: str, name: str, text: str) -> ToolMessage:
    return ToolMessage(content=text, tool_call_id=call_id, name=name or None, status="error")
