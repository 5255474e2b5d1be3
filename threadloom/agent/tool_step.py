"""The ``tools`` node's work: answer what cannot run, hooks, run the pending calls.

Order of one tools step:

1. calls that cannot run (an unknown tool name, arguments that are not a JSON object, a
   reply cut off by the token limit) are answered at once with error tool messages the
   model can act on (cases H14, H16, H17). ``before_tool`` / ``after_tool`` hooks and
   ``wrap_tool_call`` middleware never see them as pending: a hook sees them already
   answered in the history.
2. ``before_tool`` hooks run; they may rewrite the last AI message (same id), answer a
   call themselves (a ``ToolMessage``, e.g. "rejected by user") or ``interrupt()``.
3. the calls of the (re-read) last AI message that still have no result run,
   concurrently, through ``ToolNode`` (and ``wrap_tool_call`` middleware). A call of the
   structured-output tool is validated instead of run.
4. results are put in call order right after the AI message; ``after_tool`` hooks run.

When some calls finish and another one pauses (``interrupt()`` inside a tool), the
finished results are saved and the node runs again for the paused call only, so a
resume never runs a finished tool twice (case H04).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Sequence
from dataclasses import replace
from operator import is_
from typing import TYPE_CHECKING, Any

from threadloom.agent.agent_state import (
    add_delta,
    merge_hook_changes,
    messages_update,
    sum_counts,
)
from threadloom.agent.exit import JUMP_END, ExitRules, jump, tools_exit
from threadloom.agent.model_step import chain
from threadloom.agent.requests import RunOptions, ToolCallRequest, answer_pending, run_options
from threadloom.agent.structured import ToolStrategy
from threadloom.engine.concurrency import bounded
from threadloom.engine.runtime import GraphInterrupt, Runtime, current_task
from threadloom.messages import AIMessage, BaseMessage, ToolMessage
from threadloom.nodes.tool_node import ToolNode
from threadloom.types import Command

if TYPE_CHECKING:
    from threadloom.agent.nodes import AgentNodes

Outcome = tuple[list[ToolMessage], Command | None]


def last_ai_index(messages: Sequence[BaseMessage]) -> int | None:
    """Index of the last ``AIMessage`` in ``messages``, or None."""
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].type == "ai":
            return index
    return None


def answered(messages: Sequence[BaseMessage], index: int) -> set[str]:
    """Call ids answered by tool messages after ``messages[index]``."""
    return {m.tool_call_id for m in messages[index + 1:] if m.type == "tool"}  # type: ignore[attr-defined]


def in_call_order(messages: list[BaseMessage], index: int) -> list[BaseMessage]:
    """Put the results of ``messages[index]``'s calls right after it, in call order."""
    if len(messages) - index <= 2:
        return messages  # one message or none after it: nothing to reorder
    ai: Any = messages[index]
    order = {c.get("id"): i for i, c in enumerate([*ai.tool_calls, *ai.invalid_tool_calls])}
    tail = messages[index + 1:]
    mine = [m for m in tail if m.type == "tool" and m.tool_call_id in order]  # type: ignore[attr-defined]
    rest = [m for m in tail if not (m.type == "tool" and m.tool_call_id in order)]  # type: ignore[attr-defined]
    mine.sort(key=lambda m: order[m.tool_call_id])  # type: ignore[attr-defined]
    new_tail = mine + rest
    if all(map(is_, tail, new_tail)):
        return messages
    return [*messages[:index + 1], *new_tail]


def _message_for(ai: AIMessage, calls: list[Any]) -> AIMessage:
    if not ai.invalid_tool_calls and len(calls) == len(ai.tool_calls) and all(
            map(is_, calls, ai.tool_calls)):
        return ai
    return ai.model_copy(update={"tool_calls": calls, "invalid_tool_calls": []})


