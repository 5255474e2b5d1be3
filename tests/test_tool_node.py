"""ToolNode: concurrency, call order, error messages (H14-H17, H22), Commands, injection."""

from __future__ import annotations

import asyncio
import json
import random
import threading
import time
from typing import Annotated, Any

import pytest

from threadloom.engine.runtime import GraphInterrupt
from threadloom.messages import (
    AIMessage,
    HumanMessage,
    ToolMessage,
    make_tool_call,
    message_from_openai,
)
from threadloom.nodes import ToolNode, idempotency_key, tools_condition
from threadloom.tools import InjectedIdempotencyKey, InjectedState, InjectedToolCallId, tool
from threadloom.types import END, Command, Interrupt


def ai(*calls: tuple[str, dict[str, Any], str], **kwargs: Any) -> AIMessage:
    tool_calls = [{"name": n, "args": a, "id": i, "type": "tool_call"} for n, a, i in calls]
    return AIMessage("", tool_calls=tool_calls, **kwargs)


def state_of(message: AIMessage) -> dict[str, Any]:
    return {"messages": [HumanMessage("go"), message]}


def wire_call(call_id: str, name: str, arguments: Any) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def from_wire(calls: list[dict[str, Any]], finish_reason: str = "tool_calls") -> AIMessage:
    msg = {"role": "assistant", "content": None, "tool_calls": calls}
    out = message_from_openai({"message": msg, "finish_reason": finish_reason})
    assert isinstance(out, AIMessage)
    return out


# --- H15: a tool raises; order and status ----------------------------------------------


@tool
def slow_ok() -> str:
    """Slow."""
    time.sleep(0.2)
    return "A"


@tool
def boom() -> str:
    """Fails."""
    raise RuntimeError("network down")


@tool
async def fast_ok() -> str:
    """Fast."""
    return "C"


H15_CALL = ai(("slow_ok", {}, "c1"), ("boom", {}, "c2"), ("fast_ok", {}, "c3"))


async def test_h15_tool_exception_becomes_error_message_in_call_order() -> None:
    node = ToolNode([slow_ok, boom, fast_ok], handle_tool_errors=True)
    out = await node(state_of(H15_CALL))
    msgs = out["messages"]
    assert [m.tool_call_id for m in msgs] == ["c1", "c2", "c3"]
    assert all(isinstance(m, ToolMessage) for m in msgs)
    assert [(m.status, m.content) for m in (msgs[0], msgs[2])] == [
        ("success", "A"),
        ("success", "C"),
    ]
    assert msgs[1].status == "error"
    assert "RuntimeError" in msgs[1].content and "network down" in msgs[1].content
    assert [m.name for m in msgs] == ["slow_ok", "boom", "fast_ok"]


async def test_h15_with_error_handling_off_the_exception_propagates() -> None:
    node = ToolNode([slow_ok, boom, fast_ok], handle_tool_errors=False)
    with pytest.raises(RuntimeError, match="network down"):
        await node(state_of(H15_CALL))


async def test_by_default_a_tools_own_exception_is_raised_as_in_langgraph() -> None:
    # LangGraph's default handler answers only invalid arguments and re-raises the rest,
    # in a sync invoke (the lone-call inline path) and an async run alike
    with pytest.raises(RuntimeError, match="network down"):
        await ToolNode([slow_ok, boom, fast_ok])(state_of(H15_CALL))
    with pytest.raises(RuntimeError, match="network down"):
        ToolNode([boom]).invoke(state_of(ai(("boom", {}, "c1"))))


async def test_by_default_invalid_arguments_are_answered() -> None:
    @tool
    def add(a: int) -> int:
        """Add."""
        return a

    out = await ToolNode([add])(state_of(ai(("add", {"a": "x"}, "c1"))))
    [msg] = out["messages"]
    assert msg.status == "error"
    assert msg.content.startswith("Error invoking tool 'add' with kwargs {'a': 'x'} with error:")


# --- concurrency ----------------------------------------------------------------------


async def test_calls_run_concurrently_sync_and_async() -> None:
    # Each call waits for the other to have started: one after the other, the first would
    # give up after 10 s and say "alone"; together, each sees the other at once. (No wall
    # time is measured, so a busy machine or a parallel test run cannot fail it.)
    sync_started, async_started = threading.Event(), threading.Event()

    @tool
    def nap_sync() -> str:
        """Wait in a thread for the async call."""
        sync_started.set()
        return "s" if async_started.wait(10) else "s alone"

    @tool
    async def nap_async() -> str:
        """Wait in the loop for the sync call."""
        async_started.set()
        for _ in range(1000):
            if sync_started.is_set():
                return "a"
            await asyncio.sleep(0.01)
        return "a alone"

    node = ToolNode([nap_sync, nap_async])
    out = await node(state_of(ai(("nap_sync", {}, "1"), ("nap_async", {}, "2"))))
    assert [m.content for m in out["messages"]] == ["s", "a"]


