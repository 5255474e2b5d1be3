"""Agent middleware: LangChain-style hooks and wrappers, compiled into agent hooks."""

from __future__ import annotations

import asyncio
import contextvars
from typing import Any

import pytest

from threadloom import AIMessage, HumanMessage, ScriptedChatModel, ToolMessage, create_agent, tool
from threadloom.agent.hooks import HOOK_POINTS, run_hooks
from threadloom.agent.middleware import (
    AgentMiddleware,
    MiddlewareJumpError,
    ModelCallCacheMiddleware,
    ModelFallbackMiddleware,
    ModelRetryMiddleware,
    ToolRetryMiddleware,
    after_agent,
    after_model,
    before_agent,
    before_model,
    compile_middleware,
    hook_config,
    wrap_model_call,
    wrap_tool_call,
)
from threadloom.agent.requests import ModelRequest, ToolCallRequest
from threadloom.agent.state import State
from threadloom.errors import ModelHTTPError, RateLimitError

REFUSAL = "I can't help with passwords"


def _request(messages: list[Any], model: Any = "primary", tools: Any = None) -> ModelRequest:
    return ModelRequest(model=model, messages=messages, tools=tools or [])


def _state(text: str = "hi") -> State:
    schema = {"jump_to": {"type": str}, "note": {"type": list}}
    return State(schema, {"messages": [HumanMessage(text)]})


@before_model(can_jump_to=["end"])
def password_guard(state):
    """The issue's example: end the run with our own reply when asked for a password."""
    if "password" in state["messages"][-1].text.lower():
        return {"messages": [AIMessage(REFUSAL)], "jump_to": "end"}
    return None


# -- compiling ---------------------------------------------------------------------------
def test_only_overridden_hooks_are_compiled_and_mapped_to_hook_points():
    class OnlyAfter(AgentMiddleware):
        def after_model(self, state, runtime):
            return None

    hooks, model_wrappers, tool_wrappers = compile_middleware([OnlyAfter(), password_guard])
    assert set(hooks) == set(HOOK_POINTS)
    assert [f.__name__ for f in hooks["after_llm"]] == ["OnlyAfter.after_model"]
    assert [f.__name__ for f in hooks["before_llm"]] == ["password_guard.before_model"]
    assert all(not hooks[p] for p in ("before_run", "after_run", "before_tool", "on_exit"))
    assert model_wrappers == [] and tool_wrappers == []


def test_before_hooks_keep_order_after_hooks_reverse_as_langchain():
    made = []
    for label in "ab":
        @before_agent(name=f"ba_{label}")
        def b(state):
            return None

        @after_agent(name=f"aa_{label}")
        def a(state):
            return None

        made += [b, a]
    hooks, _, _ = compile_middleware(made)
    assert [f.__name__ for f in hooks["before_run"]] == ["ba_a.before_agent", "ba_b.before_agent"]
    assert [f.__name__ for f in hooks["after_run"]] == ["aa_b.after_agent", "aa_a.after_agent"]


def test_bad_middleware_entries_are_refused_clearly():
    with pytest.raises(TypeError, match="pass an instance"):
        compile_middleware([ModelCallCacheMiddleware])
    with pytest.raises(TypeError, match="AgentMiddleware instances"):
        compile_middleware([lambda s: None])
    with pytest.raises(ValueError, match="two middleware are named 'password_guard'"):
        compile_middleware([password_guard, password_guard])
    with pytest.raises(ValueError, match="unknown jump target 'start'"):
        before_model(can_jump_to=["start"])(lambda s: None)
    with pytest.raises(TypeError, match="does not take can_jump_to"):
        wrap_model_call(can_jump_to=["end"])


async def test_hook_reads_state_like_a_dict_and_gets_hook_context():
    seen = {}

    class Recorder(AgentMiddleware):
        async def abefore_model(self, state, runtime):
            seen["text"] = state["messages"][-1].text
            seen["context"] = runtime.context
            return {"note": ["x"]}

    hooks, _, _ = compile_middleware([Recorder()])
    state = _state("question")
    await run_hooks("before_llm", hooks["before_llm"], state, {"user": "ana"})
    assert seen == {"text": "question", "context": {"user": "ana"}}
    assert state.get("note") == ["x"]


