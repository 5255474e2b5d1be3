"""The agent's updates/values streams read as the LangChain agents guide shows them."""

from __future__ import annotations

from typing import Any

from threadloom import AIMessage, InMemoryCheckpointer, ScriptedChatModel, create_agent, tool


@tool
def get_weather(city: str) -> str:
    """The weather of a city."""
    return {"杭州": "晴，25°C"}.get(city, "unknown")


def _agent(**kwargs: Any) -> Any:
    model = ScriptedChatModel([{"tool_calls": [{"name": "get_weather", "args": {"city": "杭州"}}]},
                               "杭州今天天气晴朗，气温25°C。"])
    return create_agent(model, [get_weather], **kwargs)


def test_updates_show_model_tools_model() -> None:
    chunks = list(_agent().stream({"messages": ["杭州天气怎么样？"]}, stream_mode="updates"))
    assert [list(c) for c in chunks] == [["model"], ["tools"], ["model"]]


def test_values_show_one_two_three_four_messages() -> None:
    chunks = list(_agent().stream({"messages": ["杭州天气怎么样？"]}, stream_mode="values"))
    assert [len(c["messages"]) for c in chunks] == [1, 2, 3, 4]


def test_both_modes_at_once_and_other_modes_untouched() -> None:
    items = list(_agent().stream({"messages": ["q"]}, stream_mode=["updates", "values", "debug"]))
    assert [list(c) for m, c in items if m == "updates"] == [["model"], ["tools"], ["model"]]
    assert [len(c["messages"]) for m, c in items if m == "values"] == [1, 2, 3, 4]
    tasks = [c["payload"]["name"] for m, c in items
             if m == "debug" and c.get("type") == "task"]
    assert tasks[0] == "before_run" and "exit_check" in tasks and tasks[-1] == "after_run"


def test_checkpoints_still_hold_every_step(thread_id: str) -> None:
    saver = InMemoryCheckpointer()
    agent = _agent(checkpointer=saver)
    list(agent.stream({"messages": ["q"]}, thread_id=thread_id, stream_mode="updates"))
    thread = {"configurable": {"thread_id": thread_id}}
    # the store keeps which node wrote at each step (snapshots show LangGraph's metadata)
    writers = [t.metadata.get("writes") for t in saver.list(thread)]
    names = {n for w in writers if w for n in w}
    assert {"before_run", "exit_check", "after_run"} <= names


def test_a_bookkeeping_node_that_adds_messages_stays_visible() -> None:
    def brief(state: Any) -> None:
        state.set("messages", [AIMessage(content="Task brief.")])

    chunks = list(_agent(hooks={"before_run": [brief]}).stream(
        {"messages": ["q"]}, stream_mode="updates"))
    assert [list(c) for c in chunks] == [["before_run"], ["model"], ["tools"], ["model"]]
