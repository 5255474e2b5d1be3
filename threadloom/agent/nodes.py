"""The five nodes of an agent graph: ``before_run``, ``model``, ``tools``, ``exit_check``,
``after_run``.

```
START -> before_run -> model -> tools -> exit_check -> after_run -> END
                        ^    \\________________^   |
                        |_________________________| (continue)
```

Every node is async and reads the run's options (``RunOptions``) from the engine's task
context, so nothing per-run that cannot be stored (callbacks, request-scoped objects)
enters the checkpoint. Conditional edges (``threadloom.agent.exit``) route the normal
path from the state (``tools`` goes straight back to ``model`` when no exit can hold:
``threadloom.agent.exit.tools_route``); a hook's jump routes with ``Command(goto=...)``.
Hooks run only where some are configured; without hooks a node builds no ``State`` at
all. Tool execution lives in ``threadloom.agent.tool_step``; the model call in
``threadloom.agent.model_step``.
"""

from __future__ import annotations

from typing import Any

from threadloom.agent.agent_prompts import Prompts
from threadloom.agent.agent_state import (
    Control,
    HookBridge,
    add_delta,
    messages_update,
    settle_messages,
)
from threadloom.agent.exit import (
    JUMP_END,
    ExitRules,
    jump,
    last_exit,
    max_steps_reached,
)
from threadloom.agent.hooks import run_hooks
from threadloom.agent.requests import answer_pending, run_options
from threadloom.agent.structured import STRUCTURED_EXIT, Strategy
from threadloom.messages import BaseMessage
from threadloom.types import Command

NODE_NAMES = ("before_run", "model", "tools", "exit_check", "after_run")
_RESET = {"step_count": None, "token_usage": None, "tool_call_counts": None}


class HookRunner:
    """Runs one hook point on a ``State`` view and returns graph writes and control."""

    def __init__(self, hooks: dict[str, list[Any]], bridge: HookBridge) -> None:
        self.hooks = hooks
        self.bridge = bridge
        self.tools_of: Any = None  # state -> the tools offered this step (set by AgentNodes)

    def has(self, point: str) -> bool:
        """Whether any hook is configured for ``point``."""
        return bool(self.hooks[point])

    async def run(
        self, point: str, values: dict[str, Any], messages: list[BaseMessage], context: Any
    ) -> tuple[dict[str, Any], Control, list[BaseMessage], dict[str, Any]]:
        """Run ``point``'s hooks: ``(writes without messages, control, messages, data)``.

        As Haystack's, the ``State`` also holds ``tools`` (the tools offered this step),
        ``hook_context`` (the run's) and a 0 in ``tool_call_counts`` for every offered
        tool not called yet; none of these is written back. ``messages`` merges with
        Haystack's ``merge_lists`` while the hooks run; the list they leave is then settled
        as the agent's graph merges it (``settle_messages``).
        """
        state = self.bridge.make(values, messages)
        data = state.data
        tools = self.tools_of(values) if self.tools_of is not None else []
        data["tools"] = tools
        if context is not None:
            data["hook_context"] = context
        counts = data.get("tool_call_counts") or {}
        if any(t.name not in counts for t in tools):
            data["tool_call_counts"] = {**{t.name: 0 for t in tools}, **counts}
        await run_hooks(point, self.hooks[point], state, context)
        update, control = self.bridge.updates(state, values)
        data["messages"] = settle_messages(messages, data.get("messages"))
        return update, control, data["messages"], data