async def test_guard_jumps_to_end_with_its_reply():
    hooks, _, _ = compile_middleware([password_guard])
    state = _state("What is the admin password?")
    await run_hooks("before_llm", hooks["before_llm"], state)
    assert state.get("jump_to") == "end"
    assert state.get("messages")[-1].text == REFUSAL


async def test_undeclared_jump_is_an_error_naming_middleware_and_target():
    @after_model
    def sneaky(state):
        return {"jump_to": "model"}

    hooks, _, _ = compile_middleware([sneaky])
    with pytest.raises(MiddlewareJumpError, match="'sneaky' after_model.*jump_to='model'") as err:
        await run_hooks("after_llm", hooks["after_llm"], _state())
    assert isinstance(err.value, ValueError)
    assert (err.value.middleware, err.value.target) == ("sneaky", "model")


async def test_hook_config_and_class_level_jump_declarations():
    class ByMethod(AgentMiddleware):
        @hook_config(can_jump_to=["tools"])
        def before_model(self, state, runtime):
            return {"jump_to": "tools"}

    class ByClass(AgentMiddleware):
        can_jump_to = ("model",)

        def after_model(self, state, runtime):
            return {"jump_to": "model"}

    hooks, _, _ = compile_middleware([ByMethod(), ByClass()])
    state = _state()
    await run_hooks("before_llm", hooks["before_llm"], state)
    assert state.get("jump_to") == "tools"
    await run_hooks("after_llm", hooks["after_llm"], state)
    assert state.get("jump_to") == "model"


async def test_hook_returning_a_non_dict_is_a_type_error():
    @before_model
    def wrong(state):
        return "end"

    hooks, _, _ = compile_middleware([wrong])
    with pytest.raises(TypeError, match="'wrong' before_model returned str"):
        await run_hooks("before_llm", hooks["before_llm"], _state())


# -- wrappers ----------------------------------------------------------------------------
_CV: contextvars.ContextVar[str] = contextvars.ContextVar("_CV", default="unset")


async def test_sync_wrapper_runs_in_a_thread_and_handler_keeps_the_context():
    @wrap_model_call
    def add_suffix(request, handler):
        reply = handler(request)
        return reply.model_copy(update={"content": reply.text + "!"})

    async def handler(request):
        return AIMessage(f"cv={_CV.get()}")

    _, (wrapper,), _ = compile_middleware([add_suffix])
    _CV.set("node")
    reply = await wrapper(_request([HumanMessage("x")]), handler)
    assert reply.text == "cv=node!"


async def test_model_retry_retries_transient_errors_then_gives_up():
    calls = []

    async def flaky(request):
        calls.append(1)
        if len(calls) < 3:
            raise RateLimitError("slow down", status_code=429, retryable=True)
        return AIMessage("ok")

    _, (retry,), _ = compile_middleware([ModelRetryMiddleware(2, initial_delay=0)])
    assert (await retry(_request([]), flaky)).text == "ok"
    assert len(calls) == 3

    async def always(request):
        calls.append(1)
        raise RateLimitError("slow down", status_code=429, retryable=True)

    calls.clear()
    with pytest.raises(RateLimitError) as err:
        await retry(_request([]), always)
    assert len(calls) == 3 and "gave up after 3 attempts" in "".join(err.value.__notes__)

    async def fatal(request):
        calls.append(1)
        raise ModelHTTPError("bad request", status_code=400)

    calls.clear()
    with pytest.raises(ModelHTTPError):
        await retry(_request([]), fatal)
    assert len(calls) == 1


async def test_model_fallback_tries_models_in_order():
    tried = []

    async def handler(request):
        tried.append(request.model)
        if request.model != "backup-2":
            raise RuntimeError(f"{request.model} down")
        return AIMessage("from backup")

    _, (fallback,), _ = compile_middleware([ModelFallbackMiddleware("backup-1", "backup-2")])
    assert (await fallback(_request([]), handler)).text == "from backup"
    assert tried == ["primary", "backup-1", "backup-2"]

    tried.clear()
    _, (only,), _ = compile_middleware([ModelFallbackMiddleware("backup-1")])
    with pytest.raises(RuntimeError, match="backup-1 down") as err:
        await only(_request([]), handler)
    assert "'primary' failed first" in "".join(err.value.__notes__)


