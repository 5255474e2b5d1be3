"""Human approval of tool calls: a ready-made ``before_tool`` hook built on ``interrupt()``.

``approval_hook()`` pauses the run before the pending tool calls run, showing them::

    agent = create_agent(model, tools, checkpointer=SqliteCheckpointer("t.db"),
                         hooks={"before_tool": [approval_hook(["send_email"])]})
    out = agent.invoke({"messages": [("user", "mail Bob")]}, thread_id="t")
    out["__interrupt__"][0].value    # {"tool_calls": [{"name": "send_email", ...}]}
    agent.invoke(Command(resume={"approve": True}), thread_id="t")

Decisions (the ``resume`` value), as LangChain's human-in-the-loop middleware:

- ``{"approve": True}``: run the calls as they are;
- ``{"edit": {call_id: args, ...}}`` (or ``{"edit": args}`` when one call is pending):
  run them with new arguments (the assistant message is rewritten, same id);
- ``{"reject": reason}`` (or ``{"approve": False}``): do not run them; each is answered
  with an error tool message "Rejected by user: <reason>" that the model reads (case H04).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from threadloom.agent.hooks import hook
from threadloom.agent.state import State
from threadloom.engine.runtime import interrupt
from threadloom.messages import ToolMessage

REJECTED = "Rejected by user: {reason}"


def _last_ai(messages: list[Any]) -> tuple[int, Any] | None:
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].type == "ai":
            return index, messages[index]
    return None


def _live(state: State | Mapping[str, Any]) -> Mapping[str, Any]:
    """The values themselves (``State.get`` returns copies; these are only read)."""
    return state.data if isinstance(state, State) else state


def pending_tool_calls(state: State | Mapping[str, Any]) -> list[dict[str, Any]]:
    """The last AI message's tool calls that have no result yet, in call order.

    Calls the agent answered before hooks run (unknown tools, invalid arguments) are not
    pending.
    """
    messages = list(_live(state).get("messages") or [])
    found = _last_ai(messages)
    if found is None:
        return []
    index, ai = found
    done = {m.tool_call_id for m in messages[index + 1:] if m.type == "tool"}
    return [dict(c) for c in ai.tool_calls if c.get("id") not in done]


def apply_decision(state: State, calls: list[dict[str, Any]], decision: Any) -> None:
    """Apply a human decision (see the module docstring) to ``calls`` on ``state``.

    Raises:
        ValueError: a decision that is not one of the documented forms, or an ``edit``
            that names no pending call.
    """
    if not isinstance(decision, Mapping):
        raise ValueError(f"approval decision must be a dict like {{'approve': True}}, "
                         f"{{'edit': ...}} or {{'reject': reason}}; got {decision!r}")
    if "reject" in decision or decision.get("approve") is False:
        reason = decision.get("reject") or "the call was not approved"
        state.set("messages", [
            ToolMessage(content=REJECTED.format(reason=reason), tool_call_id=c["id"],
                        name=c["name"], status="error") for c in calls])
    elif "edit" in decision:
        _edit(state, calls, decision["edit"])
    elif decision.get("approve") is not True:
        raise ValueError(f"unknown approval decision {dict(decision)!r}; use "
                         "{'approve': True}, {'edit': ...} or {'reject': reason}")


def _edit(state: State, calls: list[dict[str, Any]], edits: Any) -> None:
    ids = {c["id"] for c in calls}
    if isinstance(edits, Mapping) and edits and set(edits) <= ids:
        per_call = {k: dict(v) for k, v in edits.items()}
    elif len(calls) == 1 and isinstance(edits, Mapping):
        per_call = {calls[0]["id"]: dict(edits)}
    else:
        raise ValueError(f"edit must map pending call ids {sorted(ids)} to new arguments")
    messages = list(_live(state).get("messages") or [])
    found = _last_ai(messages)
    if found is None:
        raise ValueError("edit: there is no assistant message with tool calls")
    ai = found[1]
    new_calls = [{**c, "args": per_call[c["id"]]} if c["id"] in per_call else c
                 for c in ai.tool_calls]
    state.set("messages", [ai.model_copy(update={"tool_calls": new_calls})])


def approval_hook(
    tool_names: Iterable[str] | None = None, *, description: str | None = None
) -> Callable[[State], None]:
    """A ``before_tool`` hook that asks a human to approve pending tool calls.

    Args:
        tool_names: the tools that need approval (None: every tool).
        description: text shown with the calls (``value["description"]``).

    Returns:
        A hook for ``create_agent(hooks={"before_tool": [...]})``. It calls
        ``interrupt({"tool_calls": [...], "description": ...})`` when a call of a listed
        tool is pending; the run needs a checkpointer.
    """
    names = None if tool_names is None else frozenset(tool_names)
    text = description or "Approve, edit or reject these tool calls."

    @hook("before_tool")
    def ask_approval(state: State) -> None:
        calls = [c for c in pending_tool_calls(state) if names is None or c["name"] in names]
        if not calls:
            return
        decision = interrupt({"tool_calls": calls, "description": text})
        apply_decision(state, calls, decision)

    return ask_approval


__all__ = ["REJECTED", "apply_decision", "approval_hook", "pending_tool_calls"]