def _split(result: Any, call: dict[str, Any]) -> Outcome:
    """A ``ToolNode`` / wrapper result as ``(tool messages for this call, Command or None)``."""
    if isinstance(result, ToolMessage):
        return [result], None
    if isinstance(result, tuple):
        found, command = result
        return list(found), command
    if not isinstance(result, Command):
        raise TypeError(f"wrap_tool_call for {call.get('name')!r} returned "
                        f"{type(result).__name__}; expected a ToolMessage or a Command")
    update = dict(result.update) if isinstance(result.update, dict) else {}
    mine = [m for m in update.get("messages", []) if isinstance(m, ToolMessage)
            and m.tool_call_id == call.get("id")]
    rest = [m for m in update.get("messages", []) if m not in mine]
    if rest:
        update["messages"] = rest
    else:
        update.pop("messages", None)
    if not mine:
        text = f"Tool {call.get('name')!r} updated the state (keys: {', '.join(sorted(update))})."
        mine = [ToolMessage(content=text, tool_call_id=call.get("id") or "", name=call.get("name"))]
    return mine, Command(update=update or None, goto=result.goto, graph=result.graph)


class ToolStep:
    """Runs the ``tools`` node (see the module docstring).

    Args:
        tools: the configured tools, name -> ``Tool``.
        tool_node: a ``ToolNode`` over all of them.
        strategy: the structured-output strategy, or None.
        wrappers: ``wrap_tool_call`` middleware (``async w(request, handler)``).
    """

    def __init__(self, tools: dict[str, Any], tool_node: ToolNode, strategy: Any,
                 wrappers: Sequence[Any]) -> None:
        self.tools = tools
        self.node = tool_node
        self.structured = strategy if isinstance(strategy, ToolStrategy) else None
        self.wrappers = list(wrappers)
        self._subsets: dict[tuple[str, ...], ToolNode] = {}
        self.nodes: Any = None  # the AgentNodes this step serves (set by AgentNodes)

    def toolset(self, state: dict[str, Any], opts: RunOptions) -> ToolNode:
        """The ``ToolNode`` over this run's tools (the run's tool names, run-time tools)."""
        names = opts.tool_names
        if names is None and not opts.extra_tools:
            return self.node
        pool = {**self.tools, **{t.name: t for t in opts.extra_tools}}
        chosen = [t for n, t in pool.items() if names is None or n in names]
        errors = self.node.handle_tool_errors
        if opts.extra_tools or names is None:  # names is None only with extra tools
            fresh = ToolNode(chosen, handle_tool_errors=errors, answer_commands=True,
                             max_concurrency=self.node.max_concurrency)
            fresh.state_keys = self.node.state_keys
            return fresh
        key = tuple(sorted(names))
        node = self._subsets.get(key)
        if node is None:
            node = self._subsets[key] = ToolNode(
                chosen, handle_tool_errors=errors, answer_commands=True,
                max_concurrency=self.node.max_concurrency)
            node.state_keys = self.node.state_keys
        return node

    async def run(self, state: dict[str, Any], opts: RunOptions | None = None) -> Any:
        """The ``tools`` node (``AgentNodes.tools``), for the agent ``nodes`` is bound to.

        The usual step (one call, of a configured tool, in the last message, no hooks or
        ``wrap_tool_call`` middleware, no structured-output tool, the agent's own tools)
        runs right here, one coroutine from the engine, with the writes of ``__call__``.
        """
        nodes = self.nodes
        if opts is None:
            opts = run_options()
        stored = state["messages"]
        ai: Any = stored[-1] if stored else None
        hooks = nodes.hooks.hooks  # HookRunner.has(point) is bool(hooks[point])
        if (ai is None or ai.type != "ai" or len(ai.tool_calls) != 1 or ai.invalid_tool_calls
                or self.wrappers or self.structured is not None
                or opts.tool_names is not None or opts.extra_tools or opts.tool_results
                or hooks["before_tool"] or hooks["after_tool"] or state.get("stop_run") is not None
                or ai.tool_calls[0]["name"] not in self.node.tools_by_name):
            return await self(nodes, state, opts)
        call = ai.tool_calls[0]
        task = current_task()
        outcome = (await self.node.run_tool_calls(
            ai, state=state, config=task.config if task is not None else {}))[0]
        update: dict[str, Any] = {}
        if type(outcome) is ToolMessage:  # the usual result: what _collect makes of it
            update["tool_call_counts"] = {call["name"]: 1}
            update["messages"] = [outcome]
            return update
        results, commands, _ = self._collect(
            self.node, [call], [_split(outcome, call)], [], update)
        update["messages"] = messages_update(
            stored, in_call_order([*stored, *results], len(stored) - 1))
        return [update, *commands] if commands else update

    async def __call__(self, nodes: AgentNodes, state: dict[str, Any], opts: RunOptions) -> Any:
        """The ``tools`` node, every case (hooks, middleware, run-time tools, resumes)."""
        stored = state["messages"]
        index = last_ai_index(stored)
        if index is None:
            return {}
        toolset = self.toolset(state, opts)
        done = answered(stored, index)
        broken = self._broken(toolset, stored[index], done)
        messages = stored if broken is None else await self._answer_broken(
            toolset, stored, broken)
        update: dict[str, Any] = {}
        view = state
        if nodes.hooks.has("before_tool"):
            update, control, messages, view = await nodes.hooks.run(
                "before_tool", state, messages, opts.hook_context)
            target = _target(control, update)
            if target not in (None, "tools"):
                messages = answer_pending(messages, _why(control))
                update["messages"] = messages_update(stored, messages)
                return update if target == "exit_check" else jump(update, target)
            index = last_ai_index(messages)
            if index is None:
                update["messages"] = messages_update(stored, messages)
                return update
            if _vetoed(messages):  # Haystack: no tool runs, back to the model (HITL)
                update["messages"] = messages_update(stored, messages)
                return jump(update, "model")  # the model node enforces max_agent_steps
        ai: Any = messages[index]
        if messages is not stored:
            done = answered(messages, index)
        pending = [c for c in ai.tool_calls if c.get("id") not in done]
        results, commands, again = await self._run(toolset, ai, pending, view, update, opts)
        if opts.tool_results and opts.streaming_callback is not None:
            for message in results:  # Haystack's ToolInvoker streams each tool result
                sent = opts.streaming_callback(message)
                if inspect.isawaitable(sent):
                    await sent
        messages = in_call_order([*messages, *results], index)
        target = "tools" if again else None
        if not again and nodes.hooks.has("after_tool"):
            values = {**view, **{k: v for k, v in update.items() if k == "structured_response"}}
            if "tool_call_counts" in update:  # hooks see this step's calls counted (Haystack)
                values["tool_call_counts"] = sum_counts(view.get("tool_call_counts"),
                                                        update["tool_call_counts"])
            changes, control, messages, _ = await nodes.hooks.run(
                "after_tool", values, messages, opts.hook_context)
            merge_hook_changes(update, changes)
            target = _target(control, update)
            if target not in (None, "tools"):
                messages = answer_pending(messages, _why(control))
        if target is None and opts.extra_tools:
            reason = runtime_exit(opts.extra_tools, nodes.rules, messages)
            if reason is not None:
                update["exit_reason"] = reason  # exit_check ends the run with the tool's name
        if "stop_run" not in update and state.get("stop_run") is not None:
            update["stop_run"] = state["stop_run"]  # carried to the next model call
        update["messages"] = messages_update(stored, messages)
        result: Any = update if target in (None, "exit_check") else jump(update, target)
        return [result, *commands] if commands else result

    def _broken(self, toolset: ToolNode, ai: Any, done: set[str]) -> AIMessage | None:
        """``ai`` cut down to its unanswered calls that cannot run, or None if none."""
        known = toolset.tools_by_name
        special = self.structured.name if self.structured is not None else None
        unknown = [c for c in ai.tool_calls
                   if c.get("id") not in done and c["name"] not in known and c["name"] != special]
        invalid = [c for c in ai.invalid_tool_calls if c.get("id") not in done]
        if not unknown and not invalid:
            return None
        return ai.model_copy(  # type: ignore[no-any-return]
            update={"tool_calls": unknown, "invalid_tool_calls": invalid})

    @staticmethod
    async def _answer_broken(
        toolset: ToolNode, messages: list[BaseMessage], broken: AIMessage
    ) -> list[BaseMessage]:
        results = await toolset.run_tool_calls(broken)
        return [*messages, *(r for r in results if isinstance(r, ToolMessage))]

    async def _run(
        self, toolset: ToolNode, ai: AIMessage, pending: list[Any], view: dict[str, Any],
        update: dict[str, Any], opts: RunOptions,
    ) -> tuple[list[ToolMessage], list[Command], bool]:
        results: list[ToolMessage] = []
        normal = pending
        if self.structured is not None:
            normal = [c for c in pending if c["name"] != self.structured.name]
            for call in pending:
                if call["name"] == self.structured.name:
                    message, value = self.structured.answer(call)
                    results.append(message)
                    if value is not None:
                        update["structured_response"] = value
        if not normal:
            return results, [], False
        task = current_task()
        config = task.config if task is not None else {}
        if not self.wrappers and len(normal) == 1:
            outcome = (await toolset.run_tool_calls(
                _message_for(ai, normal), state=view, config=config))[0]
            outcomes: list[Any] = [_split(outcome, normal[0])]
        else:
            outcomes = await self._run_each(toolset, ai, normal, view, config, task)
        return self._collect(toolset, normal, outcomes, results, update)

    async def _run_each(self, toolset: ToolNode, ai: AIMessage, calls: list[Any],
                        view: dict[str, Any], config: dict[str, Any], task: Any) -> list[Any]:
        alone = len(calls) == 1  # several calls overlap: none runs on the loop's thread

        async def base(request: ToolCallRequest) -> Any:
            msg = _message_for(ai, [request.tool_call])
            return (await toolset.run_tool_calls(msg, state=request.state,
                                                 config=request.config, alone=alone))[0]

        handler = chain(self.wrappers, base) if self.wrappers else base
        runtime = Runtime(config=config, node="tools", step=task.step if task else 0,
                          remaining_steps=task.remaining_steps if task else 0,
                          stream_writer=lambda _: None,
                          context=getattr(getattr(task, "context", None), "user_context", None))

        async def one(call: dict[str, Any]) -> Outcome:
            request = ToolCallRequest(tool_call=dict(call), tool=toolset.tools_by_name.get(
                call["name"]), state=view, config=config, runtime=runtime)
            return _split(await handler(request), call)

        jobs = bounded([one(c) for c in calls], toolset.max_concurrency)
        return list(await asyncio.gather(*jobs, return_exceptions=True))

    @staticmethod
    def _collect(toolset: ToolNode, calls: list[Any], outcomes: list[Any],
                 results: list[ToolMessage], update: dict[str, Any],
                 ) -> tuple[list[ToolMessage], list[Command], bool]:
        paused = [o for o in outcomes if isinstance(o, GraphInterrupt)]
        for outcome in outcomes:
            if isinstance(outcome, BaseException) and not isinstance(outcome, GraphInterrupt):
                raise outcome
        finished = [(c, o) for c, o in zip(calls, outcomes, strict=True)
                    if not isinstance(o, BaseException)]
        if paused and not finished and not results:
            raise GraphInterrupt([i for p in paused for i in p.interrupts])
        commands: list[Command] = []
        counts: dict[str, int] = {}
        for call, (messages, command) in finished:
            results.extend(messages)
            if isinstance(command, list):  # a tool that returned several Commands
                commands.extend(command)
            elif command is not None:
                commands.append(command)
            if call["name"] in toolset.tools_by_name:
                counts[call["name"]] = counts.get(call["name"], 0) + 1
        if counts:
            add_delta(update, "tool_call_counts", counts)
        return results, commands, bool(paused)