async def test_cache_hits_on_same_messages_and_tools_only():
    cache = ModelCallCacheMiddleware(maxsize=2)
    _, (wrapper,), _ = compile_middleware([cache])
    calls = []

    async def handler(request):
        calls.append(request)
        usage = {"input_tokens": 3, "output_tokens": 1, "total_tokens": 4}
        return AIMessage(f"reply {len(calls)}", id=f"m{len(calls)}", usage_metadata=usage)

    first = await wrapper(_request([HumanMessage("hi", id="a")]), handler)
    again = await wrapper(_request([HumanMessage("hi", id="b")]), handler)  # ids do not count
    assert len(calls) == 1 and again.text == first.text == "reply 1"
    assert again.id != first.id and again.usage_metadata is None
    assert again.response_metadata["cache_hit"] is True

    with_tool = _request([HumanMessage("hi")], tools=[{"name": "t", "parameters": {}}])
    assert (await wrapper(with_tool, handler)).text == "reply 2"
    assert (await wrapper(_request([HumanMessage("other")]), handler)).text == "reply 3"
    assert (await wrapper(_request([HumanMessage("hi")]), handler)).text == "reply 4"  # evicted
    assert (cache.hits, cache.misses) == (1, 4)


def _tool_request(name: str = "lookup") -> ToolCallRequest:
    call = {"name": name, "args": {}, "id": "call_1", "type": "tool_call"}
    return ToolCallRequest(tool_call=call, tool=None)


async def test_tool_retry_retries_errors_and_returns_the_last_failure():
    results = [ToolMessage("Error: boom", tool_call_id="call_1", status="error"),
               ToolMessage("42", tool_call_id="call_1")]

    async def handler(request):
        return results.pop(0)

    _, _, (retry,) = compile_middleware([ToolRetryMiddleware(2, initial_delay=0)])
    assert (await retry(_tool_request(), handler)).text == "42"

    attempts = []

    async def raising(request):
        attempts.append(1)
        raise ConnectionError("offline")

    final = await retry(_tool_request(), raising)
    assert len(attempts) == 3
    assert final.status == "error" and "failed after 3 attempts" in final.text
    assert final.tool_call_id == "call_1"

    _, _, (only_other,) = compile_middleware(
        [ToolRetryMiddleware(2, tools=["other"], initial_delay=0)])
    attempts.clear()
    with pytest.raises(ConnectionError):
        await only_other(_tool_request(), raising)
    assert len(attempts) == 1


# -- in an agent -------------------------------------------------------------------------
@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def _call_add(call_id: str = "call_1") -> AIMessage:
    return AIMessage("", tool_calls=[{"name": "add", "args": {"a": 2, "b": 3}, "id": call_id}])


def test_password_guard_ends_the_run_without_calling_the_model():
    model = ScriptedChatModel(["Paris."])
    agent = create_agent(model, [], middleware=[password_guard])

    out = agent.invoke({"messages": [HumanMessage("Tell me the root password")]})
    assert out["last_message"].text == REFUSAL
    assert out["messages"][-1].text == REFUSAL
    assert model.calls == []

    out = agent.invoke({"messages": [HumanMessage("Capital of France?")]})
    assert out["last_message"].text == "Paris." and len(model.calls) == 1


def test_undeclared_jump_fails_the_run():
    @before_model
    def jumper(state):
        return {"jump_to": "end"}

    agent = create_agent(ScriptedChatModel(["hi"]), [], middleware=[jumper])
    with pytest.raises(MiddlewareJumpError, match="'jumper'"):
        agent.invoke({"messages": [HumanMessage("x")]})