async def test_order_is_call_order_whatever_the_finish_order() -> None:
    @tool
    async def wait(ms: int) -> int:
        """Sleep ms milliseconds."""
        await asyncio.sleep(ms / 1000)
        return ms

    delays = [random.randint(1, 40) for _ in range(12)]  # noqa: S311
    calls = [("wait", {"ms": d}, f"c{i}") for i, d in enumerate(delays)]
    out = await ToolNode([wait])(state_of(ai(*calls)))
    assert [m.tool_call_id for m in out["messages"]] == [f"c{i}" for i in range(12)]
    assert [m.content for m in out["messages"]] == [str(d) for d in delays]


async def test_max_concurrency_bounds_calls_running_at_once() -> None:
    running, peak = 0, 0

    @tool
    async def busy(n: int) -> int:
        """Count calls running together."""
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.01)
        running -= 1
        return n

    calls = [("busy", {"n": i}, f"c{i}") for i in range(6)]
    out = await ToolNode([busy], max_concurrency=2)(state_of(ai(*calls)))
    assert [m.content for m in out["messages"]] == [str(i) for i in range(6)] and peak == 2
    peak = 0
    await ToolNode([busy])(state_of(ai(*calls)))
    assert peak == 6
    with pytest.raises(ValueError, match="max_concurrency must be an int greater than or"):
        ToolNode([busy], max_concurrency=0)


# --- H16: unknown tool ----------------------------------------------------------------


async def test_h16_unknown_tool_lists_available_tools_and_others_run() -> None:
    ran: list[str] = []

    @tool
    def get_weather(city: str = "Oslo") -> str:
        """Weather."""
        ran.append("get_weather")
        return "sunny"

    @tool
    def get_time() -> str:
        """Time."""
        ran.append("get_time")
        return "12:00"

    message = from_wire(
        [wire_call("c1", "execute_python", "{}"), wire_call("c2", "get_time", "{}")]
    )
    out = await ToolNode([get_weather, get_time])(state_of(message))
    first, second = out["messages"]
    assert (first.tool_call_id, first.status) == ("c1", "error")
    assert "execute_python" in first.content
    assert "get_weather" in first.content and "get_time" in first.content
    assert (second.tool_call_id, second.status, second.content) == ("c2", "success", "12:00")
    assert ran == ["get_time"]


# --- H17: invalid JSON, validation errors, empty arguments ----------------------------


async def test_h17_invalid_json_validation_error_and_empty_string() -> None:
    counts = {"add": 0, "now": 0}

    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        counts["add"] += 1
        return a + b

    @tool
    def now() -> str:
        """The time."""
        counts["now"] += 1
        return "12:00"

    message = from_wire(
        [
            wire_call("c1", "add", '{"a": 1, "b": }'),
            wire_call("c2", "add", '{"a": "x", "b": 2}'),
            wire_call("c3", "now", ""),
        ]
    )
    out = await ToolNode([add, now])(state_of(message))
    by_id = {m.tool_call_id: m for m in out["messages"]}
    assert set(by_id) == {"c1", "c2", "c3"}
    c1, c2, c3 = by_id["c1"], by_id["c2"], by_id["c3"]
    assert c1.status == "error" and "not valid JSON" in c1.content
    schema = json.loads(c1.content[c1.content.index("schema: ") + len("schema: "):])
    assert schema["properties"] == {"a": {"type": "integer"}, "b": {"type": "integer"}}
    assert c2.status == "error" and "a: Input should be a valid integer" in c2.content
    assert "not valid JSON" not in c2.content
    assert (c3.status, c3.content) == ("success", "12:00")
    assert counts == {"add": 0, "now": 1}


# --- H14: truncated calls -------------------------------------------------------------


def _h14_node() -> tuple[ToolNode, dict[str, int]]:
    side_effects = {"n": 0}

    @tool
    def write_file(path: str, content: str) -> str:
        """Write a file."""
        side_effects["n"] += 1
        return "written"

    return ToolNode([write_file]), side_effects


CUT = '{"path":"a.txt","content":"hel'


