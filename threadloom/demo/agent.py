"""The demo agent: a shop assistant built with ``create_agent`` over the demo database.

Its nodes are the agent's own (``before_run``, ``model``, ``tools``, ``exit_check``,
``after_run``); what makes it the demo is what it is given:

- the tools of ``threadloom.demo.tools`` (database queries, currency conversion from the
  local rate table, a safe calculator, and ``cancel_order``);
- a ``before_tool`` approval hook: a pending ``cancel_order`` call pauses the run with
  ``interrupt()`` until a human answers ``{"approve": True}``, ``{"reject": reason}`` or
  ``{"edit": args}`` (``threadloom resume THREAD --approve``);
- an ``on_exit`` hook that writes an audit row (steps, tool counts, token usage) to the
  demo database each time the agent finishes a turn.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from threadloom.demo.data import DemoData
from threadloom.demo.tools import APPROVAL_TOOLS, make_tools

__all__ = ["SYSTEM_PROMPT", "audit_hook", "build_demo_agent", "demo_agent"]

SYSTEM_PROMPT = (
    "You are the assistant of a small outdoor-gear shop. Answer with facts from the tools: "
    "get_order and list_orders for orders, search_products for products (prices in USD), "
    "convert_currency for other currencies, calculator for any arithmetic. cancel_order "
    "cancels an order that is still processing; a human must approve it. Keep answers short."
)


def audit_hook(data: DemoData) -> Callable[[Any], None]:
    """An ``on_exit`` hook that appends the turn's numbers to ``data``'s audit log."""

    def audit_on_exit(state: Any) -> None:
        from threadloom.engine.runtime import get_config

        try:
            thread_id = get_config().get("configurable", {}).get("thread_id")
        except RuntimeError:
            thread_id = None
        messages = state.get("messages") or []
        answer = messages[-1].text if messages else ""
        data.audit(thread_id, "turn_finished", {
            "step_count": state.get("step_count"),
            "tool_call_counts": state.get("tool_call_counts"),
            "token_usage": state.get("token_usage"),
            "answer_chars": len(answer),
        })

    return audit_on_exit


def build_demo_agent(model: Any, data: DemoData, checkpointer: Any,
                     *, max_agent_steps: int = 8) -> Any:
    """Build the demo agent.

    Args:
        model: any chat model (``LocalChatModel``, ``OpenAIChatModel``,
            ``ScriptedChatModel(demo_brain)``).
        data: the demo database the tools use.
        checkpointer: where the conversation is saved (the demo uses SQLite).
        max_agent_steps: model calls per turn before the run stops.

    Returns:
        The compiled agent graph.
    """
    from threadloom.agent import create_agent
    from threadloom.agent.approval import approval_hook

    return create_agent(
        model,
        make_tools(data),
        system_prompt=SYSTEM_PROMPT,
        hooks={"before_tool": [approval_hook(sorted(APPROVAL_TOOLS))],
               "on_exit": [audit_hook(data)]},
        max_agent_steps=max_agent_steps,
        checkpointer=checkpointer,
        name="threadloom-demo",
    )


def demo_agent() -> Any:
    """The demo agent with the scripted model and no checkpointer, for the CLI.

    ``threadloom draw threadloom.demo.agent:demo_agent -f png -o agent.png`` draws it;
    ``threadloom run threadloom.demo.agent:demo_agent --input '{"messages": [["user",
    "order 1002?"]]}'`` runs it with SQLite checkpoints. The shop data lives in
    ``$THREADLOOM_DEMO_DB`` (default ``threadloom-demo.db``), in a directory that must
    exist (it is not created, as the CLI's ``--db``).

    Raises:
        FileNotFoundError: the directory of ``$THREADLOOM_DEMO_DB`` does not exist.
    """
    import os
    from pathlib import Path

    from threadloom.demo.brain import demo_brain
    from threadloom.models import ScriptedChatModel

    path = os.environ.get("THREADLOOM_DEMO_DB", "threadloom-demo.db")
    if not Path(path).parent.is_dir():
        raise FileNotFoundError(f"THREADLOOM_DEMO_DB={path!r}: no directory "
                                f"{str(Path(path).parent)!r}")
    data = DemoData(path)
    return build_demo_agent(ScriptedChatModel(demo_brain), data, None)