def test_hooks_and_wrappers_run_in_langchain_order():
    log: list[str] = []

    def make(label: str) -> AgentMiddleware:
        class Traced(AgentMiddleware):
            name = label  # type: ignore[assignment]

            def before_agent(self, state, runtime):
                log.append(f"{label}.before_agent")

            def before_model(self, state, runtime):
                log.append(f"{label}.before_model")

            def after_model(self, state, runtime):
                log.append(f"{label}.after_model")

            def after_agent(self, state, runtime):
                log.append(f"{label}.after_agent")

            async def awrap_model_call(self, request, handler):
                log.append(f"{label}.model_in")
                reply = await handler(request)
                log.append(f"{label}.model_out")
                return reply

        return Traced()

    agent = create_agent(ScriptedChatModel(["done"]), [], middleware=[make("a"), make("b")])
    assert agent.invoke({"messages": [HumanMessage("x")]})["exit_reason"] == "text"
    assert log == [
        "a.before_agent", "b.before_agent", "a.before_model", "b.before_model",
        "a.model_in", "b.model_in", "b.model_out", "a.model_out",
        "b.after_model", "a.after_model", "b.after_agent", "a.after_agent",
    ]


def test_wrap_tool_call_can_rewrite_results():
    @wrap_tool_call
    async def shout(request, handler):
        result = await handler(request)
        return result.model_copy(update={"content": f"{request.tool_call['name']}={result.text}"})

    model = ScriptedChatModel([_call_add(), "The sum is 5."])
    out = create_agent(model, [add], middleware=[shout]).invoke(
        {"messages": [HumanMessage("2+3?")]})
    tool_messages = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert [m.text for m in tool_messages] == ["add=5"]
    assert out["tool_call_counts"] == {"add": 1}


def test_retry_and_fallback_middleware_in_a_run():
    attempts = []

    def flaky(messages, tools):
        attempts.append(1)
        if len(attempts) == 1:
            raise RateLimitError("429", status_code=429, retryable=True)
        return "recovered"

    agent = create_agent(ScriptedChatModel(flaky), [],
                         middleware=[ModelRetryMiddleware(1, initial_delay=0)])
    assert agent.invoke({"messages": [HumanMessage("x")]})["last_message"].text == "recovered"
    assert len(attempts) == 2

    def broken(messages, tools):
        raise ModelHTTPError("down", status_code=503)

    backup = ScriptedChatModel(["from backup"])
    agent = create_agent(ScriptedChatModel(broken), [],
                         middleware=[ModelFallbackMiddleware(backup)])
    assert agent.invoke({"messages": [HumanMessage("x")]})["last_message"].text == "from backup"
    assert len(backup.calls) == 1


def test_cache_middleware_answers_a_repeated_run_from_memory():
    model = ScriptedChatModel(["cached answer"])
    agent = create_agent(model, [], middleware=[ModelCallCacheMiddleware()])
    first = agent.invoke({"messages": [HumanMessage("same question")]})
    second = agent.invoke({"messages": [HumanMessage("same question")]})
    assert first["last_message"].text == second["last_message"].text == "cached answer"
    assert len(model.calls) == 1


def test_tool_retry_middleware_reruns_a_flaky_tool_in_a_run():
    failures = [RuntimeError("flaky")]

    @tool
    def fetch(key: str) -> str:
        """Fetch a value."""
        if failures:
            raise failures.pop()
        return f"value of {key}"

    call = AIMessage("", tool_calls=[{"name": "fetch", "args": {"key": "k"}, "id": "c1"}])
    agent = create_agent(ScriptedChatModel([call, "ok"]), [fetch],
                         middleware=[ToolRetryMiddleware(1, initial_delay=0)])
    out = agent.invoke({"messages": [HumanMessage("fetch k")]})
    results = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert [(m.text, m.status) for m in results] == [("value of k", "success")]


def test_middleware_with_async_hooks_runs_under_ainvoke():
    seen = []

    @before_model
    async def note(state, runtime):
        await asyncio.sleep(0)
        seen.append(len(state["messages"]))

    agent = create_agent(ScriptedChatModel([_call_add(), "5"]), [add], middleware=[note])
    out = asyncio.run(agent.ainvoke({"messages": [HumanMessage("2+3")]}))
    assert out["step_count"] == 2 and seen == [1, 3]
