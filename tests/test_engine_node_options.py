"""Node options as LangGraph's: ``defer=True``, ``error_handler=`` (per node and through
``set_node_defaults``), a node raising ``CancelledError`` itself, and the ``Runtime``
object (generic, built by hand, merged, its context coerced to the ``context_schema``)."""

from __future__ import annotations

import asyncio
import operator
from dataclasses import dataclass
from typing import Annotated, Any

import pydantic
import pytest
from typing_extensions import TypedDict

from threadloom import END, START, Command, RetryPolicy, Runtime, StateGraph
from threadloom.engine.runtime import get_runtime
from threadloom.engine.runtime_info import DEFAULT_RUNTIME, ExecutionInfo, RunControl, ServerInfo
from threadloom.errors import NodeCancelledError, NodeError, RecordedNodeError


def _sorted_add(x: list[str], y: list[str]) -> list[str]:
    return sorted(x + y)


class Docs(TypedDict, total=False):
    query: str
    answer: str
    docs: Annotated[list[str], _sorted_add]


def _fan_out(join: bool) -> StateGraph:
    """rewrite -> (r1 -> analyzer, r2) -> qa (deferred): qa waits for the analyzer too."""
    g = StateGraph(Docs)
    g.add_node("rewrite", lambda s: {"query": f"q:{s['query']}"})
    g.add_node("analyzer", lambda s: {"query": f"a:{s['query']}"})
    g.add_node("r1", lambda s: {"docs": ["d1"]})
    g.add_node("r2", lambda s: {"docs": ["d2"]})
    g.add_node("qa", lambda s: {"answer": f"{s['query']}|{','.join(s['docs'])}"}, defer=True)
    g.add_edge(START, "rewrite")
    g.add_edge("rewrite", "r1")
    g.add_edge("rewrite", "r2")
    g.add_edge("r1", "analyzer")
    if join:
        g.add_edge(["r1", "r2"], "qa")
    else:
        g.add_edge("r1", "qa")
        g.add_edge("r2", "qa")
    g.add_edge("qa", END)
    return g


@pytest.mark.parametrize("join", [True, False])
def test_deferred_node_runs_once_nothing_else_is_left(join: bool) -> None:
    app = _fan_out(join).compile()
    steps = [next(iter(c)) for c in app.stream({"query": "x"})]
    assert steps == ["rewrite", "r1", "r2", "analyzer", "qa"]  # qa after the analyzer
    assert app.invoke({"query": "x"})["answer"] == "a:q:x|d1,d2"


def test_deferred_trigger_survives_a_pause(checkpointer) -> None:
    app = _fan_out(join=False).compile(checkpointer=checkpointer, interrupt_before=["analyzer"])
    config = {"configurable": {"thread_id": "defer"}}
    app.invoke({"query": "x"}, config)
    assert app.get_state(config).next == ("analyzer",)  # qa waits, saved with the step
    assert [next(iter(c)) for c in app.stream(None, config)] == ["analyzer", "qa"]
    assert app.get_state(config).values["answer"] == "a:q:x|d1,d2"


async def test_deferred_node_async() -> None:
    app = _fan_out(join=True).compile()
    assert (await app.ainvoke({"query": "y"}))["answer"] == "a:q:y|d1,d2"


class Foo(TypedDict):
    foo: str


def _boom(state: Foo) -> Foo:
    raise ValueError("boom")


def test_error_handler_runs_after_retries_and_routes() -> None:
    attempts: list[int] = []
    seen: list[NodeError] = []

    def failing(state: Foo) -> Foo:
        attempts.append(1)
        raise ConnectionError("down")

    def handler(state: Foo, error: NodeError) -> Command:
        seen.append(error)
        return Command(update={"foo": "handled"}, goto="after")

    g = StateGraph(Foo)
    g.add_node("failing", failing, error_handler=handler,
               retry_policy=RetryPolicy(max_attempts=2, initial_interval=0.0, jitter=False))
    g.add_node("after", lambda s: {"foo": s["foo"] + "_after"})
    g.add_node("never", lambda s: {"foo": "the failed node's edge is not followed"})
    g.add_edge(START, "failing")
    g.add_edge("failing", "never")
    assert g.compile().invoke({"foo": ""}) == {"foo": "handled_after"}
    assert len(attempts) == 2
    assert seen[0].node == "failing" and isinstance(seen[0].error, ConnectionError)
    updates = [next(iter(c)) for c in g.compile().stream({"foo": ""})]
    assert updates == ["__error_handler__failing", "after"]


def test_error_handler_of_a_subgraph_node_and_handler_failure() -> None:
    sub = StateGraph(Foo).add_node("inner", _boom).add_edge(START, "inner").compile()
    parent = StateGraph(Foo).add_node("sub", sub, error_handler=lambda s: {"foo": "ok"})
    assert parent.add_edge(START, "sub").compile().invoke({"foo": ""}) == {"foo": "ok"}

    def broken(state: Foo) -> Foo:
        raise RuntimeError("handler failed")

    g = StateGraph(Foo).add_node("a", _boom, error_handler=broken).add_edge(START, "a")
    with pytest.raises(RuntimeError, match="handler failed"):
        g.compile().invoke({"foo": ""})


