"""The agent's live State (handlers, changes, to/from dict, reserved keys) and hooks."""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any, TypedDict

import pytest

from threadloom.agent.hooks import HOOK_POINTS, hook, normalize_hooks, run_hooks
from threadloom.agent.state import RESERVED_KEYS, State, validate_user_schema
from threadloom.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from threadloom.reducers import add_messages, merge_lists, replace_values

SCHEMA = {"docs": {"type": list[str]}, "count": {"type": int}, "note": {"type": str}}


def test_default_handlers() -> None:
    state = State(SCHEMA)
    assert state.schema["docs"]["handler"] is merge_lists
    assert state.schema["count"]["handler"] is replace_values
    assert state.schema["messages"]["handler"] is merge_lists  # as Haystack's State
    state.set("docs", ["a"])
    state.set("docs", ["b", "c"])
    state.set("docs", "d")
    state.set("count", 1)
    state.set("count", 2)
    assert state.get("docs") == ["a", "b", "c", "d"]
    assert state.get("count") == 2


def test_handler_override_and_custom_handler() -> None:
    state = State({"docs": {"type": list},
                   "total": {"type": int, "handler": lambda a, b: (a or 0) + b}})
    state.set("docs", ["a", "b"])
    state.set("docs", ["z"], handler_override=replace_values)
    state.set("total", 3)
    state.set("total", 4)
    assert state.get("docs") == ["z"]
    assert state.get("total") == 7


def test_messages_append_in_a_state_of_your_own() -> None:
    # Haystack's State: ``messages`` is a list like any other (merge_lists appends); an
    # add_messages handler given in the schema merges by id, as the agent's hooks see it
    first = HumanMessage("hi", id="h1")
    state = State({}, {"messages": [first]})
    state.set("messages", [AIMessage("hello")])
    state.set("messages", [first])
    assert [m.text for m in state.get("messages")] == ["hi", "hello", "hi"]
    by_id = State({"messages": {"type": list, "handler": add_messages}}, {"messages": [first]})
    by_id.set("messages", [("assistant", "hello")])
    by_id.set("messages", [HumanMessage("hi again", id="h1")])  # same id replaces
    msgs = by_id.get("messages")
    assert [m.text for m in msgs] == ["hi again", "hello"]
    assert isinstance(msgs[1], AIMessage) and msgs[1].id


def test_get_has_data_and_unknown_keys() -> None:
    state = State(SCHEMA, {"count": 5})
    assert state.has("count") and not state.has("note")
    assert state.get("note") is None and state.get("note", "x") == "x"
    assert state.data == {"count": 5}
    with pytest.raises(ValueError, match="nope"):
        state.set("nope", 1)
    # as Haystack's State: initial data is taken as given (a key outside the schema is
    # kept and readable); only set() checks keys
    loose = State(SCHEMA, {"nope": 1})
    assert loose.get("nope") == 1
    with pytest.raises(ValueError, match="nope"):
        loose.set("nope", 2)


def test_changes_record_sets_since_creation_only() -> None:
    state = State(SCHEMA, {"docs": ["a"], "count": 1})
    assert state.changes() == {}
    state.set("note", "n")
    state.set("docs", ["b"])
    assert state.changes() == {"note": "n", "docs": ["a", "b"]}
    assert list(state.changes()) == ["note", "docs"]


