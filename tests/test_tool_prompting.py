"""JSON-schema tool prompting: request building and reply parsing, without a model."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from threadloom.models.tool_prompting import (
    FINAL_ANSWER_KEY,
    SCHEMA_NAME,
    build_request,
    parse_reply,
)

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
ADD = {
    "name": "add",  # a bare function dict is accepted too
    "description": "Add two integers.",
    "parameters": {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    },
}
NO_ARGS = {"type": "function", "function": {"name": "now"}}
TOOLS = [WEATHER, ADD]

HISTORY = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Weather in Paris?"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "Sunny, 21 C"},
]


def branches(request: dict) -> list[dict]:
    fmt = request["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["name"] == SCHEMA_NAME
    return fmt["json_schema"]["schema"]["anyOf"]


# -- build_request ---------------------------------------------------------------------------
def test_schema_has_one_branch_per_tool_then_final_answer():
    found = branches(build_request([{"role": "user", "content": "hi"}], TOOLS + [NO_ARGS]))
    assert len(found) == 4
    names = [b["properties"]["name"]["const"] for b in found[:3]]
    assert names == ["get_weather", "add", "now"]
    assert found[0]["properties"]["arguments"] == WEATHER["function"]["parameters"]
    assert found[1]["properties"]["arguments"] == ADD["parameters"]
    assert found[2]["properties"]["arguments"]["type"] == "object"
    for branch in found[:3]:
        assert branch["required"] == ["name", "arguments"]
        assert branch["additionalProperties"] is False
    assert found[3]["properties"] == {FINAL_ANSWER_KEY: {"type": "string"}}
    assert found[3]["required"] == [FINAL_ANSWER_KEY]


def test_history_is_rewritten_for_a_plain_template():
    out = build_request(HISTORY, TOOLS)["messages"]
    roles = [m["role"] for m in out]
    assert roles == ["system", "user", "assistant", "user"]
    assert all(isinstance(m["content"], str) for m in out)
    assert not any("tool_calls" in m for m in out)
    assert out[0]["content"].startswith("Be brief.")  # instructions merged, user text kept
    assert "get_weather" in out[0]["content"] and "add" in out[0]["content"]
    call = json.loads(out[2]["content"])
    assert call == {"name": "get_weather", "arguments": {"city": "Paris"}}
    assert "get_weather" in out[3]["content"] and "Sunny, 21 C" in out[3]["content"]


def test_the_input_messages_are_not_mutated():
    before = json.dumps(HISTORY, sort_keys=True)
    build_request(HISTORY, TOOLS)
    assert json.dumps(HISTORY, sort_keys=True) == before


def test_instructions_are_inserted_when_there_is_no_system_message():
    out = build_request([{"role": "user", "content": "hi"}], TOOLS)["messages"]
    assert [m["role"] for m in out] == ["system", "user"]
    assert out[1] == {"role": "user", "content": "hi"}


def test_developer_role_text_parts_and_images():
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    messages = [
        {"role": "developer", "content": [{"type": "text", "text": "Rules."}]},
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        {"role": "user", "content": [{"type": "text", "text": "see"}, image]},
    ]
    out = build_request(messages, TOOLS)["messages"]
    assert out[0]["role"] == "system" and out[0]["content"].startswith("Rules.")
    assert out[1]["content"] == "ab"
    assert out[2]["content"][1] == image  # non-text parts are left for the server


def test_tool_result_without_a_matching_call_still_renders():
    result = [{"type": "text", "text": "42"}]
    messages = [{"role": "user", "content": "x"},
                {"role": "tool", "tool_call_id": "nope", "content": result}]
    out = build_request(messages, TOOLS)["messages"]
    assert out[-1]["role"] == "user" and "42" in out[-1]["content"]


def test_assistant_call_with_text_and_unparseable_arguments():
    messages = [{"role": "user", "content": "x"}, {
        "role": "assistant", "content": "Let me check.",
        "tool_calls": [{"id": "c", "type": "function",
                        "function": {"name": "add", "arguments": "{broken"}}]}]
    content = build_request(messages, TOOLS)["messages"][-1]["content"]
    text, call = content.split("\n", 1)
    assert text == "Let me check."
    assert json.loads(call) == {"name": "add", "arguments": "{broken"}


def test_max_tool_rounds_leaves_only_the_final_answer():
    assert len(branches(build_request(HISTORY, TOOLS, max_tool_rounds=1))) == 1
    assert len(branches(build_request(HISTORY, TOOLS, max_tool_rounds=2))) == 3
    assert len(branches(build_request(HISTORY, TOOLS))) == 3
    again = HISTORY + [{"role": "assistant", "content": "Sunny."},
                       {"role": "user", "content": "And Rome?"}]
    assert len(branches(build_request(again, TOOLS, max_tool_rounds=1))) == 3


@pytest.mark.parametrize("tools, match", [
    ([{"type": "function", "function": {"description": "no name"}}], r"tools\[0\] has no"),
    ([WEATHER, WEATHER], r"tools\[1\]: duplicate tool name 'get_weather'"),
    (["get_weather"], r"tools\[0\] has no"),
])
def test_malformed_tools_raise_a_clear_error(tools, match):
    with pytest.raises(ValueError, match=match):
        build_request([{"role": "user", "content": "x"}], tools)
    with pytest.raises(ValueError, match=match):
        parse_reply("{}", tools)


# -- parse_reply -----------------------------------------------------------------------------
def test_a_tool_call_reply_becomes_an_openai_tool_call():
    reply = parse_reply('{\n "name": "add", "arguments": {"a": 2, "b": 3}\n}', TOOLS)
    assert reply["role"] == "assistant" and reply["content"] == ""
    [call] = reply["tool_calls"]
    assert re.fullmatch(r"call_[0-9a-f]{24}", call["id"])
    assert call["type"] == "function"
    assert call["function"]["name"] == "add"
    assert json.loads(call["function"]["arguments"]) == {"a": 2, "b": 3}


def test_each_call_gets_a_fresh_id():
    text = '{"name": "now", "arguments": {}}'
    first = parse_reply(text, [NO_ARGS])["tool_calls"][0]["id"]
    assert first != parse_reply(text, [NO_ARGS])["tool_calls"][0]["id"]


@pytest.mark.parametrize("arguments, expected", [
    ("null", {}), ('"{\\"city\\": \\"Rome\\"}"', {"city": "Rome"}),
])
def test_null_or_string_arguments(arguments, expected):
    reply = parse_reply(f'{{"name": "get_weather", "arguments": {arguments}}}', TOOLS)
    assert json.loads(reply["tool_calls"][0]["function"]["arguments"]) == expected


@pytest.mark.parametrize("text, content", [
    ('{"final_answer": "It is sunny."}', "It is sunny."),
    ('{"final_answer": "cut off here', "cut off here"),  # max_tokens hit mid-answer
    ('{"final_answer": "esc\\u00', "esc"),
    ("plain text, not JSON", "plain text, not JSON"),
    ('{"name": "delete_everything", "arguments": {}}',  # unknown tool: never a call
     '{"name": "delete_everything", "arguments": {}}'),
    ("[1, 2]", "[1, 2]"),
    ('{"final_answer": 3}', '{"final_answer": 3}'),
    ('{"name": "add", "arguments": {"a": 1', '{"name": "add", "arguments": {"a": 1'),
    ("", ""),
    (None, ""),
])
def test_other_replies_become_text(text, content):
    reply = parse_reply(text, TOOLS)
    assert reply == {"role": "assistant", "content": content, "tool_calls": []}


@given(st.text())
def test_parse_reply_never_raises_on_model_output(text):
    reply = parse_reply(text, TOOLS)
    assert reply["role"] == "assistant"
    assert isinstance(reply["content"], str)
    for call in reply["tool_calls"]:
        assert call["function"]["name"] in {"get_weather", "add"}
        json.loads(call["function"]["arguments"])


def test_a_parsed_call_renders_back_into_the_next_request():
    reply = parse_reply('{"name": "get_weather", "arguments": {"city": "Oslo"}}', TOOLS)
    call_id = reply["tool_calls"][0]["id"]
    history = [{"role": "user", "content": "Oslo?"}, reply,
               {"role": "tool", "tool_call_id": call_id, "content": "Snow"}]
    out = build_request(history, TOOLS)["messages"]
    assert json.loads(out[2]["content"])["arguments"] == {"city": "Oslo"}
    assert out[3]["role"] == "user" and "get_weather" in out[3]["content"]