def test_default_error_handler_and_per_node_override() -> None:
    class S(TypedDict):
        route: str
        log: Annotated[list[str], operator.add]

    def default(state: S, error: NodeError, config: dict[str, Any]) -> S:
        return {"log": [f"default:{error.node}"]}

    g = (
        StateGraph(S)
        .set_node_defaults(error_handler=default)
        .add_node("route", lambda s: Command(goto=s["route"]))
        .add_node("a", _boom, error_handler=lambda s, error: {"log": [f"own:{error.node}"]})
        .add_node("b", _boom)
        .add_edge(START, "route")
    )
    app = g.compile()
    assert app.invoke({"route": "a", "log": []})["log"] == ["own:a"]
    assert app.invoke({"route": "b", "log": []})["log"] == ["default:b"]

    taken = StateGraph(Foo).set_node_defaults(error_handler=default)
    taken.add_node("__default_error_handler__", lambda s: s)
    taken.add_edge(START, "__default_error_handler__")
    with pytest.raises(ValueError, match="__default_error_handler__"):
        taken.compile()


def test_error_handler_does_not_catch_an_interrupt(checkpointer) -> None:
    from threadloom import interrupt

    g = StateGraph(Foo)
    g.add_node("a", lambda s: {"foo": interrupt("ask")}, error_handler=lambda s: {"foo": "no"})
    g.add_node("b", lambda s: {})
    g.add_edge(START, "a").add_edge(START, "b")
    app = g.compile(checkpointer=checkpointer)
    config = {"configurable": {"thread_id": "hitl"}}
    out = app.invoke({"foo": ""}, config)
    assert out["__interrupt__"][0].value == "ask"


def test_crashed_error_handler_runs_again_on_resume_not_the_node(checkpointer) -> None:
    calls = {"node": 0, "handler": 0}
    errors: list[NodeError] = []
    crash = [True]

    def node(state: Foo) -> Foo:
        calls["node"] += 1
        raise RuntimeError("boom")

    def handler(state: Foo, error: NodeError) -> Foo:
        calls["handler"] += 1
        errors.append(error)
        if crash[0]:
            raise RuntimeError("handler crash")
        return {"foo": "recovered"}

    g = StateGraph(Foo).set_node_defaults(error_handler=handler)
    app = g.add_node("fail", node).add_edge(START, "fail").compile(checkpointer=checkpointer)
    config = {"configurable": {"thread_id": "crash"}}
    with pytest.raises(RuntimeError, match="handler crash"):
        app.invoke({"foo": ""}, config)
    crash[0] = False
    assert app.invoke(None, config) == {"foo": "recovered"}
    assert calls == {"node": 1, "handler": 2}
    assert errors[1].node == "fail"
    assert isinstance(errors[1].error, RecordedNodeError)
    assert str(errors[1].error) == "boom" and errors[1].error.type_name == "RuntimeError"


async def test_node_raising_cancelled_error_fails_the_run() -> None:
    class S(TypedDict, total=False):
        vals: Annotated[list[str], operator.add]

    async def ok(state: S) -> S:
        return {"vals": ["ok"]}

    async def boom(state: S) -> S:
        raise asyncio.CancelledError("raised by the node")

    g = StateGraph(S).add_node("ok", ok).add_node("boom", boom)
    app = g.add_edge(START, "ok").add_edge(START, "boom").compile()
    with pytest.raises(NodeCancelledError) as info:
        await app.ainvoke({"vals": []})
    assert info.value.node == "boom"


def test_cancelling_a_run_still_cancels() -> None:
    async def slow(state: Foo) -> Foo:
        await asyncio.sleep(30)
        return {"foo": "late"}

    app = StateGraph(Foo).add_node("slow", slow).add_edge(START, "slow").compile()

    async def main() -> None:
        task = asyncio.ensure_future(app.ainvoke({"foo": ""}))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())


@dataclass
class Ctx:
    api_key: str
    timeout: int = 30


def test_runtime_is_generic_and_built_by_hand() -> None:
    assert Runtime[Ctx] is not None
    first = Runtime(context=Ctx("abc"))
    assert first.override(context=Ctx("def")).context.api_key == "def"
    assert first.merge(Runtime(context=None)).context.api_key == "abc"
    assert first.merge(Runtime(context=Ctx("xyz"))).context.api_key == "xyz"
    control = RunControl()
    assert Runtime(control=control).merge(Runtime()).control is control
    info = ServerInfo("asst", "graph")
    assert Runtime(server_info=info).merge(Runtime()).server_info is info
    assert DEFAULT_RUNTIME.server_info is None and DEFAULT_RUNTIME.heartbeat() is None
    with pytest.raises(RuntimeError):
        Runtime().patch_execution_info(node_attempt=2)
    patched = Runtime(execution_info=ExecutionInfo("c", "n", "t"))
    patched = patched.patch_execution_info(node_attempt=3)
    assert patched.execution_info is not None and patched.execution_info.node_attempt == 3


