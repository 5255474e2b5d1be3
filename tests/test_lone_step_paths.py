"""The lone-step shortcuts give what the general step code gives.

``next_tasks`` routes a lone task whose node has only static edges, or one branch and no
static edge, without the general loop (``route_all``); ``RunLoop._loop`` builds such a
task with ``lone_task`` instead of ``make_tasks``'s loop. Both must be invisible.
"""

from __future__ import annotations

import asyncio
import operator
from typing import Annotated, Any, TypedDict

import pytest

from threadloom import InMemoryCheckpointer, StateGraph
from threadloom.engine.routing import next_tasks, route_all
from threadloom.engine.tasks import Task, TaskResult
from threadloom.errors import InvalidRouteError
from threadloom.types import END, START, Send


class S(TypedDict):
    n: Annotated[int, operator.add]
    route: Any


async def _node(state: S) -> dict[str, Any]:
    return {"n": 1}


def _graph(path: Any, path_map: Any = None, edges: tuple[str, ...] = ()) -> Any:
    builder = StateGraph(S)
    for name in ("a", "b", "c"):
        builder.add_node(name, _node)
    builder.add_edge(START, "a")
    if path is None:  # b and c reachable (only a's routing is looked at)
        builder.add_edge(START, "b")
        builder.add_edge(START, "c")
    for target in edges:
        builder.add_edge("a", target)
    if path is not None:
        builder.add_conditional_edges("a", path, path_map)
    return builder.compile()


async def _both(graph: Any, route: Any) -> tuple[Any, Any]:
    loop = graph._loop({"configurable": {}}, None, frozenset(), "sync", None, False)
    loop.values.update({"n": 1, "route": route})
    loop.step = 0
    tasks = [Task("a", graph.nodes["a"], None, "0:0", 0, 5)]
    results = [TaskResult([("n", 1)], [])]
    out = []
    for fn in (next_tasks, route_all):
        try:
            planned = await fn(loop, tasks, results)
            out.append((planned.tasks, planned.sends, dict(planned.pending)))
        except InvalidRouteError as exc:
            out.append(("error", str(exc)))
    return out[0], out[1]


async def _async_path(state: S) -> Any:
    return state["route"]


ROUTES: list[Any] = ["b", END, ["b", "c"], ("c", "b", "c"), Send("b", 3), [Send("c", 1), "b"],
                     "nowhere", None, 7]


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("path", ["sync", "async", "awaitable"])
def test_lone_branch_routes_as_the_general_loop(route: Any, path: str) -> None:
    fn: Any = {
        "sync": lambda s: s["route"],
        "async": _async_path,
        "awaitable": lambda s: _async_path(s),
    }[path]
    fast, general = asyncio.run(_both(_graph(fn), route))
    assert fast == general


@pytest.mark.parametrize("route", ["x", "y", END, "z", ["x", "y"]])
def test_lone_branch_with_a_path_map_routes_as_the_general_loop(route: Any) -> None:
    graph = _graph(lambda s: s["route"], {"x": "b", "y": "c", END: END})
    fast, general = asyncio.run(_both(graph, route))
    assert fast == general


@pytest.mark.parametrize("edges", [("b",), ("b", "c"), (END,), ("c", END, "b")])
def test_lone_static_edges_route_as_the_general_loop(edges: tuple[str, ...]) -> None:
    fast, general = asyncio.run(_both(_graph(None, edges=edges), None))
    assert fast == general


def test_branch_and_static_edge_take_the_general_loop() -> None:
    fast, general = asyncio.run(_both(_graph(lambda s: "c", edges=("b",)), None))
    assert fast == general == (["b", "c"], [], {})


def _loop_graph(checkpointer: Any = None) -> Any:
    builder = StateGraph(S)
    builder.add_node("a", _node)
    builder.add_node("b", _node)
    builder.add_edge(START, "a")
    builder.add_conditional_edges("a", lambda s: "b")
    builder.add_conditional_edges("b", lambda s: END if s["n"] >= 6 else "a", {"a": "a", END: END})
    return builder.compile(checkpointer=checkpointer)


def _strip_ids(event: Any) -> Any:
    if isinstance(event, tuple) and event[0] == "debug":
        payload = dict(event[1]["payload"])
        payload.pop("id")
        return ("debug", {**event[1], "payload": payload, "timestamp": None})
    return event


def test_lone_steps_stream_as_the_general_steps() -> None:
    """A run without a checkpointer (lone_task, lone routes) streams the same events and
    ends in the same state as a run with one (make_tasks's general loop: hashed ids)."""
    modes = ["values", "updates", "debug"]
    fast = list(_loop_graph().stream({"n": 0}, stream_mode=modes))
    general = list(_loop_graph(InMemoryCheckpointer()).stream(
        {"n": 0}, {"configurable": {"thread_id": "t"}}, stream_mode=modes))
    debug_general = [e for e in general if e[0] == "debug" and e[1]["type"] != "checkpoint"]
    rest_general = [e for e in general if e[0] != "debug"]
    assert [_strip_ids(e) for e in fast if e[0] == "debug"] == [
        _strip_ids(e) for e in debug_general]
    assert [e for e in fast if e[0] != "debug"] == rest_general
    assert _loop_graph().invoke({"n": 0}) == {"n": 6}
