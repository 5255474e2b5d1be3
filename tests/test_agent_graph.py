"""The agent as a graph: its five nodes, output keys, run-time options, lifecycle, clone."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from threadloom import AIMessage, Tool, create_agent, tool
from threadloom.agent import Agent
from threadloom.checkpoint.memory import InMemoryCheckpointer
from threadloom.engine.compiled import CompiledGraph
from threadloom.models import ScriptedChatModel

NODES = ["before_run", "model", "tools", "exit_check", "after_run"]


def bump(x: int) -> int:
    """Return x plus one."""
    return x + 1


def counting_script(messages: list[Any], tools: Any = None) -> AIMessage:
    """Calls bump until three results follow the last user message, then answers."""
    results = 0
    for m in reversed(messages):
        if m.type == "human":
            break
        results += m.type == "tool"
    if results < 3:
        call = {"name": "bump", "args": {"x": results}, "id": f"call_{results}"}
        return AIMessage(content="", tool_calls=[call])
    return AIMessage(content="The counter reached 3.")


def test_graph_has_exactly_the_five_nodes_in_drawing() -> None:
    agent = create_agent(ScriptedChatModel(counting_script), tools=[bump])
    assert isinstance(agent, Agent) and isinstance(agent, CompiledGraph)
    assert list(agent.nodes) == NODES
    mermaid = agent.get_graph().draw_mermaid()
    for a, b in [("__start__", "before_run"), ("before_run", "model"), ("model", "tools"),
                 ("model", "exit_check"), ("tools", "exit_check"), ("tools", "model"),
                 ("exit_check", "model"),
                 ("exit_check", "after_run"), ("after_run", "__end__")]:
        assert f"{a} -" in mermaid and f"> {b};" in mermaid
        assert any(line.strip().startswith(a) and line.strip().endswith(f"> {b};")
                   for line in mermaid.splitlines()), (a, b)


def _node_order(agent: Any, **config: Any) -> list[str]:
    """The nodes run, in order (the debug stream: ``updates`` leaves out the steps that
    changed nothing a user sees, ``threadloom.agent.streams``)."""
    return [ev["payload"]["name"] for ev in agent.stream(
        {"messages": [("user", "go")]}, stream_mode="debug", **config) if ev["type"] == "task"]


def test_debug_stream_names_the_nodes_in_loop_order() -> None:
    agent = create_agent(ScriptedChatModel(counting_script), tools=[bump])
    # tools -> model while no exit can hold; exit_check runs where the run may end
    assert _node_order(agent) == ["before_run"] + ["model", "tools"] * 3 + [
        "model", "exit_check", "after_run"]
    updates = [next(iter(ev)) for ev in agent.stream({"messages": [("user", "go")]},
                                                     stream_mode="updates")]
    assert updates == ["model", "tools"] * 3 + ["model"]


def test_tools_route_to_exit_check_when_an_exit_tool_succeeded() -> None:
    agent = create_agent(ScriptedChatModel(counting_script), tools=[bump],
                         exit_conditions=["bump"])
    assert _node_order(agent) == ["before_run", "model", "tools", "exit_check", "after_run"]
    assert agent.invoke({"messages": [("user", "go")]})["exit_reason"] == "bump"


def test_tools_route_to_exit_check_when_the_steps_run_out() -> None:
    agent = create_agent(ScriptedChatModel(counting_script), tools=[bump], max_agent_steps=2)
    assert _node_order(agent) == ["before_run", "model", "tools", "model", "tools",
                                  "exit_check", "after_run"]
    out = agent.invoke({"messages": [("user", "go")]})
    assert out["exit_reason"] == "max_agent_steps" and out["step_count"] == 2


def test_an_after_tool_stop_ends_the_run_at_the_next_model_node() -> None:
    def stop(state: Any) -> None:
        state.set("stop_run", "enough")

    model = ScriptedChatModel(counting_script)
    agent = create_agent(model, tools=[bump], hooks={"after_tool": [stop]})
    assert _node_order(agent) == ["before_run", "model", "tools", "model", "after_run"]
    assert agent.invoke({"messages": [("user", "go")]})["exit_reason"] == "enough"


def test_pausing_at_exit_check_keeps_it_after_every_tools_step(thread_id: str) -> None:
    agent = create_agent(ScriptedChatModel(counting_script), tools=[bump],
                         checkpointer=InMemoryCheckpointer(), interrupt_before=["exit_check"])
    agent.invoke({"messages": [("user", "go")]}, thread_id=thread_id)
    paused = agent.get_state(thread_id=thread_id)
    assert paused.next == ("exit_check",)
    assert [m.type for m in paused.values["messages"]] == ["human", "ai", "tool"]
    resumes = 0
    while agent.get_state(thread_id=thread_id).next == ("exit_check",) and resumes < 10:
        agent.invoke(None, thread_id=thread_id)
        resumes += 1
    assert resumes == 4  # paused before the exit_check of each tools step and the answer's
    done = agent.get_state(thread_id=thread_id)
    assert done.next == () and done.values["exit_reason"] == "text"


def test_checkpoints_record_agent_nodes(thread_id: str) -> None:
    saver = InMemoryCheckpointer()
    agent = create_agent(ScriptedChatModel(counting_script), tools=[bump], checkpointer=saver)
    agent.invoke({"messages": [("user", "go")]}, thread_id=thread_id)
    history = list(saver.list({"configurable": {"thread_id": thread_id}}))  # the store's
    written = [w for saved in reversed(history) for w in saved.metadata.get("writes", {})]
    assert written[:6] == ["__start__", "before_run", "model", "tools", "model", "tools"]
    assert written[-3:-1] == ["model", "exit_check"]
    assert written[-1] == "after_run"
    assert agent.get_state(thread_id=thread_id).next == ()


def test_output_keys_and_counters() -> None:
    agent = create_agent(ScriptedChatModel(counting_script), tools=[bump])
    out = agent.invoke({"messages": [("user", "go")]})
    assert set(out) == {"messages", "last_message", "step_count", "token_usage",
                        "tool_call_counts", "exit_reason"}
    assert [m.type for m in out["messages"]] == ["human"] + ["ai", "tool"] * 3 + ["ai"]
    assert [m.text for m in out["messages"] if m.type == "tool"] == ["1", "2", "3"]
    assert out["step_count"] == 4
    assert out["tool_call_counts"] == {"bump": 3}
    assert out["exit_reason"] == "text"
    assert out["last_message"].text == "The counter reached 3."
    usage = out["token_usage"]
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"] > 0


def test_counters_are_per_run_on_a_persisted_thread(thread_id: str) -> None:
    agent = create_agent(ScriptedChatModel(counting_script), tools=[bump],
                         checkpointer=InMemoryCheckpointer())
    agent.invoke({"messages": [("user", "go")]}, thread_id=thread_id)
    second = agent.invoke({"messages": [("user", "again")]}, thread_id=thread_id)
    assert second["step_count"] == 4
    assert second["tool_call_counts"] == {"bump": 3}
    assert len(second["messages"]) == 16


def test_no_tools_is_one_plain_chat_call() -> None:
    model = ScriptedChatModel(["hello there"])
    out = create_agent(model).run("hi")
    assert out["exit_reason"] == "text" and out["step_count"] == 1
    assert len(model.calls) == 1 and model.calls[0]["tools"] is None


def test_tools_for_a_model_without_tool_support_is_a_type_error() -> None:
    model = ScriptedChatModel(["x"])
    model.supports_tools = False
    with pytest.raises(TypeError, match="cannot take tools"):
        create_agent(model, tools=[bump])
    assert create_agent(model).run("hi")["exit_reason"] == "text"


def test_duplicate_tool_names_and_exit_conditions_of_run_time_tools() -> None:
    with pytest.raises(ValueError, match="bump"):
        create_agent(ScriptedChatModel(["x"]), tools=[bump, tool(bump)])
    # as Haystack: an exit condition naming no configured tool is kept (the tool may be
    # given at run time); only the shape is checked
    agent = create_agent(ScriptedChatModel(["x"]), tools=[bump], exit_conditions=["nope"])
    assert agent.exit_conditions == ["nope"]
    with pytest.raises(ValueError, match="list"):
        create_agent(ScriptedChatModel(["x"]), tools=[bump], exit_conditions="nope")


def test_run_time_tools_by_name_and_object() -> None:
    def double(x: int) -> int:
        """Return 2x."""
        return 2 * x

    def script(messages: list[Any], tools: Any) -> AIMessage:
        names = sorted(t["function"]["name"] for t in tools or [])
        if messages[-1].type == "tool":
            return AIMessage(content=f"{names} -> {messages[-1].text}")
        return AIMessage(content="", tool_calls=[{"name": names[0], "args": {"x": 5}, "id": "c"}])

    agent = create_agent(ScriptedChatModel(script), tools=[bump])
    assert agent.run("go")["last_message"].text == "['bump'] -> 6"
    out = agent.run("go", tools=[tool(double)])
    assert out["last_message"].text == "['double'] -> 10"
    assert agent.invoke({"messages": ["go"], "tools": ["bump"]})["last_message"].text == \
        "['bump'] -> 6"
    with pytest.raises(ValueError, match="not one of the agent's tools"):
        agent.run("go", tools=["missing"])


def test_generation_kwargs_merge_run_time_wins() -> None:
    model = ScriptedChatModel(["a", "b"])
    agent = create_agent(model, generation_kwargs={"temperature": 0.1, "max_tokens": 5})
    agent.run("x")
    agent.run("y", generation_kwargs={"temperature": 0.9})
    assert model.calls[0]["kwargs"] == {"temperature": 0.1, "max_tokens": 5}
    assert model.calls[1]["kwargs"] == {"temperature": 0.9, "max_tokens": 5}


def test_streaming_callback_gets_every_chunk() -> None:
    chunks: list[Any] = []
    agent = create_agent(ScriptedChatModel(["one two three four"]))
    out = agent.run("x", streaming_callback=chunks.append)
    text = "".join(c.content for c in chunks if isinstance(c.content, str))
    assert text == "one two three four" and len(chunks) >= 4
    assert out["last_message"].text == "one two three four"


async def test_async_streaming_callback_and_arun() -> None:
    seen: list[str] = []

    async def cb(chunk: Any) -> None:
        await asyncio.sleep(0)
        seen.append(chunk.content)

    agent = create_agent(ScriptedChatModel(["alpha beta"]))
    out = await agent.arun("x", streaming_callback=cb)
    assert "".join(seen) == "alpha beta" and out["exit_reason"] == "text"


def test_hook_context_reaches_hooks_and_is_not_stored(thread_id: str) -> None:
    seen: list[Any] = []
    marker = object()  # not storable by the checkpoint codec

    def before_llm(state: Any, context: Any) -> None:
        seen.append(context)

    agent = create_agent(ScriptedChatModel(["ok"]), hooks={"before_llm": [before_llm]},
                         checkpointer=InMemoryCheckpointer())
    agent.run("x", hook_context=marker, thread_id=thread_id)
    assert seen == [marker]
    assert "hook_context" not in agent.get_state(thread_id=thread_id).values


def test_clone_overrides_and_keeps_config() -> None:
    agent = create_agent(ScriptedChatModel(["a"]), tools=[bump], max_agent_steps=7, name="one")
    other = agent.clone(model=ScriptedChatModel(["b"]), name="two")
    assert other.name == "two" and other.config["max_agent_steps"] == 7
    assert [t.name for t in other.tools] == ["bump"]
    assert other.run("x")["last_message"].text == "b"
    assert agent.run("x")["last_message"].text == "a"
    with pytest.raises(TypeError, match="unknown"):
        agent.clone(colour="red")


def test_warm_up_and_close_reach_model_and_tools() -> None:
    calls: list[str] = []

    class Model(ScriptedChatModel):
        def warm_up(self) -> None:
            calls.append("model.warm_up")

        def close(self) -> None:
            calls.append("model.close")

        async def aclose(self) -> None:
            calls.append("model.aclose")

    agent = create_agent(Model(["x"]))
    agent.warm_up()
    agent.close()
    asyncio.run(agent.awarm_up())
    asyncio.run(agent.aclose())
    assert calls == ["model.warm_up", "model.close", "model.warm_up", "model.aclose"]


def test_long_runs_are_not_cut_by_the_default_recursion_limit() -> None:
    agent = create_agent(ScriptedChatModel(lambda m, t: AIMessage(
        content="", tool_calls=[{"name": "bump", "args": {"x": 1}, "id": f"c{len(m)}"}])),
        tools=[bump], max_agent_steps=20)
    out = agent.run("loop")
    assert out["exit_reason"] == "max_agent_steps" and out["step_count"] == 20


def test_async_tool_and_ainvoke() -> None:
    async def abump(x: int) -> int:
        return x + 1

    agent = create_agent(ScriptedChatModel(counting_script),
                         tools=[Tool("bump", "add one", coroutine=abump)])
    out = asyncio.run(agent.ainvoke({"messages": [("user", "go")]}))
    assert [m.text for m in out["messages"] if m.type == "tool"] == ["1", "2", "3"]


def test_update_state_as_model_and_time_travel_follow_the_edges(thread_id: str) -> None:
    model = ScriptedChatModel(counting_script)
    agent = create_agent(model, tools=[bump], checkpointer=InMemoryCheckpointer(),
                         interrupt_before=["tools"])
    agent.invoke({"messages": [("user", "go")]}, thread_id=thread_id)
    paused = agent.get_state(thread_id=thread_id)
    assert paused.next == ("tools",)
    ai_id = paused.values["messages"][-1].id
    config = agent.update_state(paused.config, {"messages": [AIMessage("No tools needed.",
                                                                        id=ai_id)]},
                                as_node="model")
    assert agent.get_state(config).next == ("exit_check",)
    out = agent.invoke(None, thread_id=thread_id)
    assert out["exit_reason"] == "text" and out["last_message"].text == "No tools needed."
    assert len(model.calls) == 1
    # time travel: resume the original pause point again, from its checkpoint
    replay = agent.invoke(None, paused.config)
    assert replay["messages"][2].type == "tool" and replay["messages"][2].text == "1"


def test_pausing_at_exit_check_draws_no_tools_to_model_edge() -> None:
    paused = create_agent(ScriptedChatModel(counting_script), tools=[bump],
                          checkpointer=InMemoryCheckpointer(), interrupt_after=["exit_check"])
    edges = {(e.source, e.target) for e in paused.get_graph().edges}
    assert ("tools", "exit_check") in edges and ("tools", "model") not in edges
    plain = create_agent(ScriptedChatModel(counting_script), tools=[bump])
    assert ("tools", "model") in {(e.source, e.target) for e in plain.get_graph().edges}


def _finish_script(fail: bool) -> Any:
    def script(messages: list[Any], tools: Any = None) -> AIMessage:
        last = messages[-1]
        if last.type == "human":
            args = {"x": "bad"} if fail else {"x": 1}
            return AIMessage(content="", tool_calls=[{"name": "finish", "args": args,
                                                      "id": "c1"}])
        return AIMessage(content="answered")
    return script


def finish(x: int) -> str:
    """Hand in the result."""
    return f"done {x}"


@pytest.mark.parametrize("fail", [False, True])
def test_a_return_direct_tool_given_at_run_time_ends_the_run(fail: bool) -> None:
    agent = create_agent(ScriptedChatModel(_finish_script(fail)), tools=[bump])
    direct = tool(finish, return_direct=True)
    out = agent.run(messages="go", tools=[direct])
    if fail:  # its call failed (bad arguments): the loop goes on to the text answer
        assert out["exit_reason"] == "text" and out["step_count"] == 2
        assert out["messages"][2].status == "error"
    else:
        assert out["exit_reason"] == "finish" and out["step_count"] == 1
        assert out["messages"][-1].type == "tool" and out["messages"][-1].text == "done 1"
    # without it at run time, the configured tools have no exit: a normal text answer
    assert create_agent(ScriptedChatModel(["plain"]), tools=[bump]).run(
        messages="go")["exit_reason"] == "text"
