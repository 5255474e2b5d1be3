"""Exit conditions: text, finish reasons (H13), exit tools (H11), return_direct, unknown
tools (H16), max_agent_steps, stop_run, jump_to."""

from __future__ import annotations

from typing import Any

from threadloom import AIMessage, tool
from threadloom.agent import create_agent
from threadloom.agent.approval import pending_tool_calls
from threadloom.models import ScriptedChatModel


def call(name: str, args: dict[str, Any], call_id: str) -> dict[str, Any]:
    return {"name": name, "args": args, "id": call_id}


def usage(inp: int, out: int) -> dict[str, int]:
    return {"input_tokens": inp, "output_tokens": out, "total_tokens": inp + out}


def search(q: str) -> str:
    """Search for q."""
    return f"results for {q}"


def finish(answer: str) -> str:
    """Finish with an answer."""
    return f"final: {answer}"


def broken_finish(answer: str) -> str:
    """Finish, but fail."""
    raise RuntimeError("finish failed")


def broken_search(q: str) -> str:
    """Search, but fail."""
    raise RuntimeError("search is down")


def test_text_exit_and_text_not_an_exit_condition() -> None:
    assert create_agent(ScriptedChatModel(["hi"])).run("x")["exit_reason"] == "text"
    model = ScriptedChatModel(["first", {"content": "", "tool_calls": [call("finish", {
        "answer": "a"}, "c1")]}])
    out = create_agent(model, tools=[finish], exit_conditions=["finish"]).run("x")
    assert out["exit_reason"] == "finish" and len(model.calls) == 2


def test_empty_reply_without_tool_calls_is_not_an_exit() -> None:
    model = ScriptedChatModel(["", "now an answer"])
    out = create_agent(model).run("x")
    assert len(model.calls) == 2
    assert out["exit_reason"] == "text" and out["step_count"] == 2


def test_h13_length_keeps_partial_text() -> None:
    partial = "The three steps are: 1) ..."
    model = ScriptedChatModel([{"content": partial, "finish_reason": "length"}])
    out = create_agent(model).run("explain")
    assert out["exit_reason"] == "length"
    assert out["last_message"].text == partial
    assert len(model.calls) == 1


def test_h13_content_filter_with_empty_text() -> None:
    model = ScriptedChatModel([{"content": "", "finish_reason": "content_filter"}])
    out = create_agent(model).run("x")
    assert out["exit_reason"] == "content_filter" and len(model.calls) == 1


def test_h13_on_exit_continue_run_then_second_reply_decides() -> None:
    seen: list[Any] = []

    def on_exit(state: Any) -> dict[str, Any] | None:
        seen.append(state.get("exit_reason"))
        if state.get("exit_reason") == "length":
            return {"continue_run": True}
        return None

    model = ScriptedChatModel([
        {"content": "The three steps are: 1) ...", "finish_reason": "length",
         "usage": usage(100, 50)},
        {"content": "1) a 2) b 3) c", "usage": usage(160, 20)},
    ])
    out = create_agent(model, hooks={"on_exit": [on_exit]}).run("explain")
    assert len(model.calls) == 2
    assert seen == ["length", "text"]
    assert out["exit_reason"] == "text"
    assert out["token_usage"] == usage(260, 70)


def test_h11_exit_tool_second_in_a_parallel_batch() -> None:
    model = ScriptedChatModel([{"content": "", "tool_calls": [
        call("search", {"q": "x"}, "c1"), call("finish", {"answer": "done"}, "c2")]}])
    agent = create_agent(model, tools=[search, finish], exit_conditions=["finish"],
                         max_agent_steps=10)
    out = agent.run("go")
    assert len(model.calls) == 1
    assert out["exit_reason"] == "finish"
    assert [m.text for m in out["messages"] if m.type == "tool"] == [
        "results for x", "final: done"]
    assert out["tool_call_counts"] == {"search": 1, "finish": 1}


def test_h11_b_exit_tool_that_errors_does_not_exit() -> None:
    model = ScriptedChatModel([
        {"content": "", "tool_calls": [call("search", {"q": "x"}, "c1"),
                                       call("finish", {"answer": "done"}, "c2")]},
        "Sorry, finishing failed.",
    ])
    agent = create_agent(model, tools=[search, tool(broken_finish, name="finish")],
                         exit_conditions=["finish", "text"], max_agent_steps=10)
    out = agent.run("go")
    assert len(model.calls) == 2
    second_request = model.calls[1]["messages"]
    errors = [m for m in second_request if m.type == "tool" and m.status == "error"]
    assert [m.tool_call_id for m in errors] == ["c2"] and "finish failed" in errors[0].text
    assert out["exit_reason"] == "text"


