"""Message types, chunk arithmetic, coercion, dumps and the OpenAI wire format (H22, H23)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from threadloom import ScriptedChatModel
from threadloom.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
    coerce_message,
    convert_to_messages,
    message_from_dict,
    message_from_openai,
    message_to_dict,
    parse_tool_args,
    to_openai_messages,
)

FIXTURES = Path(__file__).parent / "fixtures" / "providers"


def load_fixture(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def response_message(name: str) -> AIMessage:
    message = message_from_openai(load_fixture(name)["body"]["choices"][0])
    assert isinstance(message, AIMessage)
    return message


def chunk_from_delta(payload: dict[str, Any]) -> AIMessageChunk:
    """Test-side mapping of one SSE payload to a chunk (the adapter has its own)."""
    fields: dict[str, Any] = {}
    if payload.get("usage"):
        u = payload["usage"]
        fields["usage_metadata"] = {
            "input_tokens": u["prompt_tokens"],
            "output_tokens": u["completion_tokens"],
            "total_tokens": u["total_tokens"],
        }
    for choice in payload.get("choices") or []:
        delta = choice.get("delta") or {}
        fields["content"] = delta.get("content") or ""
        for key in ("reasoning_content", "refusal"):
            if delta.get(key) is not None:
                fields[key] = delta[key]
        fields["tool_call_chunks"] = [
            {
                "name": (tc.get("function") or {}).get("name"),
                "args": (tc.get("function") or {}).get("arguments"),
                "id": tc.get("id"),
                "index": tc.get("index"),
            }
            for tc in delta.get("tool_calls") or []
        ]
        if choice.get("finish_reason"):
            fields["response_metadata"] = {"finish_reason": choice["finish_reason"]}
    return AIMessageChunk(**fields)


def assemble(name: str) -> AIMessage:
    chunks = [chunk_from_delta(c) for c in load_fixture(name)["chunks"] if c != "[DONE]"]
    return sum(chunks[1:], chunks[0]).to_message()


# --- the types ---------------------------------------------------------------------------


def test_positional_content_type_tags_and_text() -> None:
    assert HumanMessage("hi").content == "hi"
    assert [m.type for m in (SystemMessage("s"), HumanMessage("h"), AIMessage("a"))] == [
        "system",
        "human",
        "ai",
    ]
    assert AIMessageChunk("x").type == "AIMessageChunk"
    assert ToolMessage("r", tool_call_id="c").type == "tool"
    assert RemoveMessage(id="x").type == "remove" and RemoveMessage("y").id == "y"
    parts = [
        {"type": "text", "text": "a"},
        {"type": "image_url", "image_url": {}},
        {"type": "text", "text": "b"},
    ]
    assert HumanMessage(parts).text == "ab"
    assert HumanMessage("plain").text == "plain"


def test_ai_message_properties_and_defaults() -> None:
    msg = AIMessage(
        "x",
        usage_metadata={"input_tokens": 1, "output_tokens": 2, "total_tokens": 3},
        response_metadata={"finish_reason": "length"},
    )
    assert msg.usage == {"input_tokens": 1, "output_tokens": 2, "total_tokens": 3}
    assert msg.finish_reason == "length"
    assert AIMessage().finish_reason is None and AIMessage().tool_calls == []
    assert ToolMessage("x", tool_call_id="c").status == "success"
    with pytest.raises(ValueError):
        ToolMessage("x", tool_call_id="c", status="broken")
    with pytest.raises(ValueError):
        ToolMessage("x")  # tool_call_id is required


def test_model_construct_works() -> None:
    msg = AIMessage.model_construct(content="fast")
    assert msg.content == "fast" and msg.tool_calls == [] and msg.id is None


# --- chunks ------------------------------------------------------------------------------


def test_chunk_addition_merges_text_reasoning_refusal_usage_and_metadata() -> None:
    a = AIMessageChunk(
        "Hel",
        id="run-1",
        reasoning_content="thi",
        usage_metadata={
            "input_tokens": 5,
            "output_tokens": 1,
            "total_tokens": 6,
            "output_token_details": {"reasoning": 1},
        },
        response_metadata={"model_name": "m"},
    )
    b = AIMessageChunk(
        "lo",
        reasoning_content="nk",
        refusal="no",
        usage_metadata={
            "input_tokens": 0,
            "output_tokens": 2,
            "total_tokens": 2,
            "output_token_details": {"reasoning": 2},
        },
        response_metadata={"finish_reason": "stop", "model_name": None},
    )
    total = a + b
    assert isinstance(total, AIMessageChunk)
    assert (total.content, total.reasoning_content, total.refusal, total.id) == (
        "Hello",
        "think",
        "no",
        "run-1",
    )
    assert total.usage_metadata == {
        "input_tokens": 5,
        "output_tokens": 3,
        "total_tokens": 8,
        "output_token_details": {"reasoning": 3},
    }
    assert total.response_metadata == {"model_name": "m", "finish_reason": "stop"}
    assert a.content == "Hel"  # operands untouched
    assert sum([a, b]) == total
    with pytest.raises(TypeError):
        a + AIMessage("x")  # type: ignore[operator]


def test_chunk_tool_call_args_merge_by_index() -> None:
    pieces = [
        AIMessageChunk(tool_call_chunks=[{"name": "f", "args": "", "id": "c0", "index": 0}]),
        AIMessageChunk(tool_call_chunks=[{"name": None, "args": '{"a":', "id": None, "index": 0}]),
        AIMessageChunk(tool_call_chunks=[{"name": "g", "args": "{}", "id": "c1", "index": 1}]),
        AIMessageChunk(tool_call_chunks=[{"name": None, "args": " 1}", "id": None, "index": 0}]),
    ]
    merged = sum(pieces[1:], pieces[0])
    assert merged.tool_call_chunks == [
        {"name": "f", "args": '{"a": 1}', "id": "c0", "index": 0},
        {"name": "g", "args": "{}", "id": "c1", "index": 1},
    ]
    final = merged.to_message()
    assert type(final) is AIMessage
    assert [(c["name"], c["args"], c["id"]) for c in final.tool_calls] == [
        ("f", {"a": 1}, "c0"),
        ("g", {}, "c1"),
    ]


def test_chunk_sum_reads_tool_calls_from_its_chunks_as_langchain_does() -> None:
    # A LangChain user sums the `messages` stream's chunks and reads `.tool_calls`.
    first = AIMessageChunk(
        tool_call_chunks=[{"name": "f", "args": '{"a":', "id": "c0", "index": 0}])
    rest = AIMessageChunk(tool_call_chunks=[{"name": None, "args": " 1}", "id": None, "index": 0}])
    partial = AIMessageChunk(content="") + first
    assert partial.tool_calls == []  # the arguments are still arriving
    assert [(c["name"], c["id"]) for c in partial.invalid_tool_calls] == [("f", "c0")]
    done = partial + rest
    assert done.tool_calls == [{"name": "f", "args": {"a": 1}, "id": "c0", "type": "tool_call"}]
    assert done.invalid_tool_calls == []
    assert done.tool_calls == done.to_message().tool_calls
    # chunks made with parsed calls and no call chunks keep them
    whole = AIMessageChunk(tool_calls=[{"name": "g", "args": {}, "id": "c1"}]) + AIMessageChunk()
    assert [c["name"] for c in whole.tool_calls] == ["g"]


def test_streamed_chunks_summed_give_the_invoked_reply_calls() -> None:
    script = [{"content": "", "tool_calls": [{"name": "f", "args": {"a": [1, 2]}},
                                            {"name": "g", "args": {}}]}]
    total = sum(ScriptedChatModel(script).stream([("user", "hi")]), AIMessageChunk())
    expected = ScriptedChatModel(script).invoke([("user", "hi")]).tool_calls
    assert total.tool_calls == expected
    assert [c["name"] for c in total.tool_calls] == ["f", "g"]


def test_chunks_without_index_continue_the_last_call() -> None:
    merged = AIMessageChunk(
        tool_call_chunks=[{"name": "f", "args": '{"x"', "id": "c9", "index": None}]
    ) + AIMessageChunk(tool_call_chunks=[{"name": None, "args": ": 2}", "id": None, "index": None}])
    assert merged.to_message().tool_calls[0]["args"] == {"x": 2}


@pytest.mark.parametrize(
    ("args", "expected"),
    [('{"q": "x"}', {"q": "x"}), ("", {}), (None, {}), (json.dumps('{"q": 1}'), {"q": 1})],
)
def test_to_message_valid_args(args: str | None, expected: dict[str, Any]) -> None:
    chunk = AIMessageChunk(tool_call_chunks=[{"name": "f", "args": args, "id": None, "index": 0}])
    message = chunk.to_message()
    assert message.tool_calls[0]["args"] == expected
    assert message.tool_calls[0]["id"].startswith("call_")  # synthesized
    assert message.invalid_tool_calls == []


@pytest.mark.parametrize(("args", "needle"), [('{"q": ', "not valid JSON"), ("[1, 2]", "list")])
def test_to_message_invalid_args(args: str, needle: str) -> None:
    chunk = AIMessageChunk(tool_call_chunks=[{"name": "f", "args": args, "id": "c1", "index": 0}])
    message = chunk.to_message()
    assert message.tool_calls == []
    [bad] = message.invalid_tool_calls
    assert (bad["name"], bad["args"], bad["id"]) == ("f", args, "c1")
    assert needle in (bad["error"] or "")


@pytest.mark.parametrize(
    ("fixture", "expected"),
    [
        ("openai-stream-tool-call-deltas", [("get_weather", {"city": "New York City"})]),
        (
            "openai-stream-tool-calls-parallel",
            [
                ("GetWeatherArgs", {"city": "Edinburgh", "country": "GB", "units": "c"}),
                ("get_stock_price", {"ticker": "AAPL", "exchange": "NASDAQ"}),
            ],
        ),
        ("vllm-stream-tool-call-quirks", [("searchGoogle", {"query": "latest news on ai"})]),
    ],
)
def test_real_streams_assemble(fixture: str, expected: list[tuple[str, dict[str, Any]]]) -> None:
    message = assemble(fixture)
    assert [(c["name"], c["args"]) for c in message.tool_calls] == expected
    assert len({c["id"] for c in message.tool_calls}) == len(expected)
    assert message.finish_reason == "tool_calls"


def test_real_stream_refusal_and_reasoning() -> None:
    refusal = assemble("openai-stream-refusal")
    pieces = [
        c["choices"][0]["delta"].get("refusal") or ""
        for c in load_fixture("openai-stream-refusal")["chunks"]
        if c != "[DONE]" and c["choices"]
    ]
    assert refusal.refusal == "".join(pieces) == "I'm sorry, I can't assist with that request."
    assert refusal.content == ""
    reasoning = assemble("deepseek-stream-reasoning")
    assert reasoning.reasoning_content and reasoning.content
    assert "None" not in reasoning.content[:4]


def test_real_stream_usage_from_usage_only_chunk() -> None:
    fixture = load_fixture("openai-stream-text-usage")
    usage = [c for c in fixture["chunks"] if c != "[DONE]" and c.get("usage")][-1]["usage"]
    message = assemble("openai-stream-text-usage")
    assert message.usage == {
        "input_tokens": usage["prompt_tokens"],
        "output_tokens": usage["completion_tokens"],
        "total_tokens": usage["total_tokens"],
    }


# --- coercion ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("role", "cls"),
    [
        ("user", HumanMessage),
        ("human", HumanMessage),
        ("assistant", AIMessage),
        ("ai", AIMessage),
        ("system", SystemMessage),
        ("developer", SystemMessage),
    ],
)
def test_coerce_tuple_roles(role: str, cls: type[BaseMessage]) -> None:
    message = coerce_message((role, "hi"))
    assert type(message) is cls and message.content == "hi"
    assert (
        to_openai_messages([message])[0]["role"]
        == {
            "user": "user",
            "human": "user",
            "assistant": "assistant",
            "ai": "assistant",
            "system": "system",
            "developer": "developer",
        }[role]
    )


def test_coerce_tool_tuple_and_errors() -> None:
    tool = coerce_message(("tool", "42", "c1"))
    assert isinstance(tool, ToolMessage) and tool.tool_call_id == "c1"
    with pytest.raises(ValueError, match="tool_call_id"):
        coerce_message(("tool", "42"))
    with pytest.raises(ValueError, match="wizard"):
        coerce_message(("wizard", "hi"))
    with pytest.raises(TypeError, match="int"):
        coerce_message(42)
    with pytest.raises(TypeError, match="role"):
        coerce_message({"content": "hi"})


def test_coerce_strings_dicts_and_dumps() -> None:
    assert coerce_message("hi") == HumanMessage("hi")
    assert coerce_message({"role": "user", "content": "hi", "id": "u1"}) == HumanMessage(
        "hi", id="u1"
    )
    tool = coerce_message({"role": "tool", "content": "r", "tool_call_id": "c1"})
    assert tool == ToolMessage("r", tool_call_id="c1")
    ai = coerce_message(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"name": "f", "args": {"a": 1}, "id": "c"}],
        }
    )
    assert isinstance(ai, AIMessage) and ai.tool_calls[0]["args"] == {"a": 1}
    original = AIMessage("x", id="a", tool_calls=[{"name": "f", "args": {}, "id": "c"}])
    assert coerce_message(message_to_dict(original)) == original
    same = HumanMessage("keep")
    assert coerce_message(same) is same


def test_convert_to_messages_shapes() -> None:
    assert convert_to_messages(None) == []
    assert convert_to_messages("hi") == [HumanMessage("hi")]
    assert convert_to_messages(("ai", "yo")) == [AIMessage("yo")]
    mixed = convert_to_messages(["a", ("assistant", "b"), {"role": "system", "content": "c"}])
    assert [(m.type, m.content) for m in mixed] == [("human", "a"), ("ai", "b"), ("system", "c")]


# --- dumps -------------------------------------------------------------------------------

ALL_KINDS: list[BaseMessage] = [
    SystemMessage("sys", id="s", additional_kwargs={"openai_role": "developer"}),
    HumanMessage([{"type": "text", "text": "hi"}], id="h", name="ann"),
    AIMessage(
        "answer",
        id="a",
        tool_calls=[{"name": "f", "args": {"x": [1, 2]}, "id": "c1", "type": "tool_call"}],
        invalid_tool_calls=[{"name": "g", "args": "{", "id": "c2", "error": "bad"}],
        usage_metadata={"input_tokens": 3, "output_tokens": 4, "total_tokens": 7},
        reasoning_content="because",
        refusal=None,
        response_metadata={"finish_reason": "tool_calls"},
    ),
    AIMessageChunk(
        "par", id="k", tool_call_chunks=[{"name": "f", "args": "{", "id": "c", "index": 0}]
    ),
    ToolMessage("42", tool_call_id="c1", status="error", artifact={"raw": 42}, id="t"),
    RemoveMessage(id="gone"),
]


@pytest.mark.parametrize("message", ALL_KINDS, ids=lambda m: m.type)
def test_dump_round_trip_every_type(message: BaseMessage) -> None:
    data = message_to_dict(message)
    assert data["type"] == message.type
    assert json.loads(json.dumps(data)) == data  # JSON-able
    back = message_from_dict(json.loads(json.dumps(data)))
    assert type(back) is type(message)
    assert back == message


def test_message_from_dict_rejects_unknown_type() -> None:
    with pytest.raises(ValueError, match="wizard"):
        message_from_dict({"type": "wizard", "content": "x"})


# --- wire format: H23 out ----------------------------------------------------------------


def tool_history() -> list[BaseMessage]:
    return [
        SystemMessage("be brief"),
        HumanMessage("price of AAPL in EUR?", name="ann"),
        AIMessage(
            "",
            tool_calls=[
                {"name": "price", "args": {"ticker": "AAPL"}, "id": "c1"},
                {"name": "fx", "args": {"pair": "USD/EUR", "note": "café"}, "id": "c2"},
            ],
        ),
        ToolMessage("10.05", tool_call_id="c1"),
        ToolMessage([{"type": "text", "text": "0.92"}], tool_call_id="c2"),
        AIMessage("About 9.25 EUR."),
    ]


def test_to_openai_messages_full_tool_call_history() -> None:
    wire = to_openai_messages(tool_history())
    assert [m["role"] for m in wire] == ["system", "user", "assistant", "tool", "tool", "assistant"]
    assert wire[1] == {"role": "user", "content": "price of AAPL in EUR?", "name": "ann"}
    assistant = wire[2]
    assert "content" in assistant and assistant["content"] == ""  # H23 default
    assert [c["id"] for c in assistant["tool_calls"]] == ["c1", "c2"]
    for call, args in zip(
        assistant["tool_calls"],
        [{"ticker": "AAPL"}, {"pair": "USD/EUR", "note": "café"}],
        strict=True,
    ):
        assert call["type"] == "function"
        assert isinstance(call["function"]["arguments"], str)
        assert json.loads(call["function"]["arguments"]) == args  # decoding once is enough
    assert wire[3] == {"role": "tool", "tool_call_id": "c1", "content": "10.05"}
    assert wire[4]["content"] == [{"type": "text", "text": "0.92"}]  # lists pass through
    assert wire[5] == {"role": "assistant", "content": "About 9.25 EUR."}
    json.dumps(wire)


def test_to_openai_messages_null_content_option_and_remove() -> None:
    wire = to_openai_messages(tool_history(), empty_content=None)
    assert "content" in wire[2] and wire[2]["content"] is None
    assert wire[5]["content"] == "About 9.25 EUR."
    with pytest.raises(ValueError, match="RemoveMessage"):
        to_openai_messages([RemoveMessage(id="x")])


def test_to_openai_messages_invalid_calls_sent_back_and_reasoning_opt_in() -> None:
    msg = AIMessage(
        invalid_tool_calls=[{"name": "f", "args": "[1,2]", "id": "c9", "error": "not an object"}],
        reasoning_content="hmm",
    )
    [item] = to_openai_messages([msg])
    assert item["tool_calls"][0] == {
        "id": "c9",
        "type": "function",
        "function": {"name": "f", "arguments": "{}"},  # raw args only in the error (H14)
    }
    assert "reasoning_content" not in item
    assert to_openai_messages([msg], include_reasoning=True)[0]["reasoning_content"] == "hmm"


# --- wire format: responses in (H22, H23) ------------------------------------------------


def test_null_content_with_tool_calls_parses_to_empty_text() -> None:
    message = response_message("openai-chat-tool-call-single")
    assert message.content == "" and message.text == ""
    assert len(message.tool_calls) == 1 and isinstance(message.tool_calls[0]["args"], dict)
    assert message.finish_reason == "tool_calls"
    # round trip: what we send back keeps the call and a string content
    [wire] = to_openai_messages([message])
    assert wire["content"] == "" and wire["tool_calls"][0]["id"] == message.tool_calls[0]["id"]


def test_parallel_calls_keep_distinct_ids() -> None:
    message = response_message("openai-chat-tool-calls-parallel")
    assert [c["id"] for c in message.tool_calls] == [
        "call_fdNz3vOBKYgOIpMdWotB9MjY",
        "call_h1DWI1POMJLb0KwIyQHWXD4p",
    ]
    assert message.tool_calls[1]["args"] == {"ticker": "AAPL", "exchange": "NASDAQ"}


@pytest.mark.parametrize(
    "arguments",
    ['{"city": "Oslo"}', {"city": "Oslo"}, '"{\\"city\\": \\"Oslo\\"}"'],
    ids=["R1-string", "R2-object", "R3-double-encoded"],
)
def test_h22_argument_shapes_all_give_a_dict(arguments: Any) -> None:
    raw = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "weather", "arguments": arguments},
            }
        ],
    }
    message = message_from_openai(raw)
    assert isinstance(message, AIMessage)
    assert message.tool_calls == [
        {"name": "weather", "args": {"city": "Oslo"}, "id": "c1", "type": "tool_call"}
    ]
    sent = to_openai_messages([message])[0]["tool_calls"][0]["function"]["arguments"]
    assert json.loads(sent) == {"city": "Oslo"}


@pytest.mark.parametrize("arguments", ["[1,2]", '"just text"', "{oops", 7])
def test_h22_non_object_arguments_become_invalid_calls(arguments: Any) -> None:
    raw = {
        "role": "assistant",
        "tool_calls": [{"id": "c1", "function": {"name": "weather", "arguments": arguments}}],
    }
    message = message_from_openai(raw)
    assert isinstance(message, AIMessage) and message.tool_calls == []
    [bad] = message.invalid_tool_calls
    assert bad["id"] == "c1" and bad["name"] == "weather" and bad["error"]
    args, error = parse_tool_args(arguments)
    assert args is None and error


def test_provider_quirks_from_real_payloads() -> None:
    ollama = response_message("ollama-chat-tool-call")
    assert ollama.reasoning_content and ollama.reasoning_content.startswith("The conversation")
    assert ollama.tool_calls[0]["args"] == {"city": "Paris", "country": "France"}
    assert ollama.tool_calls[0]["id"] == "call_o2vnpxrw"
    lmstudio = response_message("lmstudio-chat-tool-call")
    assert lmstudio.tool_calls[0]["id"] == "910617247"  # no prefix assumed
    vllm = response_message("vllm-chat-tool-call")
    assert vllm.content == "" and vllm.reasoning_content is None
    assert vllm.tool_calls[0]["args"] == {"city": "New York"}
    vllm_empty = response_message("vllm-chat-tool-call-empty-content")
    assert vllm_empty.content == "" and vllm_empty.refusal is None
    assert vllm_empty.tool_calls[0]["args"] == {"nature": "lieu", "places": 14}


def test_empty_tool_call_id_is_synthesized_and_reused() -> None:
    message = response_message("gemini-openai-compat-tool-call-empty-id")
    call_id = message.tool_calls[0]["id"]
    assert call_id.startswith("call_") and len(call_id) > 10
    history = [message, ToolMessage("12:00", tool_call_id=call_id)]
    wire = to_openai_messages(history)
    assert wire[0]["tool_calls"][0]["id"] == wire[1]["tool_call_id"] == call_id
    assert wire[0]["extra_content"]["google"]["thought"] is True  # echoed back


def test_refusal_and_reasoning_kept() -> None:
    refusal = response_message("openai-chat-refusal")
    assert (
        refusal.content == "" and refusal.refusal == "I'm very sorry, but I can't assist with that."
    )
    assert refusal.finish_reason == "stop"
    text = response_message("openai-chat-text")
    assert text.text and text.refusal is None and text.tool_calls == []
    deepseek = response_message("deepseek-chat-reasoning")
    assert deepseek.reasoning_content and deepseek.content.startswith("Crossing the street")


def test_deepseek_reasoning_echo_matches_request_hint() -> None:
    message = response_message("deepseek-chat-reasoning-tool-calls-parallel")
    assert [c["name"] for c in message.tool_calls] == ["get_player_name", "roll_dice"]
    [wire] = to_openai_messages([message], include_reasoning=True)
    hint_turn = load_fixture("deepseek-chat-reasoning-tool-calls-parallel")["request_hint"][
        "messages"
    ][3]
    assert set(hint_turn) <= set(wire)  # same keys as the echoed turn DeepSeek expects
    assert wire["reasoning_content"] == message.reasoning_content


def test_unknown_role_and_tool_without_id_are_errors() -> None:
    with pytest.raises(ValueError, match="function"):
        message_from_openai({"role": "function", "content": "x"})
    with pytest.raises(ValueError, match="tool_call_id"):
        message_from_openai({"role": "tool", "content": "x"})
