"""The builder and compile-time checks."""

from __future__ import annotations

import operator
from typing import Annotated, Literal, TypedDict

import pytest

from threadloom import END, START, Command, StateGraph
from threadloom.errors import GraphBuildError, GraphValidationError


class S(TypedDict):
    n: int
    path: Annotated[list[str], operator.add]


def step(name):
    def fn(s):
        return {"path": [name]}

    fn.__name__ = name
    return fn


def test_node_forms_function_async_callable_object_and_named():
    class Obj:
        async def __call__(self, state):
            return {"path": ["obj"]}

    async def async_node(s):
        return {"path": ["async"]}

    g = StateGraph(S)
    g.add_node(step("plain"))
    g.add_node("async_node", async_node)
    g.add_node("obj", Obj())
    g.add_edge(START, "plain")
    g.add_edge("plain", "async_node")
    g.add_edge("async_node", "obj")
    assert g.compile().invoke({"n": 0})["path"] == ["plain", "async", "obj"]


def test_join_edge_waits_for_both_branches():
    g = StateGraph(S)
    for name in ("a", "b1", "b2", "c"):
        g.add_node(step(name))
    g.add_edge(START, "a")
    g.add_edge(START, "b1")
    g.add_edge("b1", "b2")
    g.add_edge(["a", "b2"], "c")
    path = g.compile().invoke({"n": 0})["path"]
    assert path.count("c") == 1
    assert path.index("c") > path.index("b2")


def test_conditional_edges_with_and_without_path_map():
    def route(s):
        return "big" if s["n"] > 5 else "small"

    for path_map in ({"big": "yes", "small": "no"}, None):
        g = StateGraph(S)
        g.add_node(step("start"))
        g.add_node(step("yes"))
        g.add_node(step("no"))
        if path_map is None:
            g.add_conditional_edges("start", lambda s: "yes" if s["n"] > 5 else "no")
        else:
            g.add_conditional_edges("start", route, path_map)
        g.add_edge(START, "start")
        app = g.compile()
        assert app.invoke({"n": 10})["path"] == ["start", "yes"]
        assert app.invoke({"n": 1})["path"] == ["start", "no"]


def test_path_map_as_list_and_end():
    g = StateGraph(S)
    g.add_node(step("loop"))
    g.add_conditional_edges("loop", lambda s: "loop" if len(s["path"]) < 3 else END, ["loop", END])
    g.add_edge(START, "loop")
    assert g.compile().invoke({"n": 0})["path"] == ["loop"] * 3


def test_add_sequence_and_named_pairs():
    g = StateGraph(S)
    g.add_sequence([step("one"), ("two", step("x")), step("three")])
    g.add_edge(START, "one")
    assert g.compile().invoke({"n": 0})["path"] == ["one", "x", "three"]


def test_command_goto_with_declared_destinations():
    def decide(s) -> Command[Literal["left", "right"]]:
        return Command(update={"n": 1}, goto="right")

    g = StateGraph(S)
    g.add_node("decide", decide)
    g.add_node(step("left"))
    g.add_node(step("right"))
    g.add_edge(START, "decide")
    out = g.compile().invoke({"n": 0})
    assert out == {"n": 1, "path": ["right"]}


def test_compile_refuses_edge_to_unknown_node():
    g = StateGraph(S)
    g.add_node(step("a"))
    g.add_edge(START, "a")
    g.add_edge("a", "ghost")
    with pytest.raises(GraphValidationError, match="ghost") as info:
        g.compile()
    assert info.value.node == "ghost"


def test_compile_refuses_graph_without_entry_and_unknown_path_map_target():
    g = StateGraph(S)
    g.add_node(step("a"))
    with pytest.raises(GraphValidationError, match="entry point"):
        g.compile()
    g2 = StateGraph(S)
    g2.add_node(step("a"))
    g2.add_edge(START, "a")
    g2.add_conditional_edges("a", lambda s: "x", {"x": "nowhere"})
    with pytest.raises(GraphValidationError, match="nowhere"):
        g2.compile()


def test_bad_edges_at_build_time():
    g = StateGraph(S)
    with pytest.raises(GraphBuildError):
        g.add_edge(END, "a")
    with pytest.raises(GraphBuildError):
        g.add_edge("a", START)
    with pytest.raises(GraphBuildError, match="already"):
        g.add_node(step("a"))
        g.add_node(step("a"))


def test_draw_mermaid_shows_nodes_and_conditional_edges():
    g = StateGraph(S)
    g.add_node(step("agent"))
    g.add_node(step("tools"))
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", lambda s: END, {"go": "tools", "stop": END})
    g.add_edge("tools", "agent")
    text = g.compile().get_graph().draw_mermaid()
    assert text.splitlines()[:6] == ["---", "config:", "  flowchart:", "    curve: linear",
                                     "---", "graph TD;"]  # LangGraph's front matter
    assert "__start__ --> agent;" in text
    assert "agent -. &nbsp;go&nbsp; .-> tools;" in text
    assert "tools --> agent;" in text


