"""ToolNode as LangGraph's: tool-call-list input, ToolRuntime, wrap_tool_call, typed error
handlers, ToolException, InjectedState errors, InjectedToolArg, parent Send merging."""

from __future__ import annotations

import dataclasses
import warnings
from typing import Annotated, Any, TypedDict

import pytest

from threadloom import StateGraph
from threadloom.errors import ToolException
from threadloom.messages import AIMessage, HumanMessage, ToolMessage
from threadloom.nodes import ToolNode
from threadloom.nodes.tool_request import ToolCallRequest
from threadloom.tools import InjectedState, InjectedToolCallId, ToolRuntime, tool
from threadloom.tools.markers import InjectedToolArg
from threadloom.types import END, START, Command, Send


def call(name: str, args: dict[str, Any] | None = None, cid: str = "c1") -> dict[str, Any]:
    return {"name": name, "args": args or {}, "id": cid, "type": "tool_call"}


def state(*calls: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"messages": [HumanMessage("go"), AIMessage("", tool_calls=list(calls))], **extra}


@tool
def add(a: int, b: int) -> int:
    """Add."""
    return a + b


def test_a_list_of_tool_calls_is_input_too() -> None:
    out = ToolNode([add]).invoke([call("add", {"a": 1, "b": 2}), call("nope", cid="c2")])
    first, second = out["messages"]
    assert (first.content, first.tool_call_id) == ("3", "c1")
    assert second.content == "Error: nope is not a valid tool, try one of [add]."
    assert second.status == "error"


def test_a_list_of_messages_gives_a_list() -> None:
    out = ToolNode([add]).invoke(state(call("add", {"a": 2, "b": 2}))["messages"])
    assert [m.content for m in out] == ["4"]


@dataclasses.dataclass
class Ctx:
    user: str


class S(TypedDict):
    messages: list[Any]
    topic: str


def test_tool_runtime_in_a_graph_sees_state_context_config_and_stream() -> None:
    seen: dict[str, Any] = {}

    @tool
    def look(q: str, rt: ToolRuntime[Ctx]) -> str:
        """Look."""
        seen.update(state=rt.state["topic"], call=rt.tool_call_id, tools=[t.name for t in rt.tools],
                    thread=rt.config["configurable"]["thread_id"])
        rt.stream_writer({"progress": q})
        assert rt.execution_info is not None and rt.execution_info.task_id
        return f"{rt.context.user}:{q}"

    assert "rt" not in look.json_schema()["properties"]
    graph = StateGraph(S, context_schema=Ctx)
    graph.add_node("tools", ToolNode([look, add]))
    graph.add_edge(START, "tools")
    graph.add_edge("tools", END)
    app = graph.compile()
    chunks = list(app.stream(state(call("look", {"q": "x"})) | {"topic": "t1"},
                             {"configurable": {"thread_id": "th"}}, context=Ctx("ana"),
                             stream_mode=["custom", "values"]))
    assert ("custom", {"progress": "x"}) in chunks
    final = [c for m, c in chunks if m == "values"][-1]
    assert final["messages"][-1].content == "ana:x"
    assert seen == {"state": "t1", "call": "c1", "tools": ["look", "add"], "thread": "th"}


def test_tool_runtime_by_hand_reads_the_config_runtime() -> None:
    @tool
    def who(rt: ToolRuntime) -> str:
        """Who."""
        return str(rt.context)

    class Base:
        context = "ctx!"
        store = None
        execution_info = server_info = None

        @staticmethod
        def stream_writer(chunk: Any) -> None:
            pass

    out = ToolNode([who]).invoke(state(call("who")),
                                 {"configurable": {"__pregel_runtime": Base()}})
    assert out["messages"][0].content == "ctx!"
    assert ToolRuntime(state={}, context=None, config={}, stream_writer=print,
                       tool_call_id=None, store=None).tools == []


@tool
def secret(x: int, rt: ToolRuntime) -> str:
    """Not given to the node."""
    return f"{x}:{rt.tool_call_id}"


def test_wrap_tool_call_may_run_a_tool_the_node_was_not_given() -> None:
    def wrap(request: ToolCallRequest, execute: Any) -> Any:
        assert request.tool is None  # unknown to the node
        return execute(request.override(tool=secret))

    node = ToolNode([add], wrap_tool_call=wrap)
    out = node.invoke(state(call("secret", {"x": 4}, "k1")))
    assert out["messages"][0].content == "4:k1"


async def test_awrap_tool_call_sees_each_call_and_can_replace_the_result() -> None:
    async def awrap(request: ToolCallRequest, execute: Any) -> Any:
        if request.tool_call["name"] == "add":
            return ToolMessage("skipped", tool_call_id=request.tool_call["id"], name="add")
        return await execute(request.override(tool=secret))

    out = await ToolNode([add], awrap_tool_call=awrap).ainvoke(
        state(call("add", {"a": 1, "b": 1}), call("secret", {"x": 1}, "c2")))
    assert [m.content for m in out["messages"]] == ["skipped", "1:c2"]


