"""The agent's fast paths give exactly what the general paths give.

Each shortcut taken for the common case (one new message, a valid history, an ``AIMessage``
reply, a plain tool result, a sync tool in an async run) is checked against the slower
code it stands for, or against a plain reference written here.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import threading
import uuid
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, Field, ValidationError
from pydantic_core import to_jsonable_python

from threadloom import create_agent, tool
from threadloom.agent.requests import NO_OPTIONS, RunOptions, repair_tool_pairs, run_options
from threadloom.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
    construct_unchecked,
    new_tool_call_id,
)
from threadloom.messages.ids import uuid4_hex, uuid4_str
from threadloom.models import ScriptedChatModel
from threadloom.models.base import new_message_id
from threadloom.models.scripted import _flat_json
from threadloom.nodes import ToolNode
from threadloom.reducers import add_messages
from threadloom.tools import InjectedState, InjectedToolCallId, format_tool_output
from threadloom.types import Command

# -- ids ---------------------------------------------------------------------------------


def test_ids_have_the_shapes_of_uuid4_and_are_unique() -> None:
    seen: set[str] = set()
    for _ in range(2000):
        text = uuid4_str()
        parsed = uuid.UUID(text)
        assert str(parsed) == text and parsed.version == 4
        assert parsed.variant == uuid.RFC_4122
        hexed = uuid4_hex()
        assert uuid.UUID(hex=hexed).hex == hexed and uuid.UUID(hex=hexed).version == 4
        seen.update((text, hexed))
    assert len(seen) == 4000
    assert new_message_id().startswith("msg_") and len(new_message_id()) == 36
    assert new_tool_call_id().startswith("call_") and len(new_tool_call_id()) == 37


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_does_not_repeat_the_parents_ids() -> None:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: send one id and leave at once
        os.write(write, uuid4_str().encode())
        os._exit(0)
    os.close(write)
    mine = uuid4_str()
    theirs = os.read(read, 100).decode()
    os.close(read)
    os.waitpid(pid, 0)
    assert uuid.UUID(theirs).version == 4 and theirs != mine


# -- repair_tool_pairs -------------------------------------------------------------------


def _reference_repair(messages: list[BaseMessage]) -> list[BaseMessage]:
    """The H04 rule written plainly: each call's first result right after its message."""
    owner: dict[str, int] = {}
    results: dict[int, dict[str, Any]] = {}
    for index, message in enumerate(messages):
        if isinstance(message, ToolMessage):
            got = results.get(owner.get(message.tool_call_id, -1))
            if got is not None and message.tool_call_id not in got:
                got[message.tool_call_id] = message
        elif isinstance(message, AIMessage) and (message.tool_calls or message.invalid_tool_calls):
            for call in [*message.tool_calls, *message.invalid_tool_calls]:
                owner[call.get("id") or ""] = index
            results[index] = {}
    out: list[Any] = []
    for index, message in enumerate(messages):
        if isinstance(message, ToolMessage):
            continue
        out.append(message)
        for call in [*getattr(message, "tool_calls", []),
                     *getattr(message, "invalid_tool_calls", [])] if index in results else []:
            out.append(results[index].get(call.get("id") or "", ("missing", call.get("id"))))
    return out


def _random_history(rng: random.Random) -> list[BaseMessage]:
    ids = ["a", "b", "c"]
    history: list[BaseMessage] = []
    for _ in range(rng.randint(0, 8)):
        roll = rng.random()
        if roll < 0.25:
            history.append(HumanMessage("hi"))
        elif roll < 0.6:
            calls = [{"name": "t", "args": {}, "id": rng.choice(ids)}
                     for _ in range(rng.randint(0, 3))]
            bad = [{"name": "t", "args": "{", "id": rng.choice(ids), "error": "bad"}
                   for _ in range(rng.randint(0, 1))]
            history.append(AIMessage("", tool_calls=calls, invalid_tool_calls=bad))
        else:
            history.append(ToolMessage("r", tool_call_id=rng.choice(ids)))
    return history


