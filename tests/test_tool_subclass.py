"""Tools written as LangChain ``BaseTool`` subclasses (fields, ``_run``/``_arun``), an
``args_schema`` with an injected field, and ``GraphBubbleUp`` passing through ToolNode."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

import pytest
from pydantic import BaseModel

from threadloom import Command, InjectedToolCallId, Tool, ToolNode
from threadloom.engine.runtime import GraphBubbleUp, GraphInterrupt
from threadloom.messages import AIMessage, ToolMessage


class Echo(Tool):
    """Says back what it was built with."""

    name: str = "echo"
    reply: Any = None

    def _run(self, **kwargs: Any) -> Any:
        return self.reply

    async def _arun(self, **kwargs: Any) -> Any:
        return self.reply


def _call(name: str = "echo", args: dict[str, Any] | None = None, cid: str = "c1") -> dict:
    return {"messages": [AIMessage("", tool_calls=[
        {"name": name, "args": args or {}, "id": cid, "type": "tool_call"}])]}


def test_fields_take_class_defaults_and_keyword_overrides():
    tool = Echo(reply="hi")
    assert (tool.name, tool.reply, tool.description) == ("echo", "hi",
                                                         "Says back what it was built with.")
    assert Echo().reply is None
    assert tool.invoke({}) == "hi"
    assert asyncio.run(tool.ainvoke({})) == "hi"
    assert Echo(name="other").name == "other"
    with pytest.raises(TypeError, match="unexpected field"):
        Echo(nope=1)


def test_subclass_tool_runs_in_tool_node():
    out = ToolNode([Echo(reply="pong")]).invoke(_call())
    assert out["messages"][0].content == "pong"
    assert out["messages"][0].tool_call_id == "c1"


def test_injected_field_of_args_schema_is_filled_and_hidden_from_the_model():
    class Schema(BaseModel):
        tool_call_id: Annotated[str, InjectedToolCallId]

    class Handoff(Tool):
        def _run(self, *args: Any, **kwargs: Any) -> Any:
            return Command(update={"messages": [
                ToolMessage(content="moved", tool_call_id=kwargs["tool_call_id"])]})

    tool = Handoff(name="handoff", description="Hand off", args_schema=Schema)
    assert tool.json_schema()["properties"] == {}
    out = ToolNode([tool]).invoke(_call("handoff", cid="abc"))
    assert out[0].update["messages"][0].tool_call_id == "abc"


@pytest.mark.parametrize("handle", [True, (GraphBubbleUp,), "handled", lambda e: "h", False])
def test_graph_bubble_up_is_never_turned_into_a_message(handle):
    def bubbling(some_val: int) -> None:
        """Raise the signal."""
        raise GraphBubbleUp("foo")

    node = ToolNode([bubbling], handle_tool_errors=handle)
    with pytest.raises(GraphBubbleUp):
        node.invoke(_call("bubbling", {"some_val": 0}))
    assert issubclass(GraphInterrupt, GraphBubbleUp)
