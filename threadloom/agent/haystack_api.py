"""Haystack's ``Agent`` API on threadloom's ``Agent``: ``run`` / ``run_async`` and the
attribute names a Haystack user reads (``system_prompt``, ``user_prompt``,
``exit_conditions``, ``state_schema``, ``resolved_state_schema``, ``max_agent_steps``,
``tool_concurrency_limit``, ``_check_exit_conditions``).

Every name is a view over the agent's own configuration (``Agent.config``, the exit
rules); nothing here is stored twice.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from threadloom.agent.agent_state import HAYSTACK_KEYS, RUN_ARGUMENTS, AgentState
from threadloom.agent.exit import tools_exit


class HaystackAgentAPI:
    """Mixin of ``Agent``: Haystack's run methods and attribute names."""

    agent_nodes: Any
    config: dict[str, Any]

    # the methods of the other bases of ``Agent`` this mixin calls
    warm_up: Any
    warm_up_async: Any
    invoke: Any
    ainvoke: Any

    @property
    def system_prompt(self) -> str | None:
        """The ``system_prompt`` template (Haystack's ``Agent.system_prompt``)."""
        return self.config.get("system_prompt")  # type: ignore[no-any-return]

    @property
    def user_prompt(self) -> str | None:
        """The ``user_prompt`` template."""
        return self.config.get("user_prompt")  # type: ignore[no-any-return]

    @property
    def exit_conditions(self) -> list[str]:
        """The exit conditions (default ``["text"]``)."""
        return list(self.agent_nodes.rules.names)

    @property
    def state_schema(self) -> Any:
        """The ``state_schema`` given to ``create_agent`` (None when none was)."""
        return self.config.get("state_schema")

    @property
    def resolved_state_schema(self) -> dict[str, dict[str, Any]]:
        """Haystack's ``resolved_state_schema``: the ``state_schema`` entries as given
        (a class schema: its keys' entries), template variables, and the agent keys
        Haystack's ``State`` has, with Haystack's types (``messages``:
        ``list[BaseMessage]`` merged by ``merge_lists``; ``step_count``: ``int``, ...).
        The hooks' ``State`` also holds threadloom's own keys (``last_message``,
        ``jump_to``, ``structured_response``)."""
        schema = self.agent_nodes.hooks.bridge.schema
        given = self.config.get("state_schema")
        out: dict[str, dict[str, Any]] = {}
        for key, entry in schema.items():
            if key in HAYSTACK_KEYS:
                out[key] = dict(entry)
            elif key not in AgentState.__annotations__:
                mine = given.get(key) if isinstance(given, Mapping) else None
                out[key] = dict(mine if isinstance(mine, Mapping) else entry)
        return out

    @property
    def max_agent_steps(self) -> int:
        """The most model calls per run."""
        return self.agent_nodes.rules.max_steps

    def _check_exit_conditions(self, llm_messages: Sequence[Any],
                               tool_messages: Sequence[Any]) -> str | None:
        """Haystack's ``Agent._check_exit_conditions``: the exit tool that ends the run
        after a tools step that answered ``llm_messages`` (its assistant replies) with
        ``tool_messages``, or None (``threadloom.agent.exit.tools_exit``'s rule)."""
        return tools_exit([*llm_messages, *tool_messages], self.agent_nodes.rules)

    @property
    def tool_concurrency_limit(self) -> int | None:
        """The most tool calls run at once (None: no limit)."""
        return self.config.get("tool_concurrency_limit")

    def run(self, messages: Any = None, **kwargs: Any) -> dict[str, Any]:
        """Run once and return the output dict (Haystack's ``Agent.run``).

        Args:
            messages: the new messages (a string is a user message), or None.
            **kwargs: template variables and state keys, plus ``thread_id``, ``config``,
                ``tools``, ``generation_kwargs``, ``streaming_callback``,
                ``hook_context``, ``context``, ``recursion_limit``.

        Returns:
            ``messages``, ``last_message``, ``step_count``, ``token_usage``,
            ``tool_call_counts``, ``exit_reason`` (+ ``structured_response``, user keys).
        """
        input, config, options = self._run_args(messages, kwargs)
        self.warm_up()  # as Haystack's Agent.run
        return self.invoke(input, config, **options)

    async def arun(self, messages: Any = None, **kwargs: Any) -> dict[str, Any]:
        """Async ``run`` (also spelled ``run_async``, as Haystack's)."""
        input, config, options = self._run_args(messages, kwargs)
        await self.warm_up_async()
        return await self.ainvoke(input, config, **options)

    run_async = arun

    def _run_args(self, messages: Any, kwargs: dict[str, Any]) -> tuple[dict[str, Any], Any,
                                                                         dict[str, Any]]:
        config = kwargs.pop("config", None)
        options = {k: kwargs.pop(k) for k in list(kwargs) if k in RUN_ARGUMENTS}
        input = {"messages": [] if messages is None else messages, **kwargs}
        return input, config, options


__all__ = ["HaystackAgentAPI"]