def test_repair_tool_pairs_matches_the_plain_rule_on_random_histories() -> None:
    rng = random.Random(7)
    for _ in range(3000):
        history = _random_history(rng)
        expected = _reference_repair(history)
        repaired = repair_tool_pairs(history)
        got = [("missing", m.tool_call_id) if isinstance(m, ToolMessage) and m.status == "error"
               else m for m in repaired]
        assert len(got) == len(expected)
        for a, b in zip(got, expected, strict=True):
            assert a == b if isinstance(b, tuple) else a is b
        # untouched exactly when nothing was missing, misplaced or extra
        assert (repaired is history) == (
            len(expected) == len(history) and all(a is b for a, b in zip(expected, history,
                                                                            strict=True)))


# -- ScriptedChatModel ---------------------------------------------------------------------

REPLIES = [
    AIMessage("hello"),
    AIMessage("", tool_calls=[{"name": "a", "args": {"x": 1, "y": [1, (2, 3)]}, "id": "c1"}]),
    AIMessage("", tool_calls=[{"name": "a", "args": {"x": "é"}, "id": ""},
                              {"name": "b", "args": {}, "id": ""}]),
    AIMessage([{"type": "text", "text": "hi"}], id="given",
              usage_metadata={"input_tokens": 3, "output_tokens": 4, "total_tokens": 7}),
    AIMessage("t", reasoning_content="why", refusal="no", additional_kwargs={"q": 1},
              response_metadata={"finish_reason": "length", "x": 2}),
    AIMessage("", tool_calls=[{"name": "a", "args": {"x": 1}, "id": "c1"}],
              response_metadata={"finish_reason": "length"}),
    AIMessage("x", name="bob", id="m1"),
]


@pytest.mark.parametrize("reply", REPLIES, ids=range(len(REPLIES)))
def test_an_aimessage_reply_is_built_as_the_general_path_builds_it(reply: AIMessage) -> None:
    msgs: list[BaseMessage] = [HumanMessage("hello there"), HumanMessage([{"type": "text",
                                                                           "text": "abc"}])]
    model = ScriptedChatModel([reply], name="n")
    fast = model.invoke(msgs)
    general = model._finish(model._assemble(msgs, model._normalise(reply, 0, msgs)), None)
    a, b = fast.model_dump(), general.model_dump()
    if not reply.id:
        assert a.pop("id").startswith("msg_") and b.pop("id").startswith("msg_")
    assert a == b
    assert list(fast.__dict__) == list(general.__dict__)
    assert fast.model_fields_set == general.model_fields_set
    if reply.tool_calls and fast.tool_calls:
        assert fast.tool_calls[0]["args"] is not reply.tool_calls[0]["args"]  # its own copy


def test_the_call_record_is_not_the_callers_list() -> None:
    model = ScriptedChatModel(["a"])
    sent: list[BaseMessage] = [HumanMessage("one")]
    model.invoke(sent, temperature=0)
    sent.append(HumanMessage("two"))
    assert [m.text for m in model.calls[0]["messages"]] == ["one"]
    assert model.calls[0]["kwargs"] == {"temperature": 0}


# -- add_messages --------------------------------------------------------------------------


def test_one_message_updates_append_replace_and_survive_reused_lists() -> None:
    first = HumanMessage("a", id="1")
    left = add_messages([], [first])
    grown = add_messages(left, [AIMessage("b", id="2")])
    assert [m.id for m in grown] == ["1", "2"] and grown[0] is first
    # the older list again (its index was handed on to ``grown``): still right
    other = add_messages(left, [AIMessage("c", id="3")])
    assert [m.id for m in other] == ["1", "3"] and [m.id for m in left] == ["1"]
    replaced = add_messages(grown, [AIMessage("B", id="2")])
    assert [m.text for m in replaced] == ["a", "B"]
    fresh = ToolMessage("r", tool_call_id="x")
    added = add_messages(replaced, [fresh])
    assert added[-1] is fresh and fresh.id and uuid.UUID(fresh.id).version == 4
    assert [m.id for m in add_messages(added, [RemoveMessage(id="2")])] == ["1", fresh.id]
    again = add_messages(added, [fresh])  # the same message again: replaced, not appended
    assert len(again) == len(added)


# -- tools -------------------------------------------------------------------------------

@pytest.mark.parametrize("value", [0, -5, 10**30, True, False, 1.5, -0.0, 1e300, float("nan"),
                                   float("inf"), float("-inf"), "x", None, [1], {"a": 1}])