@pytest.mark.parametrize(
    ("calls", "finish_reason", "ids"),
    [
        ([wire_call("c1", "write_file", CUT)], "length", ["c1"]),  # A
        ([wire_call("c1", "write_file", CUT)], "tool_calls", ["c1"]),  # B
        (
            [
                wire_call("c1", "write_file", '{"path":"b.txt","content":"ok"}'),
                wire_call("c2", "write_file", CUT),
            ],
            "length",
            ["c1", "c2"],
        ),  # C
        (
            [
                wire_call("c1", "write_file", '{"path":"b.txt","content":"ok"}'),
                wire_call("c2", "write_file", CUT),
            ],
            "tool_calls",
            ["c1", "c2"],
        ),  # C relabelled by a router
    ],
    ids=["A", "B", "C", "C-relabelled"],
)
async def test_h14_no_call_of_a_truncated_reply_runs(
    calls: list[dict[str, Any]], finish_reason: str, ids: list[str]
) -> None:
    node, side_effects = _h14_node()
    out = await node(state_of(from_wire(calls, finish_reason)))
    assert side_effects["n"] == 0
    assert [m.tool_call_id for m in out["messages"]] == ids
    for msg in out["messages"]:
        assert msg.status == "error"
        assert "truncated" in msg.content and "again in full" in msg.content


async def test_h14_complete_call_with_finish_reason_length_is_not_run() -> None:
    node, side_effects = _h14_node()
    message = ai(
        ("write_file", {"path": "a", "content": "b"}, "c1"),
        response_metadata={"finish_reason": "length"},
    )
    out = await node(state_of(message))
    assert side_effects["n"] == 0
    assert "truncated" in out["messages"][0].content


# --- H22: argument shapes -------------------------------------------------------------


@pytest.mark.parametrize(
    "arguments",
    ['{"city": "Oslo"}', {"city": "Oslo"}, json.dumps(json.dumps({"city": "Oslo"}))],
    ids=["R1-string", "R2-object", "R3-double-encoded"],
)
async def test_h22_tool_called_with_city_oslo(arguments: Any) -> None:
    seen: list[str] = []

    @tool
    def get_weather(city: str) -> str:
        """Weather."""
        seen.append(city)
        return f"sunny in {city}"

    message = from_wire([wire_call("c1", "get_weather", arguments)])
    out = await ToolNode([get_weather])(state_of(message))
    assert seen == ["Oslo"]
    assert out["messages"][0].content == "sunny in Oslo"


@pytest.mark.parametrize("arguments", ["[1,2]", "42", '"just text"', [1, 2]])
async def test_h22_non_object_arguments_give_an_error_message(arguments: Any) -> None:
    seen: list[Any] = []

    @tool
    def get_weather(city: str) -> str:
        """Weather."""
        seen.append(city)
        return "sunny"

    message = from_wire([wire_call("c1", "get_weather", arguments)])
    out = await ToolNode([get_weather])(state_of(message))
    (msg,) = out["messages"]
    assert (msg.tool_call_id, msg.status) == ("c1", "error")
    assert "JSON object" in msg.content
    assert seen == []


# --- injection and idempotency --------------------------------------------------------


async def test_injected_params_are_filled_and_model_cannot_override() -> None:
    @tool
    def whoami(
        q: str,
        user: Annotated[str, InjectedState("user_id")],
        call_id: Annotated[str, InjectedToolCallId],
        key: Annotated[str, InjectedIdempotencyKey],
        config: dict,
    ) -> dict:
        """Who am I."""
        return {"user": user, "call_id": call_id, "key": key, "thread": config["configurable"]}

    node = ToolNode([whoami])
    assert set(node.tools_by_name["whoami"].json_schema()["properties"]) == {"q"}
    forged = {"q": "x", "user": "root", "call_id": "forged", "key": "forged", "config": {}}
    state = {**state_of(ai(("whoami", forged, "c7"))), "user_id": "alice"}
    config = {"configurable": {"thread_id": "t1", "checkpoint_id": "ck5"}}
    out = await node(state, config)
    assert json.loads(out["messages"][0].content) == {
        "user": "alice",
        "call_id": "c7",
        "key": "t1:ck5:c7",
        "thread": {"thread_id": "t1", "checkpoint_id": "ck5"},
    }


def test_idempotency_key_shapes() -> None:
    assert idempotency_key(None, "c1") == "c1"
    assert idempotency_key({"configurable": {"thread_id": "t"}}, "c1") == "t:c1"
    cfg = {"configurable": {"thread_id": "t", "checkpoint_ns": "sub", "checkpoint_id": "k"}}
    assert idempotency_key(cfg, "c1") == "t:sub:k:c1"
    assert idempotency_key({"configurable": {"thread_id": "t"}}, "c1", "task9") == "t:task9:c1"