def test_changing_a_request_in_place_warns() -> None:
    request = ToolCallRequest(tool_call=call("add"), tool=None)
    with pytest.warns(DeprecationWarning, match="override"):
        request.tool_call = call("other")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert request.override(tool=add).tool is add


@tool
def fails(kind: str) -> str:
    """Fail as told."""
    if kind == "value":
        raise ValueError("bad value")
    raise ToolException("tool said no")


def test_a_typed_handler_covers_only_its_annotated_exceptions() -> None:
    def on_value(e: ValueError) -> str:
        return "value handled"

    node = ToolNode([fails], handle_tool_errors=on_value)
    assert node.invoke(state(call("fails", {"kind": "value"})))["messages"][0].content == (
        "value handled")
    with pytest.raises(ToolException, match="tool said no"):
        node.invoke(state(call("fails", {"kind": "tool"})))

    def on_either(e: ValueError | ToolException) -> str:
        return type(e).__name__

    out = ToolNode([fails], handle_tool_errors=on_either).invoke(
        state(call("fails", {"kind": "tool"})))
    assert out["messages"][0].content == "ToolException"


def test_a_tool_answers_its_own_tool_exception_first() -> None:
    @tool
    def own() -> str:
        """Fail."""
        raise ToolException("no")

    own.handle_tool_error = "own text"  # type: ignore[attr-defined]
    out = ToolNode([own], handle_tool_errors="node text").invoke(state(call("own")))
    assert (out["messages"][0].content, out["messages"][0].status) == ("own text", "error")


def test_invalid_arguments_name_the_call_and_the_fields() -> None:
    out = ToolNode([add]).invoke(state(call("add", {"a": 1})))
    text = out["messages"][0].content
    assert text.startswith("Error invoking tool 'add' with kwargs {'a': 1} with error:\n b:")
    assert '"required"' in text  # the schema, so the model can fix its call


def test_injected_state_field_missing_is_an_error_unless_it_has_a_default() -> None:
    @tool
    def needs(q: int, topic: Annotated[str, InjectedState("topic")]) -> str:
        """Needs a topic."""
        return topic

    @tool
    def maybe(q: int, topic: Annotated[str, InjectedState("topic")] = "none") -> str:
        """Maybe a topic."""
        return topic

    @tool
    def msgs(q: int, m: Annotated[list, InjectedState("messages")]) -> str:
        """Reads messages."""
        return m[0].content

    node = ToolNode([needs, maybe, msgs], handle_tool_errors=True)
    with pytest.raises(KeyError):
        node.invoke(state(call("needs", {"q": 1})))
    assert node.invoke(state(call("maybe", {"q": 1})))["messages"][0].content == "none"
    listed = state(call("needs", {"q": 1}))["messages"]
    with pytest.raises(ValueError, match="graph state"):
        node.invoke(listed)
    listed = state(call("msgs", {"q": 1}))["messages"]
    assert node.invoke(listed)[0].content == "go"


class Auth(InjectedToolArg):
    """A caller-supplied argument marker of one's own."""


def test_injected_tool_arg_is_hidden_and_never_taken_from_the_model() -> None:
    @tool
    def read(q: str, auth: Annotated[dict, Auth()]) -> str:
        """Read."""
        return "ADMIN" if auth.get("role") == "admin" else "PUBLIC"

    assert set(read.json_schema()["properties"]) == {"q"}
    assert read.invoke({"q": "x", "auth": {"role": "admin"}}) == "ADMIN"  # the caller's
    out = ToolNode([read], handle_tool_errors=True).invoke(
        state(call("read", {"q": "x", "auth": {"role": "admin"}})))
    assert out["messages"][0].status == "error" and "ADMIN" not in out["messages"][0].content


def test_parent_commands_that_only_send_are_merged_last() -> None:
    def handoff(to: str) -> Any:
        @tool(f"to_{to}")
        def go(cid: Annotated[str, InjectedToolCallId]) -> Command:
            """Hand off."""
            msg = ToolMessage("moved", tool_call_id=cid)
            return Command(graph=Command.PARENT, goto=[Send(to, {"messages": [msg]})])
        return go

    out = ToolNode([handoff("a"), handoff("b"), add]).invoke(
        state(call("to_a", cid="1"), call("add", {"a": 1, "b": 1}, "2"), call("to_b", cid="3")))
    assert out[0]["messages"][0].content == "2"
    assert len(out) == 2 and out[1].graph == Command.PARENT
    assert [s.node for s in out[1].goto] == ["a", "b"]


def test_a_command_removing_every_message_needs_no_answer() -> None:
    from threadloom.messages import REMOVE_ALL_MESSAGES, RemoveMessage

    @tool
    def wipe() -> Command:
        """Wipe."""
        return Command(update={"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES)]})

    out = ToolNode([wipe]).invoke(state(call("wipe")))
    assert out == [Command(update={"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES)]})]