def test_format_tool_output_shortcuts_match_json(value: Any) -> None:
    if value is None:
        expected = ""
    elif isinstance(value, str):
        expected = value
    else:
        expected = json.dumps(to_jsonable_python(value, fallback=str), ensure_ascii=False)
    assert format_tool_output(value) == expected


def test_a_sync_tool_in_an_async_run_runs_off_the_loop_thread() -> None:
    threads: list[int] = []

    @tool
    def where(x: int) -> int:
        """Note the thread."""
        threads.append(threading.get_ident())
        return x

    def script(messages: list[BaseMessage], tools: Any) -> AIMessage:
        if messages[-1].type == "tool":
            return AIMessage("done")
        return AIMessage("", tool_calls=[{"name": "where", "args": {"x": 1}, "id": "c1"}])

    agent = create_agent(ScriptedChatModel(script), tools=[where])

    async def main() -> int:
        out = await agent.ainvoke({"messages": [("user", "go")]})
        assert out["messages"][-1].text == "done"
        return threading.get_ident()

    loop_thread = asyncio.run(main())
    assert threads and threads[0] != loop_thread


def test_before_run_writes_are_unchanged() -> None:
    agent = create_agent(ScriptedChatModel(["hi"]))
    writes = [ev["payload"]["result"] for ev in agent.stream(
        {"messages": [("user", "go")]}, stream_mode="debug")
        if ev["type"] == "task_result" and ev["payload"]["name"] == "before_run"]
    # context_tokens starts each run at 0, as Haystack's (issue 16)
    assert writes == [{"step_count": None, "token_usage": None, "tool_call_counts": None,
                       "exit_reason": None, "context_tokens": 0, "messages": []}]


# -- message constructors -------------------------------------------------------------------

_CALL = {"name": "bump", "args": {"x": 1}, "id": "c1", "type": "tool_call"}
CONSTRUCTED: list[tuple[type[BaseMessage], dict[str, Any]]] = [
    (AIMessage, {"content": ""}),
    (AIMessage, {"content": "hi", "id": "a", "name": None}),
    (AIMessage, {"content": "", "tool_calls": [_CALL]}),
    (AIMessage, {"content": "", "tool_calls": [{"id": "c", "args": {}, "name": "n"}]}),
    (AIMessage, {"content": "", "tool_calls": [{"name": "n", "args": {1: 2}, "id": "c"}]}),
    (AIMessage, {"content": "", "tool_calls": [{"name": "n", "args": {"a": 2}, "id": None}]}),
    (AIMessage, {"content": "", "tool_calls": [{"name": "n", "args": {}, "id": "c", "type": "x"}]}),
    (AIMessage, {"content": "", "tool_calls": [{"name": "n", "args": {}, "id": "c", "more": 1}]}),
    (AIMessage, {"content": "", "tool_calls": None}),
    (AIMessage, {"content": "", "tool_calls": ({"name": "n", "args": {}, "id": "c"},)}),
    (AIMessage, {"content": "", "invalid_tool_calls": []}),
    (AIMessage, {"content": "", "invalid_tool_calls": [
        {"name": "n", "args": "{", "id": "c", "error": "bad"}]}),
    (AIMessage, {"content": "", "usage_metadata": {"input_tokens": 1, "output_tokens": 1,
                                                   "total_tokens": 2}}),
    (AIMessage, {"content": "", "reasoning_content": "r", "refusal": None, "name": "bob",
                 "additional_kwargs": {"a": [1]}, "response_metadata": {"finish_reason": "s"}}),
    (AIMessage, {"content": "", "additional_kwargs": None}),
    (AIMessage, {"content": "", "response_metadata": {1: 2}}),
    (AIMessage, {"content": 5}),
    (AIMessage, {"content": [{"type": "text", "text": "x"}]}),
    (AIMessage, {"content": "", "foo": 1}),
    (AIMessage, {"content": "", "id": 3}),
    (AIMessage, {"content": "", "type": "ai"}),
    (ToolMessage, {"content": "3", "tool_call_id": "c"}),
    (ToolMessage, {"content": "3", "tool_call_id": "c", "status": "error", "name": None,
                   "artifact": [1]}),
    (ToolMessage, {"content": "3", "tool_call_id": "c", "status": "bad"}),
    (ToolMessage, {"content": "3"}),
    (ToolMessage, {"content": "3", "tool_call_id": 4}),
    (HumanMessage, {"content": "go"}),
    (HumanMessage, {"content": "go", "id": "h", "name": "u", "additional_kwargs": {}}),
    (SystemMessage, {"content": "s", "id": "system_prompt"}),
    (SystemMessage, {"content": "s", "name": 1}),
    (AIMessageChunk, {"content": "tok", "id": "m"}),
    (AIMessageChunk, {"content": "", "id": "m", "reasoning_content": "r"}),
    (AIMessageChunk, {"content": "", "refusal": "no", "name": "n",
                      "additional_kwargs": {"a": 1}, "response_metadata": {"f": "s"}}),
    (AIMessageChunk, {"content": "", "tool_call_chunks": [
        {"name": "f", "id": "c", "args": "{", "index": 0}]}),
    (AIMessageChunk, {"content": "", "tool_calls": [_CALL]}),
    (AIMessageChunk, {"content": "", "usage_metadata": {"input_tokens": 1,
                                                        "output_tokens": 1, "total_tokens": 2}}),
    (AIMessageChunk, {"content": "", "type": "AIMessageChunk"}),
    (AIMessageChunk, {"content": "", "type": "ai"}),
    (AIMessageChunk, {"content": [{"type": "text", "text": "x"}]}),
    (AIMessageChunk, {"content": "x", "id": 3}),
]


