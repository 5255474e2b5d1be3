"""Drawings in LangGraph's shape: ``draw_mermaid(with_styles=...)``, ``to_json()``,
``get_graph(xray=...)``, the edges found and listed in LangGraph's order."""

from __future__ import annotations

import operator
from typing import Annotated, Literal, TypedDict

from threadloom import END, START, Command, StateGraph


class S(TypedDict):
    path: Annotated[list[str], operator.add]


def step(name):
    def fn(s):
        return {"path": [name]}

    fn.__name__ = name
    return fn


def test_edges_sorted_then_end_edges_of_nodes_leading_nowhere():
    g = StateGraph(S)
    for name in ("up", "side", "other", "down"):
        g.add_node(step(name))
    g.add_edge(START, "up")
    g.add_edge("up", "side")
    g.add_edge("up", "other")
    g.add_edge(["up", "side"], "down")
    g.add_edge("down", END)
    text = g.compile().get_graph().draw_mermaid(with_styles=False)
    assert text == (
        "graph TD;\n\t__start__ --> up;\n\tside --> down;\n\tup --> down;\n"
        "\tup --> other;\n\tup --> side;\n\tdown --> __end__;\n\tother --> __end__;\n"
    )


def test_path_map_labels_self_loop_last_and_safe_ids():
    g = StateGraph(S)
    g.add_node("Call Tool", step("tool"))
    g.add_node("Researcher", step("r"))
    g.add_edge(START, "Researcher")
    g.add_conditional_edges("Researcher", lambda s: END,
                            {"redo": "Researcher", "tool": "Call Tool", "end": END})
    g.add_edge("Call Tool", "Researcher")
    text = g.compile().get_graph().draw_mermaid(with_styles=False)
    assert text.splitlines() == [
        "graph TD;",
        "\tCall\\20Tool --> Researcher;",
        "\tResearcher -. &nbsp;tool&nbsp; .-> Call\\20Tool;",
        "\tResearcher -. &nbsp;end&nbsp; .-> __end__;",
        "\t__start__ --> Researcher;",
        "\tResearcher -. &nbsp;redo&nbsp; .-> Researcher;",
    ]


def test_a_loop_with_no_way_out_ends_conditionally_at_its_last_dry_run_node():
    g = StateGraph(S)
    g.add_node(step("human"))
    g.add_node(step("agent"))
    g.add_edge(START, "human")
    g.add_edge("human", "agent")
    g.add_edge("agent", "human")
    data = g.compile().get_graph().to_json()
    assert data["edges"] == [
        {"source": "__start__", "target": "human"},
        {"source": "agent", "target": "human"},
        {"source": "human", "target": "agent"},
        {"source": "agent", "target": "__end__", "conditional": True},
    ]
    assert [n["id"] for n in data["nodes"]] == ["__start__", "human", "agent", "__end__"]
    assert data["nodes"][1] == {"id": "human", "type": "runnable", "data": {
        "id": ["langgraph", "_internal", "_runnable", "RunnableCallable"], "name": "human"}}
    assert data["nodes"][-1] == {"id": "__end__"}


def test_command_destinations_and_literal_path_are_conditional_edges():
    def worker(s) -> Command[Literal["worker", "__end__"]]:
        return Command(goto=END)

    def route(s) -> Literal["b"]:
        return "b"

    g = StateGraph(S)
    g.add_node("worker", worker)
    g.add_node(step("b"))
    g.add_edge(START, "worker")
    g.add_conditional_edges(START, route)
    text = g.compile().get_graph().draw_mermaid(with_styles=False)
    assert text.splitlines()[1:] == [
        "\t__start__ -.-> b;", "\t__start__ --> worker;", "\tworker -.-> __end__;",
        "\tb --> __end__;", "\tworker -.-> worker;"]  # a self-loop is listed last