class AgentNodes:
    """The agent's nodes, bound to one agent's configuration (built by ``create_agent``).

    Args:
        model_step: calls the model (``threadloom.agent.model_step.ModelStep``).
        tool_step: runs the tools (``threadloom.agent.tool_step.ToolStep``).
        hooks: ``HookRunner`` over user hooks followed by middleware hooks.
        rules: the exit rules.
        prompts: the prompt templates.
        strategy: the structured-output strategy, or None.
        defaults: default values of user state keys, written when a run starts without them.
    """

    def __init__(
        self, model_step: Any, tool_step: Any, hooks: HookRunner, rules: ExitRules,
        prompts: Prompts, strategy: Strategy | None, defaults: dict[str, Any],
    ) -> None:
        self.model_step = model_step
        self.tool_step = tool_step
        model_step.nodes = tool_step.nodes = self
        self.hooks = hooks
        hooks.tools_of = self.offered_tools
        self.rules = rules
        self.prompts = prompts
        self.strategy = strategy
        self.defaults = defaults

    def offered_tools(self, state: dict[str, Any]) -> list[Any]:
        """The ``Tool`` objects offered to the model in this run's steps."""
        return [t for t in self.model_step.offered(state, run_options())
                if not isinstance(t, dict)]

    def node_functions(self) -> dict[str, Any]:
        """The graph's node callables by name (``model`` and ``tools`` are the steps' own
        ``run`` methods: one coroutine less per call than these methods)."""
        functions = {name: getattr(self, name) for name in NODE_NAMES}
        functions["model"] = self.model_step.run
        functions["tools"] = self.tool_step.run
        return functions

    # -- before_run -------------------------------------------------------------------------

    async def before_run(self, state: dict[str, Any]) -> Any:
        """Reset the run's counters, render the user prompt, run ``before_run`` hooks."""
        # context_tokens: no model call yet in this run (Haystack starts it at 0)
        update: dict[str, Any] = {"exit_reason": None, "context_tokens": 0}
        if self.strategy is not None:
            update["structured_response"] = None
        for key, default in self.defaults.items():
            if key not in state:
                update[key] = default
        messages = state["messages"]
        if self.prompts.variables or self.prompts.user is not None:
            values = self.prompts.values(state)
            self.prompts.system_text(values)  # missing required variables fail here
            rendered = self.prompts.user_messages(values)
            if rendered:
                messages = [*messages, *rendered]
        target = None
        if self.hooks.has("before_run"):
            values = {**state, **update, "step_count": 0, "token_usage": {},
                      "tool_call_counts": {}}
            changes, control, messages, _ = await self.hooks.run(
                "before_run", values, messages, run_options().hook_context)
            update.update(changes)
            target = self._jump(control, update)
            if target == "end":
                messages = answer_pending(messages, "the run was ended by a hook")
        update["messages"] = messages_update(state["messages"], messages)
        if target is None and _RESET.keys().isdisjoint(update):
            return {**_RESET, **update}  # the same writes, in the same order, as one dict
        return [dict(_RESET), update if target is None else jump(update, target)]

    @staticmethod
    def _jump(control: Control, update: dict[str, Any]) -> str | None:
        if control.stop_run is not None:
            update["stop_run"] = control.stop_run  # the model node ends the run
        if control.jump_to == "end":
            update["exit_reason"] = JUMP_END
        return control.jump_to

    # -- model ------------------------------------------------------------------------------

    async def model(self, state: dict[str, Any]) -> dict[str, Any] | Command:
        """Run ``before_llm`` hooks, call the model, record usage, run ``after_llm`` hooks."""
        return await self.model_step.run(state, run_options())

    # -- tools ------------------------------------------------------------------------------

    async def tools(self, state: dict[str, Any]) -> Any:
        """Run ``before_tool`` hooks, the pending tool calls, then ``after_tool`` hooks."""
        return await self.tool_step.run(state, run_options())

    # -- exit_check -------------------------------------------------------------------------

    async def exit_check(self, state: dict[str, Any]) -> dict[str, Any]:
        """Decide: end the run (with its ``exit_reason``) or call the model again."""
        messages = state["messages"]
        pending = state.get("exit_reason")  # a run-time return_direct tool's (tool_step)
        reason = pending
        if reason is None:
            if self.strategy is not None and state.get("structured_response") is not None:
                reason = STRUCTURED_EXIT
            else:
                reason = last_exit(messages, self.rules)
        update: dict[str, Any] = {}
        stop = state.get("stop_run")  # a natural exit in the same step wins over it
        if reason is not None and self.hooks.has("on_exit"):
            reason, update, asked = await self._on_exit(state, reason)
            stop = asked if asked is not None else stop
        if reason is None:
            if (state.get("step_count") or 0) + update.get("step_count", 0) < self.rules.max_steps:
                if pending is not None:
                    update["exit_reason"] = None
                if stop is not None:
                    update["stop_run"] = stop  # the next model call will not happen
                return update
            reason = max_steps_reached(self.rules.max_steps)
        update["exit_reason"] = reason
        return update

    async def _on_exit(self, state: dict[str, Any], reason: Any
                       ) -> tuple[Any, dict[str, Any], Any]:
        """Run ``on_exit`` hooks: ``(reason or None to go on, writes, stop_run asked)``."""
        values = {**state, "exit_reason": reason}
        update, control, messages, _ = await self.hooks.run(
            "on_exit", values, state["messages"], run_options().hook_context)
        update["messages"] = messages_update(state["messages"], messages)
        reason = update.pop("exit_reason", reason)
        if control.continue_run or control.jump_to == "model":
            reason = None
        return reason, update, control.stop_run

    # -- after_run --------------------------------------------------------------------------

    async def after_run(self, state: dict[str, Any]) -> dict[str, Any]:
        """Run ``after_run`` hooks (always, once) and set ``last_message``."""
        messages = state["messages"]
        update: dict[str, Any] = {}
        if self.hooks.has("after_run"):
            update, _, messages, _ = await self.hooks.run(
                "after_run", dict(state), messages, run_options().hook_context)
            update["messages"] = messages_update(state["messages"], messages)
        if messages:
            update["last_message"] = messages[-1]
        counts = state.get("tool_call_counts") or {}
        zeros = {t.name: 0 for t in self.offered_tools(state) if t.name not in counts}
        if zeros:  # Haystack lists every tool, called or not
            add_delta(update, "tool_call_counts", zeros)
        return update


__all__ = ["NODE_NAMES", "AgentNodes", "HookRunner"]