def runtime_exit(extra_tools: Sequence[Any], rules: ExitRules,
                 messages: Sequence[BaseMessage]) -> str | None:
    """The name of a ``return_direct`` tool given only at run time (``tools=`` of the run)
    whose call succeeded in the last tools step, when it is the first exit in call order
    (the configured exits are the rules' own, checked by ``exit_check``); else None."""
    direct = frozenset(t.name for t in extra_tools if t.return_direct) - rules.tools
    if not direct:
        return None
    reason = tools_exit(messages, replace(rules, tools=rules.tools | direct))
    return reason if reason in direct else None


def _vetoed(messages: Sequence[BaseMessage]) -> bool:
    """Whether a ``before_tool`` hook replaced the pending call message by one with no
    calls (a veto): the last message is then an AI message without tool calls."""
    last: Any = messages[-1]
    return bool(last.type == "ai" and not last.tool_calls and not last.invalid_tool_calls)


def _target(control: Any, update: dict[str, Any]) -> str | None:
    """Where hooks send the run: None (stay) or a jump. A ``stop_run`` is written for the
    next model call, which it cancels (Haystack: the tools of this step still run)."""
    if control.stop_run is not None:
        update["stop_run"] = control.stop_run
    if control.jump_to == "end":
        update["exit_reason"] = JUMP_END
    return control.jump_to


def _why(control: Any) -> str:
    if control.stop_run is not None:
        return f"the run was stopped by a hook ({control.stop_run})"
    return f"a hook jumped to {control.jump_to!r}"


__all__ = ["ToolStep", "answered", "in_call_order", "last_ai_index"]