def test_h11_c_failing_sibling_does_not_block_the_exit_tool() -> None:
    model = ScriptedChatModel([{"content": "", "tool_calls": [
        call("search", {"q": "x"}, "c1"), call("finish", {"answer": "done"}, "c2")]}])
    agent = create_agent(model, tools=[tool(broken_search, name="search"), finish],
                         exit_conditions=["finish"], max_agent_steps=10)
    out = agent.run("go")
    assert out["exit_reason"] == "finish" and len(model.calls) == 1
    tool_messages = [m for m in out["messages"] if m.type == "tool"]
    assert tool_messages[0].status == "error" and "search is down" in tool_messages[0].text
    assert tool_messages[1].status == "success"


def test_an_errored_exit_tool_cancels_the_exit_of_a_succeeding_one() -> None:
    # Haystack: any exit-condition tool that errored in the step cancels the exit
    model = ScriptedChatModel([
        {"content": "", "tool_calls": [call("finish", {"answer": "a"}, "c1"),
                                       call("search", {"q": "x"}, "c2")]},
        "after the failure",
    ])
    agent = create_agent(model, tools=[finish, tool(broken_search, name="search")],
                         exit_conditions=["finish", "search", "text"])
    out = agent.run("go")
    assert len(model.calls) == 2 and out["exit_reason"] == "text"


def test_check_exit_conditions_reads_replies_and_tool_messages() -> None:
    from threadloom.messages import BaseMessage

    agent = create_agent(ScriptedChatModel(["x"]), tools=[finish, search],
                         exit_conditions=["finish"])
    done, other = call("finish", {"answer": "a"}, "f1"), call("search", {"q": "x"}, "s1")
    ok = [BaseMessage.from_tool("ok", origin=done)]
    for calls in ([done, other], [other, done]):  # order of parallel calls does not matter
        replies = [BaseMessage.from_assistant(tool_calls=calls)]
        assert agent._check_exit_conditions(replies, ok) == "finish"
    failed = [BaseMessage.from_tool("boom", origin=done, error=True)]
    assert agent._check_exit_conditions(
        [BaseMessage.from_assistant(tool_calls=[other, done])], failed) is None
    sibling_failed = [BaseMessage.from_tool("boom", origin=other, error=True), *ok]
    assert agent._check_exit_conditions(
        [BaseMessage.from_assistant(tool_calls=[other, done])], sibling_failed) == "finish"


def test_return_direct_tool_ends_the_run() -> None:
    @tool(return_direct=True)
    def lookup(key: str) -> str:
        """Look a key up."""
        return f"value of {key}"

    model = ScriptedChatModel([{"content": "", "tool_calls": [call("lookup", {"key": "k"},
                                                                    "c1")]}])
    out = create_agent(model, tools=[lookup]).run("x")
    assert out["exit_reason"] == "lookup" and len(model.calls) == 1
    assert out["last_message"].text == "value of k"


def test_h16_unknown_tool_name() -> None:
    def get_weather(city: str) -> str:
        """Weather."""
        return "sunny"

    def get_time() -> str:
        """Time."""
        return "noon"

    pending_seen: list[list[str]] = []

    def before_tool(state: Any) -> None:
        pending_seen.append([c["id"] for c in pending_tool_calls(state)])

    model = ScriptedChatModel([
        {"content": "", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "execute_python",
                                                          "arguments": "{}"}},
            {"id": "c2", "type": "function", "function": {"name": "get_time",
                                                          "arguments": "{}"}}]},
        "It is noon.",
    ])
    agent = create_agent(model, tools=[get_weather, get_time],
                         hooks={"before_tool": [before_tool]})
    out = agent.run("what time is it")
    first, second = [m for m in out["messages"] if m.type == "tool"]
    assert first.tool_call_id == "c1" and first.status == "error"
    assert "execute_python" in first.text
    assert "get_weather" in first.text and "get_time" in first.text
    assert second.tool_call_id == "c2" and second.text == "noon"
    assert pending_seen == [["c2"]]  # hooks never see the unknown call as pending
    assert out["tool_call_counts"] == {"get_time": 1, "get_weather": 0}  # as Haystack
    assert len(model.calls) == 2 and out["exit_reason"] == "text"