# --- handle_tool_errors variants ------------------------------------------------------


@tool
def bad_value() -> str:
    """Raises ValueError."""
    raise ValueError("bad input 7")


@pytest.mark.parametrize(
    ("handler", "expected"),
    [
        (True, "Error: ValueError('bad input 7')\n Please fix your mistakes."),
        ("Tool failed, try something else.", "Tool failed, try something else."),
        (lambda exc: f"handled {type(exc).__name__}", "handled ValueError"),
        ((ValueError, KeyError), "Error: ValueError('bad input 7')\n Please fix your mistakes."),
    ],
    ids=["true", "str", "callable", "tuple-match"],
)
async def test_handle_tool_errors_formats(handler: Any, expected: str) -> None:
    node = ToolNode([bad_value], handle_tool_errors=handler)
    out = await node(state_of(ai(("bad_value", {}, "c1"))))
    assert (out["messages"][0].status, out["messages"][0].content) == ("error", expected)


@pytest.mark.parametrize("handler", [False, (KeyError,)], ids=["false", "tuple-miss"])
async def test_handle_tool_errors_reraises(handler: Any) -> None:
    node = ToolNode([bad_value], handle_tool_errors=handler)
    with pytest.raises(ValueError, match="bad input 7"):
        await node(state_of(ai(("bad_value", {}, "c1"))))


async def test_argument_errors_are_raised_when_handling_is_off() -> None:
    # as LangGraph: False raises a ToolInvocationError too; an unknown tool is still
    # answered (it never runs anything)
    from threadloom.errors import ToolInvocationError

    @tool
    def add(a: int) -> int:
        """Add."""
        return a

    node = ToolNode([add], handle_tool_errors=False)
    with pytest.raises(ToolInvocationError, match="Error invoking tool 'add'"):
        await node(state_of(ai(("add", {"a": "x"}, "c1"), ("nope", {}, "c2"))))
    out = await node(state_of(ai(("nope", {}, "c2"))))
    assert [m.status for m in out["messages"]] == ["error"]


async def test_interrupt_inside_a_tool_always_propagates() -> None:
    @tool
    def ask() -> str:
        """Ask a human."""
        raise GraphInterrupt([Interrupt("approve?", "i1")])

    with pytest.raises(GraphInterrupt) as info:
        await ToolNode([ask])(state_of(ai(("ask", {}, "c1"), ("ask", {}, "c2"))))
    assert [i.value for i in info.value.interrupts] == ["approve?", "approve?"]


# --- return values --------------------------------------------------------------------


async def test_return_conversions() -> None:
    @tool
    def as_dict() -> dict:
        """Dict."""
        return {"temp": 21}

    @tool
    def as_message(call_id: Annotated[str, InjectedToolCallId]) -> ToolMessage:
        """A ready ToolMessage."""
        return ToolMessage("custom", tool_call_id=call_id, artifact={"raw": 1})

    @tool
    def as_blocks() -> list:
        """Content blocks."""
        return [{"type": "text", "text": "hi"}]

    calls = ai(("as_dict", {}, "c1"), ("as_message", {}, "c2"), ("as_blocks", {}, "c3"))
    msgs = (await ToolNode([as_dict, as_message, as_blocks])(state_of(calls)))["messages"]
    assert msgs[0].content == '{"temp": 21}'
    assert (msgs[1].content, msgs[1].artifact, msgs[1].name) == ("custom", {"raw": 1}, "as_message")
    assert msgs[2].content == [{"type": "text", "text": "hi"}]


async def test_command_results_keep_call_order_and_pass_updates() -> None:
    @tool
    def set_user(name: str, call_id: Annotated[str, InjectedToolCallId]) -> Command:
        """Set the user."""
        done = ToolMessage(f"user set to {name}", tool_call_id=call_id)
        return Command(update={"messages": [done], "user": name}, goto="model")

    @tool
    def bump() -> Command:
        """Bump a counter without a message."""
        return Command(update={"count": 1})

    @tool
    def echo(x: str) -> str:
        """Echo."""
        return x

    calls = ai(("set_user", {"name": "ana"}, "c1"), ("echo", {"x": "e"}, "c2"), ("bump", {}, "c3"))
    # by default (LangGraph's) a Command that answers no call is refused
    with pytest.raises(ValueError, match="Expected to have a matching ToolMessage"):
        await ToolNode([set_user, bump, echo])(state_of(calls))
    out = await ToolNode([set_user, bump, echo], answer_commands=True)(state_of(calls))
    # LangGraph's shape: one item per output in call order, Commands as returned (their
    # call's ToolMessage named after the tool), plain results as {"messages": [m]}
    assert isinstance(out, list) and len(out) == 4
    cmd1, second, made, cmd2 = out
    done = ToolMessage("user set to ana", tool_call_id="c1", name="set_user")
    assert (cmd1.update, cmd1.goto) == ({"messages": [done], "user": "ana"}, "model")
    assert [m.tool_call_id for m in second["messages"]] == ["c2"]
    # a Command without its call's answer gets one made, in front of it
    assert [m.tool_call_id for m in made["messages"]] == ["c3"]
    assert "count" in made["messages"][0].content
    assert cmd2.update == {"count": 1}


