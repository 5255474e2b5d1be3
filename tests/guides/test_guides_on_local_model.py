"""The guide examples that fit a real model, on the local one (SmolLM2-135M through
llama.cpp, offline): the Haystack Agent guide's quick start, exit conditions, templated
prompt and State schema; the LangChain agents guide's loop through ``updates``, token
streaming through ``messages``, and a thread resumed by ``thread_id``.

A 135M model's wording and choices are not the guide's, so these assert structure only:
what the guide says the run is made of (node order, message kinds, every tool call valid
for its tool and answered once by its id, chunk types and metadata, exit reasons from the
guide's set), never what the model says or whether it chose a tool.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import jsonschema
import pytest

from threadloom import (
    AIMessage,
    AIMessageChunk,
    HumanMessage,
    InMemoryCheckpointer,
    ToolMessage,
    create_agent,
    tool,
)

pytestmark = pytest.mark.slow

local = pytest.importorskip("threadloom.models.local")


@tool
def search(query: Annotated[str, "The search query"]) -> str:
    """Search for information on the web."""
    return "In France, a 15% service charge is typically included."


@tool
def calculator(
    operation: Annotated[Literal["multiply", "percentage"], "The operation to perform"],
    a: Annotated[float, "First number"],
    b: Annotated[float, "Second number"],
) -> float:
    """Perform mathematical calculations."""
    return a * b if operation == "multiply" else (a / 100) * b


TOOLS = {t.name: t for t in (search, calculator)}


@pytest.fixture(scope="module")
def model() -> Any:
    m = local.LocalChatModel(temperature=0, seed=7, max_tokens=96)
    yield m
    m.close()


def assert_well_formed(messages: list[Any]) -> None:
    """The guide's loop: user first, then model replies; each tool call names a tool,
    validates against its schema and is answered by exactly one ToolMessage with its id,
    right after the reply that asked for it; the run ends on a model reply."""
    assert isinstance(messages[0], HumanMessage)
    assert isinstance(messages[-1], AIMessage) and not messages[-1].tool_calls
    for i, msg in enumerate(messages):
        if isinstance(msg, AIMessage) and msg.tool_calls:
            answers = messages[i + 1:i + 1 + len(msg.tool_calls)]
            assert [type(a) for a in answers] == [ToolMessage] * len(msg.tool_calls)
            assert sorted(a.tool_call_id for a in answers) == sorted(
                c["id"] for c in msg.tool_calls)
            for call in msg.tool_calls:
                if call["name"] in TOOLS:
                    schema = TOOLS[call["name"]].json_schema()
                    jsonschema.validate(call["args"], schema)
    ids = [m.tool_call_id for m in messages if isinstance(m, ToolMessage)]
    assert len(ids) == len(set(ids))


def test_haystack_quick_start_with_a_streaming_callback(model: Any) -> None:
    chunks: list[Any] = []
    agent = create_agent(model, [search, calculator], max_agent_steps=4,
                         system_prompt="You are a helpful assistant. Use tools when useful.",
                         streaming_callback=chunks.append)
    out = agent.run(messages=[HumanMessage("What is a 10% tip on 85 euros in France?")])
    assert_well_formed(out["messages"])
    assert out["last_message"] is out["messages"][-1]
    # the callback saw the model's chunks as they came (Haystack's streaming_callback)
    assert chunks and all(hasattr(c, "content") for c in chunks)
    assert out["exit_reason"] in ("text", "max_agent_steps")
    assert 1 <= out["step_count"] <= 4


def test_haystack_exit_conditions_text_or_a_tool(model: Any) -> None:
    agent = create_agent(model, [search, calculator], exit_conditions=["text", "calculator"],
                         max_agent_steps=3)
    out = agent.run(messages=[HumanMessage("Multiply 6 by 7.")])
    reason = out["exit_reason"]
    assert reason in ("text", "calculator", "max_agent_steps")
    if reason == "calculator":  # the run ended right after that tool's result
        assert isinstance(out["messages"][-1], ToolMessage)
        assert out["messages"][-1].name == "calculator"
    else:
        assert_well_formed(out["messages"])


def test_haystack_templated_user_prompt_and_state_schema(model: Any) -> None:
    agent = create_agent(
        model, [search], max_agent_steps=3,
        user_prompt="{% message role='user' %}Answer in {{ language }}: {{ question }}"
                    "{% endmessage %}",
        state_schema={"notes": {"type": list[str]}},
    )
    out = agent.run(language="English", question="Is service included in France?",
                    notes=["from the guide"])
    assert_well_formed(out["messages"])
    # the template rendered into the first user message; the state key is carried through
    first = out["messages"][0]
    assert "Answer in English: Is service included in France?" in first.text
    assert out["notes"] == ["from the guide"]


def test_langchain_loop_through_updates_and_tokens_through_messages(model: Any) -> None:
    agent = create_agent(model, [search], max_agent_steps=3,
                         system_prompt="You are a helpful assistant. Use tools when useful.")
    nodes, tokens = [], []
    for mode, payload in agent.stream({"messages": [("user", "Is a tip included in France?")]},
                                      stream_mode=["updates", "messages"]):
        if mode == "updates":
            nodes.extend(k for k in payload if k in ("model", "tools"))
        else:
            chunk, meta = payload
            tokens.append((chunk, meta))
    # the guide's loop: model, then (tools, model) as often as the model asks for tools
    assert nodes[0] == "model" and nodes[-1] == "model"
    assert all(a != b for a, b in zip(nodes, nodes[1:], strict=False))
    model_tokens = [c for c, meta in tokens if meta["langgraph_node"] == "model"]
    assert model_tokens and all(isinstance(c, AIMessageChunk) for c in model_tokens)
    assert "".join(c.text for c in model_tokens).strip()


def test_langchain_thread_id_resumes_the_conversation(model: Any) -> None:
    agent = create_agent(model, [], checkpointer=InMemoryCheckpointer(), max_agent_steps=2)
    cfg = {"configurable": {"thread_id": "guide"}}
    first = agent.invoke({"messages": [("user", "My name is Ada.")]}, cfg)
    second = agent.invoke({"messages": [("user", "What is my name?")]}, cfg)
    # the second turn ran on the saved thread: both turns, in order, in one history
    users = [m.text for m in second["messages"] if isinstance(m, HumanMessage)]
    assert users == ["My name is Ada.", "What is my name?"]
    assert second["messages"][:len(first["messages"])] == first["messages"]
    assert isinstance(second["messages"][-1], AIMessage)