def _child():
    c = StateGraph(S)
    c.add_node(step("one"))
    c.add_node(step("two"))
    c.add_edge(START, "one")
    c.add_conditional_edges("one", lambda s: END, {"0": "two", "1": END})
    c.add_edge("two", "one")
    return c.compile()


def test_xray_puts_subgraph_nodes_in_blocks_with_styles():
    g = StateGraph(S)
    g.add_node(step("p"))
    g.add_node("sub", _child())
    g.add_edge(START, "p")
    g.add_conditional_edges("p", lambda s: END, {"0": "sub", "1": END})
    g.add_edge("sub", "p")
    app = g.compile(interrupt_before=["p"])
    plain = app.get_graph()
    assert [n["id"] for n in plain.to_json()["nodes"]] == ["__start__", "p", "sub", "__end__"]
    assert plain.to_json()["nodes"][2]["data"]["id"][-1] == "CompiledStateGraph"
    text = app.get_graph(xray=True).draw_mermaid()
    assert text == "\n".join([
        "---", "config:", "  flowchart:", "    curve: linear", "---", "graph TD;",
        "\t__start__([<p>__start__</p>]):::first",
        "\tp(p<hr/><small><em>__interrupt = before</em></small>)",
        "\t__end__([<p>__end__</p>]):::last",
        "\t__start__ --> p;",
        "\tp -. &nbsp;1&nbsp; .-> __end__;",
        "\tp -. &nbsp;0&nbsp; .-> sub\\3a__start__;",
        "\tsub\\3a__end__ --> p;",
        "\tsubgraph sub",
        "\tsub\\3a__start__(<p>__start__</p>)",
        "\tsub\\3aone(one)",
        "\tsub\\3atwo(two)",
        "\tsub\\3a__end__(<p>__end__</p>)",
        "\tsub\\3a__start__ --> sub\\3aone;",
        "\tsub\\3aone -. &nbsp;1&nbsp; .-> sub\\3a__end__;",
        "\tsub\\3aone -. &nbsp;0&nbsp; .-> sub\\3atwo;",
        "\tsub\\3atwo --> sub\\3aone;",
        "\tend",
        "\tclassDef default fill:#f2f0ff,line-height:1.2",
        "\tclassDef first fill-opacity:0",
        "\tclassDef last fill:#bfb6fc",
    ]) + "\n"


def test_xray_trims_a_subgraph_start_with_one_way_out():
    c = StateGraph(S)
    c.add_node(step("up"))
    c.add_edge(START, "up")
    g = StateGraph(S)
    g.add_node("inner", c.compile())
    g.add_node(step("side"))
    g.add_edge(START, "inner")
    g.add_edge("inner", "side")
    text = g.compile().get_graph(xray=1).draw_mermaid(with_styles=False)
    assert text.splitlines()[1:] == [
        "\t__start__ --> inner\\3aup;", "\tinner\\3aup --> side;", "\tside --> __end__;"]


def test_a_node_that_leads_nowhere_is_drawn_dotted_to_each_deferred_node() -> None:
    # LangGraph 1.2: the dead end runs on into the deferred nodes, so no edge to END
    from typing import TypedDict

    from threadloom import StateGraph

    class S(TypedDict, total=False):
        q: str

    w = StateGraph(S)
    for name in ("rw", "a1", "r1"):
        w.add_node(name, lambda s: {})
    w.add_node("qa", lambda s: {}, defer=True)
    w.add_node("qb", lambda s: {}, defer=True)
    w.set_entry_point("rw")
    w.add_edge("rw", "r1")
    w.add_edge("r1", "a1")
    w.add_edge("rw", "qa")
    w.add_edge("rw", "qb")
    lines = [x.strip() for x in w.compile().get_graph().draw_mermaid(with_styles=False)
             .splitlines() if "-" in x]
    assert lines == ["__start__ --> rw;", "a1 -.-> qa;", "a1 -.-> qb;", "r1 --> a1;",
                     "rw --> qa;", "rw --> qb;", "rw --> r1;", "qa --> __end__;",
                     "qb --> __end__;"]
