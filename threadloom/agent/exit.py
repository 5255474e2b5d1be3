"""Exit conditions: when an agent run ends, and with which ``exit_reason``.

Haystack semantics, with its reported gaps closed:

- ``"text"``: an assistant reply without tool calls that has text (or a refusal). An
  empty reply without tool calls is no exit: the loop goes on (bounded by
  ``max_agent_steps``).
- finish reason ``"length"`` / ``"content_filter"``: the reply was cut off or filtered;
  the run ends with that reason, never ``"text"`` (case H13).
- a tool name in ``exit_conditions``, or a ``return_direct`` tool: the run ends after a
  tools step in which a call of that tool succeeded, first in call order (case
  H11); a call of an exit tool answered with an error cancels the exit of that step
  (as Haystack's, even when another exit tool succeeded).
- ``"structured_response"``: the structured response was produced.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from threadloom.messages import AIMessage, BaseMessage
from threadloom.types import Command

TEXT = "text"
MAX_STEPS = "max_agent_steps"
JUMP_END = "jump_to_end"
FINISH_EXITS = ("length", "content_filter")
_LOG = logging.getLogger("threadloom.agent")


@dataclass(frozen=True, slots=True)
class ExitRules:
    """The exit conditions of one agent.

    Attributes:
        text: ``"text"`` is among the conditions.
        tools: tool names that end the run when one of their calls succeeds
            (``exit_conditions`` names plus ``return_direct`` tools).
        max_steps: ``max_agent_steps``.
        names: the conditions as given (for traces).
    """

    text: bool
    tools: frozenset[str]
    max_steps: int
    names: tuple[str, ...] = ()


def make_rules(
    exit_conditions: Sequence[str] | None,
    tool_names: Collection[str],
    return_direct: Collection[str],
    max_steps: int,
) -> ExitRules:
    """Check ``exit_conditions`` against the tools and build the rules.

    A condition naming no configured tool is kept, as Haystack's ``Agent`` keeps it (it
    applies to a tool given at run time), and logged as a warning naming it.

    Raises:
        ValueError: ``exit_conditions`` a string, or ``max_steps`` below 1.
    """
    conditions = list(exit_conditions) if exit_conditions is not None else [TEXT]
    if isinstance(exit_conditions, str):
        raise ValueError(f"exit_conditions must be a list, got the string {exit_conditions!r}")
    # A name that is no configured tool is kept, as Haystack keeps it (#11557): the tool
    # may be given at run time (``agent.invoke(..., tools=[...])``); it is reported now.
    if unknown := [c for c in conditions if c != TEXT and c not in tool_names]:
        _LOG.warning(
            "create_agent(exit_conditions=%r): %s neither 'text' nor a tool of this agent "
            "(tools: %r); such a condition ends a run only when a tool of that name is "
            "given at run time (invoke(..., tools=[...]))", conditions,
            ", ".join(map(repr, unknown)) + (" is" if len(unknown) == 1 else " are"),
            sorted(tool_names))
    if not isinstance(max_steps, int) or max_steps < 1:
        raise ValueError(f"max_agent_steps must be a positive int, got {max_steps!r}")
    tools = frozenset(c for c in conditions if c != TEXT) | frozenset(return_direct)
    return ExitRules(TEXT in conditions, tools, max_steps, tuple(conditions))


def max_steps_reached(max_steps: int) -> str:
    """Log (warning) that a run used all ``max_agent_steps``; return ``MAX_STEPS``."""
    _LOG.warning("Agent reached maximum agent steps (%d) before an exit condition", max_steps)
    return MAX_STEPS


def reply_exit(message: AIMessage, rules: ExitRules) -> str | None:
    """The exit reason for a model reply routed straight to the exit check, or None."""
    finish = message.finish_reason
    if finish in FINISH_EXITS:
        return finish
    if message.tool_calls or message.invalid_tool_calls:
        return None
    if rules.text and (message.text.strip() or message.refusal):
        return TEXT
    return None


def tools_exit(messages: Sequence[BaseMessage], rules: ExitRules) -> str | None:
    """The exit reason after a tools step, as Haystack's ``Agent`` decides it.

    The first exit tool, in call order, whose call succeeded; but none when any call of an
    exit tool in that step failed (an errored exit tool cancels the exit, even when another
    exit tool succeeded). Errors of other tools do not matter.

    Args:
        messages: the history; the tools step's results follow its last ``AIMessage``.
        rules: the agent's exit rules.
    """
    if not rules.tools:
        return None
    status: dict[str, str] = {}
    ai: AIMessage | None = None
    for message in reversed(messages):
        if message.type == "tool":
            status.setdefault(message.tool_call_id, message.status)  # type: ignore[attr-defined]
        elif message.type == "ai":
            ai = message  # type: ignore[assignment]
            break
    if ai is None:
        return None
    first: str | None = None
    for call in ai.tool_calls:
        if call["name"] not in rules.tools:
            continue
        outcome = status.get(call.get("id") or "")
        if outcome == "error":
            return None
        if first is None and outcome is not None:
            first = call["name"]
    return first


def last_exit(messages: Sequence[BaseMessage], rules: ExitRules) -> str | None:
    """The exit reason the end of ``messages`` calls for, or None to go on."""
    if not messages:
        return None
    last = messages[-1]
    if last.type == "ai":
        return reply_exit(last, rules)  # type: ignore[arg-type]
    if last.type == "tool":
        return tools_exit(messages, rules)
    return None


# -- routing ---------------------------------------------------------------------------------
# The normal path is drawn by conditional edges that read the state, so that drawings,
# update_state(as_node=...) and time travel see the real next node. A hook's jump leaves
# that path: the node writes ``jump_to`` and routes with ``Command(goto=...)``, and the
# edge functions then route nowhere.

JUMP_NODES = {"model": "model", "tools": "tools", "end": "after_run"}


def jump(update: dict[str, Any], to: str) -> Command:
    """Leave the normal path: ``to`` is ``"model"``, ``"tools"`` or ``"end"``."""
    update["jump_to"] = to
    return Command(update=update, goto=JUMP_NODES[to])


def after_before_run(state: dict[str, Any]) -> Any:
    """``before_run`` -> ``model`` (unless a hook jumped)."""
    return [] if state.get("jump_to") is not None else "model"


def after_model(state: dict[str, Any]) -> Any:
    """``model`` -> ``tools`` when the last AI message asks for tools, else ``exit_check``."""
    if state.get("jump_to") is not None:
        return []
    messages = state.get("messages") or ()
    last: Any = messages[-1] if messages else None
    if last is not None and last.type == "ai" and (last.tool_calls or last.invalid_tool_calls):
        return "tools"
    return "exit_check"


def tools_route(rules: ExitRules, structured: bool, *, always_check: bool = False) -> Any:
    """The edge out of ``tools``: ``exit_check`` when the run may end there, else ``model``.

    ``exit_check`` after a tools step does something only when an exit reason holds (a
    run-time ``return_direct`` tool, a structured response, an exit tool that succeeded, the last
    message's own exit) or ``max_agent_steps`` is reached; otherwise it writes nothing and
    routes back to ``model``. So the edge goes straight to ``model`` then, as LangChain's
    ``create_agent`` goes ``tools -> model``: one super-step and one checkpoint less per
    agent step, the same state and the same exit reasons. ``always_check`` (the agent
    pauses before or after ``exit_check``) keeps the ``exit_check`` step on every turn.

    Args:
        rules: the agent's exit rules.
        structured: the agent has a ``response_format`` (``structured_response`` ends it).
        always_check: route every tools step to ``exit_check``.
    """

    def after_tools(state: dict[str, Any]) -> Any:
        if state.get("jump_to") is not None:
            return []  # a hook jumped, or a paused call reruns ``tools``
        if (always_check or state.get("exit_reason") is not None
                or (state.get("step_count") or 0) >= rules.max_steps
                or (structured and state.get("structured_response") is not None)
                or last_exit(state.get("messages") or (), rules) is not None):
            return "exit_check"
        return "model"

    return after_tools


def after_exit_check(state: dict[str, Any]) -> str:
    """``exit_check`` -> ``after_run`` once ``exit_reason`` is set, else back to ``model``."""
    return "after_run" if state.get("exit_reason") is not None else "model"


__all__ = [
    "JUMP_NODES", "after_before_run", "after_exit_check", "after_model", "tools_route",
    "jump", "max_steps_reached", "FINISH_EXITS", "JUMP_END", "MAX_STEPS", "TEXT", "ExitRules",
    "last_exit", "make_rules",
    "reply_exit", "tools_exit",
]