def _validated(cls: type[BaseMessage], kwargs: dict[str, Any]) -> Any:
    """What pydantic's own validation builds (no fast constructor)."""
    message = cls.__new__(cls)
    try:
        BaseModel.__init__(message, **kwargs)
    except ValidationError as exc:
        return ("error", str(exc))
    return message


def _built(cls: type[BaseMessage], kwargs: dict[str, Any]) -> Any:
    try:
        return cls(**kwargs)
    except ValidationError as exc:
        return ("error", str(exc))


@pytest.mark.parametrize(("cls", "kwargs"), CONSTRUCTED, ids=range(len(CONSTRUCTED)))
def test_message_constructors_build_what_pydantic_validation_builds(
        cls: type[BaseMessage], kwargs: dict[str, Any]) -> None:
    fast, slow = _built(cls, dict(kwargs)), _validated(cls, dict(kwargs))
    if isinstance(slow, tuple):
        assert fast == slow
        return
    assert list(fast.__dict__.items()) == list(slow.__dict__.items())
    assert [list(c) for c in fast.__dict__.get("tool_calls", [])] == [
        list(c) for c in slow.__dict__.get("tool_calls", [])]  # key order too
    assert fast.model_fields_set == slow.model_fields_set
    assert fast.__pydantic_extra__ == slow.__pydantic_extra__
    assert fast.__pydantic_private__ == slow.__pydantic_private__
    assert repr(fast) == repr(slow) and fast.model_dump() == slow.model_dump()
    for given, made in zip(kwargs.get("tool_calls") or [], getattr(fast, "tool_calls", []),
                           strict=False):
        assert made is not given and made["args"] is not given["args"]  # copies, as pydantic


def test_construct_unchecked_matches_model_construct() -> None:
    cases: list[tuple[type[BaseMessage], dict[str, Any]]] = [
        (AIMessage, {"content": "x", "id": "1", "tool_calls": []}),
        (ToolMessage, {"content": "r", "tool_call_id": "c", "name": "t"}),
        (HumanMessage, {"content": "h"}), (AIMessageChunk, {"content": ""})]
    for cls, values in cases:
        fast = construct_unchecked(cls, **values)
        slow = cls.model_construct(**values)
        assert list(fast.__dict__.items()) == list(slow.__dict__.items())
        assert fast.model_fields_set == slow.model_fields_set
    odd = construct_unchecked(HumanMessage, content="h", nonsense=1)
    assert "nonsense" not in odd.__dict__ and list(odd.__dict__) == list(HumanMessage.model_fields)