def _context_graph(schema: Any) -> Any:
    class S(TypedDict):
        message: str

    def node(state: S, runtime: Runtime[Any]) -> S:
        ctx = runtime.context
        return {"message": repr(ctx if isinstance(ctx, dict) else (ctx.api_key, ctx.timeout))}

    return StateGraph(S, context_schema=schema).add_node("n", node).add_edge(START, "n").compile()


def test_context_dict_is_coerced_to_the_context_schema() -> None:
    class PCtx(pydantic.BaseModel):
        api_key: str
        timeout: int = 30

    class TCtx(TypedDict):
        api_key: str

    for schema in (Ctx, PCtx):
        app = _context_graph(schema)
        assert app.invoke({"message": ""}, context={"api_key": "k"}) == {"message": "('k', 30)"}
        assert app.invoke({"message": ""}, context=schema(api_key="i", timeout=5)) == {
            "message": "('i', 5)"}
    assert _context_graph(TCtx).invoke({"message": ""}, context={"api_key": "t"}) == {
        "message": "{'api_key': 't'}"}
    with pytest.raises(TypeError):
        _context_graph(Ctx).invoke({"message": ""}, context={"other": 1})
    with pytest.raises(pydantic.ValidationError):
        _context_graph(PCtx).invoke({"message": ""}, context={"api_key": "k", "timeout": "x"})


def test_runtime_in_nodes_and_subgraphs(memory_checkpointer) -> None:
    seen: dict[str, Any] = {}

    class S(TypedDict, total=False):
        message: str

    def capture(name: str) -> Any:
        def node(state: S, runtime: Runtime[Ctx]) -> S:
            seen[name] = runtime
            seen[name + "_get"] = get_runtime(Ctx)
            return {"message": name}
        return node

    sub = StateGraph(S).add_node("inner", capture("inner")).add_edge(START, "inner").compile()
    g = StateGraph(S, context_schema=Ctx).add_node("main", capture("main")).add_node("sub", sub)
    app = g.add_edge(START, "main").add_edge("main", "sub")
    app = app.compile(checkpointer=memory_checkpointer)
    config = {"configurable": {"thread_id": "rt", "assistant_id": "a1", "graph_id": "g1"}}
    app.invoke({"message": ""}, config, context={"api_key": "k"})
    main, inner = seen["main"].execution_info, seen["inner"].execution_info
    assert main.checkpoint_ns == f"main:{main.task_id}"
    assert inner.checkpoint_ns.startswith("sub:") and inner.checkpoint_ns.endswith(
        f"|inner:{inner.task_id}")
    assert inner.thread_id == main.thread_id == "rt"
    assert seen["inner"].context == Ctx("k")  # the parent's coerced context
    assert seen["main"].server_info == ServerInfo("a1", "g1")
    assert seen["main_get"].execution_info == main
    app.invoke({"message": ""}, {"configurable": {"thread_id": "rt2"}})
    assert seen["main"].context is None and seen["main"].server_info is None


class Two(TypedDict, total=False):
    first: str
    second: str


def _two_steps(control: RunControl) -> StateGraph:
    def first(state: Two) -> Two:
        control.request_drain("sigterm")
        return {"first": "done"}

    g = StateGraph(Two).add_node("first", first).add_node("second", lambda s: {"second": "done"})
    return g.add_edge(START, "first").add_edge("first", "second")


@pytest.mark.parametrize("durability", ["sync", "exit"])
def test_drain_stops_between_steps_and_the_thread_continues(checkpointer, durability) -> None:
    from threadloom.errors import GraphDrained

    control = RunControl()
    app = _two_steps(control).compile(checkpointer=checkpointer)
    config = {"configurable": {"thread_id": "drain"}}
    with pytest.raises(GraphDrained, match="sigterm") as info:
        app.invoke({}, config, durability=durability, control=control)
    assert info.value.reason == "sigterm"
    assert app.get_state(config).next == ("second",)
    assert app.invoke(None, config, durability=durability) == {"first": "done", "second": "done"}


async def test_drain_in_the_last_step_ends_normally_and_before_the_first_stops() -> None:
    from threadloom.errors import GraphDrained

    control = RunControl()
    g = StateGraph(Two).add_node("only", lambda s: (control.request_drain(), {"first": "x"})[1])
    app = g.add_edge(START, "only").compile()
    assert await app.ainvoke({}, control=control) == {"first": "x"}
    ran: list[int] = []
    app = StateGraph(Two).add_node("n", lambda s: ran.append(1) or {}).add_edge(START, "n")
    with pytest.raises(GraphDrained, match="shutdown"):
        await app.compile().ainvoke({}, control=control)  # already drained
    assert ran == []