def test_draw_png_is_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    g = StateGraph(S)
    g.add_node(step("a"))
    g.add_edge(START, "a")
    path = tmp_path / "g.png"
    data = g.compile().get_graph().draw_png(str(path))
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert path.read_bytes() == data


@pytest.mark.parametrize("name", ["a", "__start__", "exit_check", "lookup_customer_orders",
                                  "web_search_with_a_long_name", "x" * 40, "w" * 30,
                                  "a much longer name with spaces in it", "y" * 200])
def test_png_node_labels_fit_inside_their_circles(name):
    # A new user's long node name ran past its circle and off the image.
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from threadloom.engine.drawing import _RADIUS, _fit_label, _text_width

    text, size = _fit_label(name, _text_width)
    assert 5 <= size <= 8
    if len(name) < 120:
        # only broken into lines (a space at a break dropped), nothing lost
        assert text.replace("\n", "").replace(" ", "") == name.replace(" ", "")
    else:
        assert text.endswith("\u2026")
    fig = plt.figure(dpi=72)  # one pixel per point
    try:
        drawn = fig.text(0.5, 0.5, text, fontsize=size, ha="center", va="center",
                         multialignment="center")
        box = drawn.get_window_extent(fig.canvas.get_renderer())
    finally:
        plt.close(fig)
    assert box.width**2 + box.height**2 <= (2 * _RADIUS) ** 2, (text, box)


def _support_graph():
    g = StateGraph(S)
    for name in ("classify", "refunds", "answer", "spam_filter", "web", "kb", "join",
                 "compose"):
        g.add_node(step(name))
    g.add_edge(START, "classify")
    g.add_conditional_edges("classify", lambda s: "x", {
        "is_refund": "refunds", "is_question": "answer", "is_spam": "spam_filter"})
    g.add_conditional_edges("answer", lambda s: "web", ["web", "kb"])
    g.add_edge("web", "join")
    g.add_edge("kb", "join")
    g.add_edge("join", "compose")
    g.add_edge("compose", END)
    g.add_edge("refunds", END)
    g.add_edge("spam_filter", END)
    g.add_conditional_edges("compose", lambda s: END, {"retry": "classify", "done": END})
    return g.compile(name="support").get_graph()


def _segment_distance(p, a, b) -> float:
    (px, py), (ax, ay), (bx, by) = p, a, b
    dx, dy = bx - ax, by - ay
    t = max(0.0, min(1.0, ((px - ax) * dx + (py - ay) * dy) / (dx * dx + dy * dy)))
    return ((px - ax - t * dx) ** 2 + (py - ay - t * dy) ** 2) ** 0.5


def test_png_layout_never_draws_an_edge_through_a_node():
    # Reported: refunds -> END was drawn straight through `web`, so it read as
    # refunds -> web -> END. Long edges now pass through slots of their own, and a loop
    # (compose -> classify) runs beside the layers.
    from threadloom.engine.drawing import _labels, _Layout

    drawn = _support_graph()
    layout = _Layout(drawn.to_networkx())
    assert ("compose", "classify") in layout.loops
    real = list(drawn.to_networkx().nodes)
    ys = {layout.pos[n][1] for n in real}
    assert len(ys) == 7  # START, classify, branches, web/kb, join, compose, END: layers
    for a, b in drawn.to_networkx().edges:
        points = [layout.pos[p] for p in layout.route(a, b)]
        for start, end in zip(points, points[1:], strict=False):
            for node in real:
                if node in (a, b):
                    continue
                assert _segment_distance(layout.pos[node], start, end) > 0.3, (a, b, node)
    labels = _labels(drawn.edges)
    assert labels[("classify", "refunds")] == "is_refund"
    # a loop beside the layers is labelled on its own trunk, away from every node
    from threadloom.engine.drawing import _label_anchor

    lx, ly = _label_anchor(layout, "compose", "classify")
    assert all(((lx - x) ** 2 + (ly - y) ** 2) ** 0.5 > 0.5
               for n, (x, y) in layout.pos.items() if n in real)
    assert labels[("compose", "classify")] == "retry"
    assert ("join", "compose") not in labels


def test_a_branch_without_path_map_may_loop_to_its_own_node_and_is_drawn_so():
    # Reported: the README's first graph (`inc` routes to itself or END) was drawn
    # without its inc -> inc edge, in Mermaid and in the PNG.
    from threadloom.engine.drawing import _Layout

    g = StateGraph(S)
    g.add_node(step("inc"))
    g.add_edge(START, "inc")
    g.add_conditional_edges("inc", lambda s: END)
    drawn = g.compile().get_graph()
    assert "\tinc -.-> inc;" in drawn.draw_mermaid()
    layout = _Layout(drawn.to_networkx())
    route = layout.route("inc", "inc")
    assert len(route) == 4 and route[0] == route[-1] == "inc"
    x, y = layout.pos["inc"]
    assert all(layout.pos[p][0] > x + 0.3 for p in route[1:-1])  # beside the node