async def test_tool_returning_a_list_needs_exactly_one_answer_of_its_call() -> None:
    @tool
    def both(call_id: Annotated[str, InjectedToolCallId]) -> list:
        """Update and answer."""
        return [Command(update={"n": 1}), ToolMessage("ok", tool_call_id=call_id)]

    @tool
    def none_(call_id: Annotated[str, InjectedToolCallId]) -> list:
        """Update only."""
        return [Command(update={"n": 1})]

    out = await ToolNode([both])(state_of(ai(("both", {}, "c1"))))
    assert out[0] == Command(update={"n": 1})
    assert out[1]["messages"][0].model_dump() == ToolMessage(
        "ok", tool_call_id="c1", name="both").model_dump()
    out = await ToolNode([none_], handle_tool_errors=True)(state_of(ai(("none_", {}, "c1"))))
    (msg,) = out["messages"]
    assert msg.status == "error" and "0 messages bound to tool_call_id" in msg.content
    with pytest.raises(ValueError, match="0 messages bound"):
        await ToolNode([none_], handle_tool_errors=False)(state_of(ai(("none_", {}, "c1"))))


async def test_parent_command_passes_through_untouched() -> None:
    cmd = Command(update={"x": 1}, goto="elsewhere", graph=Command.PARENT)

    @tool
    def escalate() -> Command:
        """Escalate."""
        return cmd

    out = await ToolNode([escalate])(state_of(ai(("escalate", {}, "c1"))))
    assert out == [cmd]


# --- node plumbing --------------------------------------------------------------------


async def test_object_state_custom_key_and_plain_functions() -> None:
    def shout(text: str) -> str:
        """Shout."""
        return text.upper()

    class S:
        chat = [HumanMessage("hi"), ai(("shout", {"text": "hey"}, "c1")), HumanMessage("later")]

    node = ToolNode([shout], messages_key="chat", name="my_tools")
    out = await node(S())
    assert node.name == "my_tools"
    assert out["chat"][0].content == "HEY"


async def test_node_errors() -> None:
    with pytest.raises(ValueError, match="two tools"):
        ToolNode([slow_ok, slow_ok])
    with pytest.raises(ValueError, match="no AI message"):
        await ToolNode([slow_ok])({"messages": [HumanMessage("hi")]})
    with pytest.raises(ValueError, match="'messages'"):
        await ToolNode([slow_ok])({})


def test_tools_condition() -> None:
    assert tools_condition({"messages": [ai(("x", {}, "c1"))]}) == "tools"
    bad = AIMessage("", invalid_tool_calls=[make_tool_call("x", "{", "c1")])
    assert tools_condition({"messages": [bad]}) == "tools"
    assert tools_condition({"messages": [AIMessage("done")]}) == END
    assert tools_condition({"messages": [ai(("x", {}, "c1")), HumanMessage("more")]}) == END
    assert tools_condition({"messages": []}) == END


def test_invoke_and_ainvoke_outside_a_graph_as_langgraph() -> None:
    # LangGraph's ToolNode is a Runnable: invoke({"messages": [...]}) gives
    # {"messages": [ToolMessage]}, and a list of messages gives the list of results.
    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    node = ToolNode([add])
    ask = AIMessage(content="", tool_calls=[
        {"name": "add", "args": {"a": 1, "b": 2}, "id": "c1"},
        {"name": "add", "args": {"a": 3, "b": 4}, "id": "c2"}])
    out = node.invoke({"messages": [ask]})
    assert [(m.tool_call_id, m.content) for m in out["messages"]] == [("c1", "3"), ("c2", "7")]
    listed = asyncio.run(node.ainvoke([ask], {"configurable": {"thread_id": "t"}}))
    assert [m.content for m in listed] == ["3", "7"]
    assert all(isinstance(m, ToolMessage) for m in listed)