def test_max_agent_steps_skips_on_exit_but_runs_after_run() -> None:
    events: list[str] = []
    loop = ScriptedChatModel(lambda m, t: AIMessage(
        content="", tool_calls=[call("search", {"q": "x"}, f"c{len(m)}")]))
    agent = create_agent(loop, tools=[search], max_agent_steps=3, hooks={
        "on_exit": [lambda s: events.append("on_exit")],
        "after_run": [lambda s: events.append(f"after_run:{s.get('exit_reason')}")]})
    out = agent.run("x")
    assert out["exit_reason"] == "max_agent_steps"
    assert out["step_count"] == 3 and len(loop.calls) == 3
    assert events == ["after_run:max_agent_steps"]


def test_on_exit_continue_is_still_bounded_by_max_agent_steps() -> None:
    model = ScriptedChatModel(lambda m, t: "again")
    agent = create_agent(model, max_agent_steps=4,
                         hooks={"on_exit": [lambda s: {"continue_run": True}]})
    out = agent.run("x")
    assert out["exit_reason"] == "max_agent_steps" and len(model.calls) == 4


def test_stop_run_value_becomes_exit_reason() -> None:
    def after_tool(state: Any) -> None:
        if any(m.type == "tool" and "secret" in m.text for m in state.get("messages")):
            state.set("stop_run", "leak_guard")

    model = ScriptedChatModel([{"content": "", "tool_calls": [call("search", {
        "q": "secret"}, "c1")]}])
    out = create_agent(model, tools=[search], hooks={"after_tool": [after_tool]}).run("x")
    assert out["exit_reason"] == "leak_guard" and len(model.calls) == 1


def test_stop_run_before_the_model_call() -> None:
    model = ScriptedChatModel(["never"])
    out = create_agent(model, hooks={"before_llm": [lambda s: {"stop_run": "budget"}]}).run("x")
    assert out["exit_reason"] == "budget" and model.calls == []


def test_jump_to_end_from_before_llm_with_own_reply() -> None:
    def guard(state: Any) -> dict[str, Any] | None:
        if "password" in state.get("messages")[-1].text:
            return {"messages": [AIMessage("I cannot help with passwords.")], "jump_to": "end"}
        return None

    model = ScriptedChatModel(["normal answer"])
    agent = create_agent(model, hooks={"before_llm": [guard]})
    out = agent.run("what is the admin password?")
    assert out["exit_reason"] == "jump_to_end" and model.calls == []
    assert out["last_message"].text == "I cannot help with passwords."
    assert agent.run("hello")["last_message"].text == "normal answer"


def test_jump_to_model_after_llm_skips_the_tools_and_answers_the_calls() -> None:
    ran: list[str] = []

    def spy(q: str) -> str:
        """Spy."""
        ran.append(q)
        return q

    def after_llm(state: Any) -> dict[str, Any] | None:
        last = state.get("messages")[-1]
        return {"jump_to": "model"} if last.tool_calls else None

    model = ScriptedChatModel([{"content": "", "tool_calls": [call("spy", {"q": "a"}, "c1")]},
                               "fine"])
    out = create_agent(model, tools=[spy], hooks={"after_llm": [after_llm]}).run("x")
    assert ran == [] and out["exit_reason"] == "text"
    skipped = [m for m in model.calls[1]["messages"] if m.type == "tool"]
    assert len(skipped) == 1 and skipped[0].status == "error"
    assert "not run" in skipped[0].text


def test_jump_to_tools_from_before_llm_runs_pending_calls() -> None:
    ran: list[str] = []

    def spy(q: str) -> str:
        """Spy."""
        ran.append(q)
        return q

    history = [("user", "x"), AIMessage(content="", tool_calls=[call("spy", {"q": "a"}, "c9")])]
    first = [True]

    def before_llm(state: Any) -> dict[str, Any] | None:
        if first[0]:
            first[0] = False
            return {"jump_to": "tools"}
        return None

    model = ScriptedChatModel(["done"])
    out = create_agent(model, tools=[spy], hooks={"before_llm": [before_llm]}).invoke(
        {"messages": history})
    assert ran == ["a"] and out["exit_reason"] == "text" and len(model.calls) == 1