def test_flat_tool_arguments_make_the_json_round_trip() -> None:
    rng = random.Random(3)
    values: list[Any] = ["", "a", "é\u2028\n\"\\", "\x00\x1f", 0, -1, 10**30, True, False, None,
                        1.5, -0.0, 1e300, 0.1 + 0.2, float("nan"), [1], {"a": 1}, (1,)]
    made = 0
    for _ in range(2000):
        args = {rng.choice(["x", "é", 'a"b', "k\n"]) + str(rng.randint(0, 3)): rng.choice(values)
                for _ in range(rng.randint(0, 4))}
        if rng.random() < 0.05:
            args[3] = 1  # type: ignore[index]  # a key json writes as "3"
        flat = _flat_json(args)
        raw = json.dumps(args, ensure_ascii=False)
        if flat is None:
            continue
        made += 1
        assert flat[0] == raw and flat[1] is not args
        assert json.dumps(flat[1]) == json.dumps(json.loads(raw))  # nan-safe equality
    assert made > 500


# -- the model and tools nodes ---------------------------------------------------------------


def _script_with_ids(messages: list[BaseMessage], tools: Any) -> AIMessage:
    done = sum(m.type == "tool" for m in messages)
    if done >= 2:
        return AIMessage("the answer", id=f"a{len(messages)}")
    return AIMessage("", id=f"a{len(messages)}", tool_calls=[
        {"name": "bump", "args": {"x": done}, "id": f"call_{done}"}])


@tool
def bump(x: int) -> int:
    """Add one."""
    return x + 1


def _normalised(events: list[Any]) -> list[Any]:
    def plain(value: Any) -> Any:
        if isinstance(value, BaseMessage):
            data = value.model_dump()
            if isinstance(value, ToolMessage):
                data.pop("id")  # a fresh uuid per run
            return data
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [plain(v) for v in value]
        return value

    return plain(events)


