"""The speed paths give the same results as the general paths they skip.

- ``ScriptedChatModel.invoke`` (no streaming) builds the message its chunks add up to;
- a lone sync tool call runs on the run's thread only in a sync run (``blocking_ok``);
- the codec's pydantic-core JSON writer reads back like the stdlib one.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from threadloom import AIMessage, ScriptedChatModel, StateGraph, create_agent, tool
from threadloom.checkpoint.serde import Codec
from threadloom.models.base import ChunkAccumulator, guard_tool_calls
from threadloom.nodes.tool_node import ToolNode
from threadloom.reducers import MessagesState
from threadloom.types import END, START

REPLIES: list[Any] = [
    "hello  world ",
    "",
    AIMessage(content="x y", tool_calls=[{"name": "bump", "args": {"x": 1}, "id": "c1"}]),
    AIMessage(content=[{"type": "text", "text": "hi"}], reasoning_content="think hard",
              refusal="no way"),
    AIMessage(content="", tool_calls=[
        {"name": "a", "args": {}, "id": "c1"}, {"name": "b", "args": {"q": [1, "é"]}, "id": "c2"}],
        usage_metadata={"input_tokens": 3, "output_tokens": 4, "total_tokens": 7},
        response_metadata={"finish_reason": "length", "x": 1}),
    AIMessage(content="n", name="bob", additional_kwargs={"k": 1}, id="fixed"),
    {"content": "d", "tool_calls": [{"name": "f", "args": '{"a": 1', "id": "z"}]},
    {"content": "e", "tool_calls": [{"name": "", "args": '{"aaaa": 1}', "id": "z"}]},
]


def _dump(message: AIMessage) -> dict[str, Any]:
    data = message.model_dump()
    data.pop("id")
    return data


@pytest.mark.parametrize("reply", REPLIES)
def test_scripted_invoke_equals_its_streamed_chunks(reply: Any) -> None:
    plain = ScriptedChatModel([reply]).invoke([("user", "q")])
    acc = ChunkAccumulator()
    for chunk in ScriptedChatModel([reply]).stream([("user", "q")]):
        acc.add(chunk)
    streamed = guard_tool_calls(acc.result())
    assert type(plain) is AIMessage and _dump(plain) == _dump(streamed)
    assert plain.model_fields_set == streamed.model_fields_set
    if isinstance(reply, AIMessage) and reply.id:
        assert plain.id == streamed.id == reply.id


def test_scripted_dict_reply_is_still_validated() -> None:
    model = ScriptedChatModel([{"content": "x", "id": 5}])
    with pytest.raises(ValueError, match="id"):
        model.invoke("q")


def _threads_of_lone_call(run_async: bool) -> set[str]:
    seen: set[str] = set()

    @tool
    def where() -> str:
        """Say where."""
        seen.add(threading.current_thread().name)
        return "ok"

    script = [AIMessage(content="", tool_calls=[{"name": "where", "args": {}, "id": "c1"}]),
              "done"]
    agent = create_agent(ScriptedChatModel(script), tools=[where])
    if run_async:
        out = asyncio.run(agent.ainvoke({"messages": [("user", "go")]}))
    else:
        out = agent.invoke({"messages": [("user", "go")]})
    assert out["messages"][2].content == "ok"
    return seen


def test_lone_sync_tool_runs_inline_only_in_sync_runs() -> None:
    main = threading.current_thread().name
    assert _threads_of_lone_call(run_async=False) == {main}
    assert main not in _threads_of_lone_call(run_async=True)


def test_several_sync_tool_calls_still_use_worker_threads() -> None:
    seen: list[str] = []

    @tool
    def ping(n: int) -> int:
        """Ping."""
        seen.append(threading.current_thread().name)
        return n

    def call_tools(state: MessagesState) -> dict[str, Any]:
        calls = [{"name": "ping", "args": {"n": i}, "id": f"c{i}"} for i in range(2)]
        return {"messages": [AIMessage(content="", tool_calls=calls)]}

    builder = StateGraph(MessagesState)
    builder.add_node("ask", call_tools)
    builder.add_node("tools", ToolNode([ping]))
    builder.add_edge(START, "ask")
    builder.add_edge("ask", "tools")
    builder.add_edge("tools", END)
    out = builder.compile().invoke({"messages": [("user", "go")]})
    assert [m.content for m in out["messages"][2:]] == ["0", "1"]
    assert threading.current_thread().name not in seen and len(seen) == 2


@pytest.mark.parametrize("value", [
    {"a": [1, 2.5, None, True, 1.5e-7, 2**70], "b": {"c": "é\u2028\x00"}},
    ["\ud800 lone", {"k": "a\udfffb"}],
    {"__tl__": 1, "x": (1, 2)},
])
def test_codec_fast_writer_round_trips(value: Any) -> None:
    codec = Codec()
    assert codec.loads(codec.dumps(value)) == value


def test_routing_awaits_an_async_path_midway_and_keeps_the_order() -> None:
    """An async path among sync ones: the next step's tasks (and so the order their
    writes apply in) follow the edges' order, as with sync paths only."""
    import operator
    from typing import Annotated, TypedDict

    class S(TypedDict):
        seen: Annotated[list[str], operator.add]

    def node(name: str) -> Any:
        return lambda state: {"seen": [name]}

    async def later(state: S) -> str:
        await asyncio.sleep(0)
        return "d"

    builder = StateGraph(S)
    for name in "abcdef":
        builder.add_node(name, node(name))
    builder.add_edge(START, "a")
    builder.add_edge(START, "b")
    builder.add_conditional_edges("a", lambda s: "c")
    builder.add_conditional_edges("a", later)
    builder.add_conditional_edges("a", lambda s: ["e", END])
    builder.add_conditional_edges("b", lambda s: "f")
    graph = builder.compile()
    assert graph.invoke({"seen": []})["seen"] == ["a", "b", "c", "d", "e", "f"]
    assert asyncio.run(graph.ainvoke({"seen": []}))["seen"] == ["a", "b", "c", "d", "e", "f"]


@pytest.mark.parametrize("raw", [
    b'{"a":1,"b":[null,true,"x"]}', b' {"a":1} ', b"[1,2]", b"NaN", b'"x"', b"1",
    b'{"a":1}x', '"\\ud800"'.encode("utf-8", "surrogatepass"), '{"a":1}'.encode("utf-16"),
    b'{"a":1', b"", b"\xff", b'{"a":"\xc3\xa9"}',
])
def test_the_codecs_plain_json_parse_is_json_loads(raw: bytes) -> None:
    """The codec parses what it wrote with the JSON scanner directly; every input gives
    what ``json.loads`` gives, the same value or the same error."""
    import json

    from threadloom.checkpoint.serde_read import _plain_json

    def outcome(parse: Any) -> Any:
        try:
            return ("ok", repr(parse(raw)))
        except ValueError as exc:
            return ("error", type(exc).__name__, str(exc))

    assert outcome(_plain_json) == outcome(json.loads)