@pytest.mark.parametrize(
    "schema",
    [
        {"x": int},
        {"x": {"handler": merge_lists}},
        {"x": {"type": int, "handler": 3}},
        {"x": {"type": int, "reducer": merge_lists}},
        {"": {"type": int}},
    ],
)
def test_malformed_schema(schema: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        State(schema)


def test_to_dict_writes_haystacks_form_and_reads_it_back(
        caplog: pytest.LogCaptureFixture) -> None:
    when = dt.datetime(2024, 5, 1, 12, 0, tzinfo=dt.UTC)
    state = State({**SCHEMA, "when": {"type": dt.datetime}, "pair": {"type": tuple}},
                  {"docs": ["a"], "count": 2, "when": when, "pair": (1, "x"),
                   "messages": [HumanMessage("hi", id="h1")]})
    with caplog.at_level("WARNING"):
        blob = state.to_dict()
    assert blob["schema"]["docs"] == {"type": "list[str]", "handler": HS + "merge_lists"}
    assert blob["schema"]["when"] == {"type": "datetime.datetime",
                                      "handler": HS + "replace_values"}
    assert blob["schema"]["messages"] == {"type": f"list[{HS_MESSAGE}]",
                                          "handler": HS + "merge_lists"}
    data = blob["data"]
    assert data["serialized_data"] == {
        "docs": ["a"], "count": 2, "pair": [1, "x"],
        "messages": [{"role": "user", "meta": {}, "name": None, "content": [{"text": "hi"}]}]}
    assert data["serialization_schema"]["properties"]["pair"] == {
        "type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}],
        "minItems": 2, "maxItems": 2}
    # as Haystack: a value its form cannot hold is left out, with a warning naming it
    assert "Failed to serialize the 'when' field of the agent's State data" in caplog.text
    back = State.from_dict(blob)
    assert back.data == {"docs": ["a"], "count": 2, "pair": (1, "x"),
                         "messages": [HumanMessage("hi")]}  # Haystack's form has no ids
    assert back.schema["docs"]["handler"] is merge_lists
    assert back.schema["messages"]["type"] == list[BaseMessage]
    back.set("docs", ["b"])
    assert back.get("docs") == ["a", "b"]


def test_tool_messages_and_calls_in_haystacks_form() -> None:
    ai = AIMessage("let me look", tool_calls=[{"name": "weather", "args": {"city": "Oslo"},
                                               "id": "c1"}], response_metadata={"m": 1})
    answer = ToolMessage("sunny", tool_call_id="c1", name="weather")
    blob = State({}, {"messages": [ai, answer]}).to_dict()
    call = {"tool_name": "weather", "arguments": {"city": "Oslo"}, "id": "c1", "extra": None}
    assert blob["data"]["serialized_data"]["messages"] == [
        {"role": "assistant", "meta": {"m": 1}, "name": None,
         "content": [{"text": "let me look"}, {"tool_call": call}]},
        {"role": "tool", "meta": {}, "name": None, "content": [{"tool_call_result": {
            "result": "sunny", "origin": {**call, "arguments": {}}, "error": False}}]}]
    again = State.from_dict(blob).data["messages"]
    assert again[0].tool_calls[0]["args"] == {"city": "Oslo"}
    assert again[1].tool_call_id == "c1" and again[1].text == "sunny"


def test_from_dict_never_resolves_custom_handlers() -> None:
    def concat(a: Any, b: Any) -> Any:
        return (a or "") + b

    state = State({"text": {"type": str, "handler": concat}}, {"text": "a"})
    blob = state.to_dict()
    assert blob["schema"]["text"]["handler"].endswith("concat")
    blob["schema"]["text"]["handler"] = "os.system"
    with pytest.raises(ValueError, match="schema="):
        State.from_dict(blob)
    back = State.from_dict(blob, schema={"text": {"type": str, "handler": concat}})
    back.set("text", "b")
    assert back.get("text") == "ab"


def concat(a: Any, b: Any) -> Any:
    """A module-level handler (importable by path)."""
    return (a or "") + b


def test_from_dict_imports_a_custom_handler_only_from_allowed_modules() -> None:
    from threadloom.errors import SecurityError

    blob = State({"text": {"type": str, "handler": concat}}, {"text": "a"}).to_dict()
    assert blob["schema"]["text"]["handler"] == f"{__name__}.concat"
    with pytest.raises(ValueError, match="allowed_modules"):
        State.from_dict(blob)
    back = State.from_dict(blob, allowed_modules=[__name__])
    assert back.schema["text"]["handler"] is concat and back.data == {"text": "a"}
    blob["schema"]["text"]["handler"] = "os.system"
    with pytest.raises(SecurityError, match="not allowed"):
        State.from_dict(blob, allowed_modules=[__name__])


HS = "haystack.components.agents.state.state_utils."
HS_MESSAGE = "haystack.dataclasses.chat_message.ChatMessage"


def test_from_dict_reads_haystacks_format() -> None:
    call = {"tool_name": "weather", "arguments": {"city": "Oslo"}, "id": "c1"}
    blob = {
        "schema": {
            "count": {"type": "int", "handler": HS + "replace_values"},
            "messages": {"type": f"typing.List[{HS_MESSAGE}]", "handler": HS + "merge_lists"},
            "info": {"type": "dict[str, int]", "handler": HS + "replace_values"},
        },
        "data": {
            "serialization_schema": {"type": "object", "properties": {
                "count": {"type": "integer"},
                "messages": {"type": "array", "items": {"type": HS_MESSAGE}},
                "info": {"type": "object", "properties": {"role": {"type": "string"}}},
            }},
            "serialized_data": {
                "count": 2,
                "messages": [
                    {"role": "user", "meta": {}, "name": None, "content": [{"text": "hi"}]},
                    {"role": "assistant", "meta": {"model": "m"}, "name": None,
                     "content": [{"text": "let me look"}, {"tool_call": call}]},
                    {"role": "tool", "meta": {}, "name": None, "content": [
                        {"tool_call_result": {"result": "sunny", "origin": call,
                                              "error": False}}]},
                ],
                "info": {"role": "user", "content": []},  # not a message: the schema says so
            },
        },
    }
    state = State.from_dict(blob)
    assert state.schema["count"] == {"type": int, "handler": replace_values}
    assert state.schema["messages"] == {"type": list[BaseMessage], "handler": merge_lists}
    assert state.schema["info"]["type"] is dict
    user, ai, result = state.data["messages"]
    assert user == HumanMessage("hi")
    assert ai.text == "let me look" and ai.meta == {"model": "m"}
    assert [(c.tool_name, c.arguments, c.id) for c in map(type(ai.tool_call), ai.tool_calls)] == [
        ("weather", {"city": "Oslo"}, "c1")]
    assert result.tool_call_result.result == "sunny" and result.tool_call_id == "c1"
    assert state.data["info"] == {"role": "user", "content": []} and state.data["count"] == 2


@pytest.mark.parametrize("key", sorted(RESERVED_KEYS))
def test_reserved_keys_refused(key: str) -> None:
    with pytest.raises(ValueError, match=repr(key)):
        validate_user_schema({"mine": {"type": int}, key: {"type": int}})


def test_reserved_keys_constant_matches_design() -> None:
    assert RESERVED_KEYS == {
        "messages", "step_count", "token_usage", "tool_call_counts", "exit_reason",
        "continue_run", "stop_run", "jump_to", "tools", "hook_context", "context_tokens",
        "structured_response", "last_message"}


def test_validate_class_schemas() -> None:
    class Base(TypedDict):
        messages: list
        step_count: int

    class Mine(Base):
        topic: str

    class Bad(TypedDict):
        exit_reason: int

    validate_user_schema({"topic": {"type": str}})
    validate_user_schema(Mine, inherited=Base.__annotations__)
    with pytest.raises(ValueError, match="'messages'"):
        validate_user_schema(Mine)
    with pytest.raises(ValueError, match="'exit_reason'"):
        validate_user_schema(Bad, inherited=Base.__annotations__)


# -- hooks -----------------------------------------------------------------------------


def test_hook_decorator_marks_functions() -> None:
    @hook
    def bare(state: State) -> None: ...

    @hook("before_llm")
    def pointed(state: State) -> None: ...

    assert normalize_hooks({"after_run": [bare]})["after_run"] == [bare]
    assert normalize_hooks([pointed])["before_llm"] == [pointed]
    with pytest.raises(ValueError, match="no hook point"):
        normalize_hooks([bare])
    with pytest.raises(ValueError, match="marked"):
        normalize_hooks({"after_llm": [pointed]})


def test_unknown_hook_point_lists_valid_ones() -> None:
    with pytest.raises(ValueError) as info:
        normalize_hooks({"before_model": [lambda s: None]})
    for point in HOOK_POINTS:
        assert point in str(info.value)
    with pytest.raises(ValueError, match="before_tool"):
        hook("before_tools")


def test_normalize_hooks_shapes() -> None:
    def a(state: State) -> None: ...

    def b(state: State) -> None: ...

    result = normalize_hooks({"before_run": a, "on_exit": [b, a]})
    assert list(result) == list(HOOK_POINTS)
    assert result["before_run"] == [a] and result["on_exit"] == [b, a]
    assert all(v == [] for k, v in result.items() if k not in ("before_run", "on_exit"))
    assert normalize_hooks(None) == {p: [] for p in HOOK_POINTS}
    with pytest.raises(TypeError):
        normalize_hooks({"before_run": [42]})
    with pytest.raises(TypeError):
        normalize_hooks("before_run")


async def test_run_hooks_in_order_sync_and_async_with_context() -> None:
    calls: list[str] = []

    def first(state: State) -> None:
        calls.append("first")
        state.set("docs", ["1"])

    async def second(state: State, context: Any) -> None:
        await asyncio.sleep(0)
        calls.append(f"second:{context['user']}")
        state.set("docs", ["2"])

    def third(state: State, context: Any = None) -> dict[str, Any]:
        calls.append("third")
        return {"count": len(state.get("docs"))}

    state = State(SCHEMA)
    hooks = normalize_hooks({"before_llm": [first, second, third]})
    await run_hooks("before_llm", hooks["before_llm"], state, {"user": "u1"})
    assert calls == ["first", "second:u1", "third"]
    assert state.get("docs") == ["1", "2"]
    assert state.changes() == {"docs": ["1", "2"], "count": 2}


async def test_run_hooks_errors_name_the_hook() -> None:
    def broken(state: State) -> None:
        raise RuntimeError("boom")

    def wrong(state: State) -> int:
        return 3

    with pytest.raises(RuntimeError, match="boom") as info:
        await run_hooks("after_tool", [broken], State(SCHEMA))
    assert any("after_tool hook" in n and "broken" in n for n in info.value.__notes__)
    with pytest.raises(TypeError, match="wrong"):
        await run_hooks("after_tool", [wrong], State(SCHEMA))


async def test_callable_objects_as_hooks() -> None:
    class Counter:
        __hash__ = None  # unhashable callables work too

        def __call__(self, state: State, context: Any) -> None:
            state.set("count", context)

    state = State(SCHEMA)
    await run_hooks("on_exit", [Counter()], state, 9)
    assert state.get("count") == 9