def test_model_and_tools_nodes_write_what_the_general_steps_write(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def run() -> list[Any]:
        agent = create_agent(ScriptedChatModel(_script_with_ids), tools=[bump])
        return _normalised(list(agent.stream({"messages": [HumanMessage("go", id="h")]},
                                             stream_mode=["updates", "values"])))

    fast = run()
    from threadloom.agent.model_step import ModelStep
    from threadloom.agent.tool_step import ToolStep

    async def general_model(self: Any, state: Any, opts: Any = None) -> Any:
        return await self(self.nodes, state, opts or run_options())

    async def general_tools(self: Any, state: Any, opts: Any = None) -> Any:
        return await self(self.nodes, state, opts or run_options())

    monkeypatch.setattr(ModelStep, "run", general_model)
    monkeypatch.setattr(ToolStep, "run", general_tools)
    general = run()
    assert fast == general
    assert any("tools" in str(event) for event in fast)


@pytest.mark.parametrize("returned", ["text", "command", "error"])
def test_the_tools_node_shortcut_matches_the_general_step(returned: str) -> None:
    @tool
    def act(x: int) -> Any:
        """Act."""
        if returned == "command":
            return Command(update={"exit_reason": None})
        if returned == "error":
            raise RuntimeError("boom")
        return x

    agent = create_agent(ScriptedChatModel(["unused"]), tools=[act])
    step = agent.agent_nodes.tool_step
    ai = AIMessage("", id="a1", tool_calls=[{"name": "act", "args": {"x": 2}, "id": "c1"}])
    state = {"messages": [HumanMessage("go", id="h"), ai]}

    async def both() -> tuple[Any, Any]:
        return await step.run(state, NO_OPTIONS), await step(step.nodes, state, NO_OPTIONS)

    fast, general = asyncio.run(both())
    assert _normalised([fast]) == _normalised([general])


def test_a_run_without_options_gets_the_default_options() -> None:
    agent = create_agent(ScriptedChatModel(["hi"]))
    given = {"messages": [("user", "go")]}
    input, options = agent._prepare(given, {})
    assert input == given and input is not given
    assert options == RunOptions(user_context=None, trace=options.trace)
    _, with_context = agent._prepare(given, {"context": "ctx"})
    assert with_context.user_context == "ctx"
    _, explicit_none = agent._prepare(given, {"tools": None})  # the general path
    assert explicit_none == options


def test_an_inline_sync_tool_runs_as_arun_validated_runs_it() -> None:
    @tool
    def echo(x: int, call_id: Annotated[str, InjectedToolCallId]) -> str:
        """Echo."""
        return f"{x}:{call_id}"

    validated = echo.parse_args({"x": 3})
    inline = echo.run_inline(validated, tool_call_id="c9")
    awaited = asyncio.run(echo.arun_validated(validated, tool_call_id="c9", inline=True))
    assert inline == awaited == "3:c9"

    async def later(x: int) -> int:
        return x

    with pytest.raises(TypeError, match="async-only"):
        tool(later).run_inline(validated)


def test_a_plain_tool_result_is_the_message_construct_unchecked_builds() -> None:
    node = ToolNode([bump])
    made = node._to_result(3, "c1", "bump")
    expected = construct_unchecked(ToolMessage, content="3", tool_call_id="c1", name="bump")
    assert isinstance(made, ToolMessage)
    assert list(made.__dict__.items()) == list(expected.__dict__.items())
    assert made.model_fields_set == expected.model_fields_set
    assert made == ToolMessage(content="3", tool_call_id="c1", name="bump")


def test_scripted_model_without_call_records_counts_calls_and_keeps_none() -> None:
    from threadloom import HumanMessage, ScriptedChatModel

    recorded = ScriptedChatModel(["one", "two"])
    bare = ScriptedChatModel(["one", "two"], record_calls=False)
    for model in (recorded, bare):
        assert model.invoke([HumanMessage("hi")]).text == "one"
        assert model.invoke([HumanMessage("again")]).text == "two"
        assert model.call_count == 2
    assert [c["messages"][-1].text for c in recorded.calls] == ["hi", "again"]
    assert bare.calls == []
    assert repr(bare).endswith("calls=2)")


def test_sync_invoke_runs_the_sync_tool_calls_of_one_reply_concurrently() -> None:
    # Three calls in one reply each wait for the other two: only concurrent calls pass.
    import threading

    from threadloom import AIMessage, ScriptedChatModel, create_agent, tool

    barrier = threading.Barrier(3, timeout=5)

    @tool
    def meet(n: int) -> str:
        """Wait until all three calls have started."""
        barrier.wait()
        return f"met {n}"

    calls = [{"name": "meet", "args": {"n": i}, "id": f"c{i}", "type": "tool_call"}
             for i in range(3)]
    model = ScriptedChatModel([AIMessage(content="", tool_calls=calls), "done"])
    agent = create_agent(model, tools=[meet])
    out = agent.invoke({"messages": [("user", "go")]})
    assert [m.text for m in out["messages"] if m.type == "tool"] == ["met 0", "met 1", "met 2"]
    assert out["messages"][-1].text == "done"


# -- second pass: plain tool arguments, model reply shortcuts -------------------------------


@tool
def _plain_tool(n: int, s: str, flag: bool, f: float) -> str:
    """A tool whose arguments all qualify for Tool.plain_kwargs."""
    return f"{n!r}|{s!r}|{flag!r}|{f!r}"


class _Text(str):
    pass


PLAIN_ARGS = [
    {"n": 1, "s": "a", "flag": True, "f": 1.5},
    {"n": 10**30, "s": "\ud800", "flag": False, "f": float("nan")},
    {"n": True, "s": "a", "flag": True, "f": 1.5},  # bool for int: pydantic converts
    {"n": 1, "s": "a", "flag": True, "f": 2},  # int for float: pydantic converts
    {"n": 1.0, "s": "a", "flag": True, "f": 2.0},
    {"n": 1, "s": _Text("a"), "flag": True, "f": 2.0},  # a str subclass becomes a str
    {"n": "1", "s": "a", "flag": "true", "f": "2"},
    {"n": 1, "s": "a", "flag": True, "f": 2.0, "extra": 1},  # ignored by the model
    {"n": 1, "s": "a", "flag": True},  # missing: a validation error
    {"n": None, "s": "a", "flag": True, "f": 2.0},
    {"s": "a", "flag": True, "f": 2.0, "x": 1},  # as many keys, one unknown
]


@pytest.mark.parametrize("args", PLAIN_ARGS, ids=range(len(PLAIN_ARGS)))
def test_plain_tool_kwargs_are_the_validated_kwargs(args: dict[str, Any]) -> None:
    fast = _plain_tool.plain_kwargs(args)
    try:
        validated = _plain_tool.parse_args(args)
    except Exception:  # noqa: BLE001 - the general path refuses: the shortcut must too
        assert fast is None
        return
    general = _plain_tool._call_kwargs(validated, None, "c1", {}, None)
    if fast is not None:
        assert fast == general
        assert list(fast) == list(general)
        assert [type(v) for v in fast.values()] == [type(v) for v in general.values()]


def _not_plain_tools() -> list[Any]:
    class Args(BaseModel):
        x: int

    def defaulted(x: int = 1) -> int:
        """D."""
        return x

    def bounded(x: Annotated[int, Field(gt=0)]) -> int:
        """B."""
        return x

    def injected(x: int, state: Annotated[Any, InjectedState]) -> int:
        """I."""
        return x

    def listed(x: list[int]) -> int:
        """L."""
        return 0

    def optional(x: int | None) -> int:
        """O."""
        return 0

    def renamed(_x: int) -> int:
        """R."""
        return _x

    def given(x: int) -> int:
        """G."""
        return x

    return [tool(defaulted), tool(bounded), tool(injected), tool(listed), tool(optional),
            tool(renamed), tool(args_schema=Args)(given)]


def test_tools_outside_the_plain_shape_take_the_validated_path() -> None:
    for made in _not_plain_tools():
        assert made.plain_kwargs({"x": 1}) is None, made.name
        assert made.plain_kwargs({"_x": 1}) is None, made.name
    described = tool(_plain_tool.func)  # descriptions from the docstring keep it plain
    assert described.plain_kwargs(PLAIN_ARGS[0]) is not None
    swapped = tool(_plain_tool.func)
    swapped.args_model = _not_plain_tools()[-1].args_model  # a model set after the fact
    assert swapped.plain_kwargs(PLAIN_ARGS[0]) is None


@pytest.mark.parametrize("args", PLAIN_ARGS[:6], ids=range(6))
@pytest.mark.parametrize("raises", [False, True])
def test_a_run_with_plain_tool_arguments_matches_the_validated_run(
        args: dict[str, Any], raises: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    from threadloom.tools import Tool

    @tool
    def act(n: int, s: str, flag: bool, f: float) -> str:
        """Act."""
        if raises:
            raise ValueError(f"bad {n!r}")
        return f"{n!r}|{s!r}|{flag!r}|{f!r}"

    def script(messages: list[BaseMessage], tools: Any = None) -> AIMessage:
        if messages[-1].type == "tool":
            return AIMessage("done", id="end")
        return AIMessage("", id="a1", tool_calls=[{"name": "act", "args": dict(args),
                                                   "id": "c1"}])

    def run() -> list[Any]:
        agent = create_agent(ScriptedChatModel(script), tools=[act])
        out = agent.invoke({"messages": [HumanMessage("go", id="h")]})
        return _normalised([out])

    fast = run()
    monkeypatch.setattr(Tool, "plain_kwargs", lambda self, args: None)
    assert fast == run()



@pytest.mark.parametrize("reply", REPLIES, ids=range(len(REPLIES)))
def test_an_async_reply_is_the_sync_reply(reply: AIMessage) -> None:
    msgs: list[BaseMessage] = [HumanMessage("hello there"), AIMessage("x" * 9)]
    sync = ScriptedChatModel([reply], name="n").invoke(msgs)
    made = asyncio.run(ScriptedChatModel([reply], name="n").ainvoke(msgs))
    a, b = sync.model_dump(), made.model_dump()
    if not reply.id:
        assert a.pop("id").startswith("msg_") and b.pop("id").startswith("msg_")
    assert a == b and made.model_fields_set == sync.model_fields_set
    assert list(made.__dict__) == list(sync.__dict__)


@pytest.mark.parametrize("content", ["", "abc", "abcde", [{"type": "text", "text": "xy"}],
                                     [{"type": "image_url", "image_url": {}}]])
@pytest.mark.parametrize("raws", [[], ["{}"], ['{"x": 1}', '{"y": "zz"}']])
def test_the_usage_estimate_counts_the_joined_text(content: Any, raws: list[str]) -> None:
    from threadloom.models.scripted import _estimate_tokens, _estimate_usage, _text

    msgs: list[BaseMessage] = [HumanMessage("hello"), HumanMessage([{"type": "text",
                                                                     "text": "abc"}])]
    usage = _estimate_usage(msgs, content, raws)
    assert usage["output_tokens"] == _estimate_tokens(_text(content) + "".join(raws))
    assert usage["input_tokens"] == sum(_estimate_tokens(m.text) for m in msgs)
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
