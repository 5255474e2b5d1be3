"""Compile-time checks with networkx, and drawings (Mermaid text, PNG).

``validate`` refuses, naming the node: an edge to or from an unknown node, a node that
``START`` cannot reach, and a node from which ``END`` can never be reached. A node with
no outgoing edge, branch or declared destination ends its branch (as in LangGraph), so
it counts as reaching ``END``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import networkx as nx

from threadloom.engine.errors import GraphValidationError
from threadloom.engine.types import END, START

if TYPE_CHECKING:
    from threadloom.engine.graph import StateGraph


@dataclass(frozen=True, slots=True)
class DrawnEdge:
    """One edge of a drawing; ``conditional`` for branches and Command destinations."""

    source: str
    target: str
    conditional: bool = False
    label: str | None = None


def graph_edges(graph: StateGraph) -> list[DrawnEdge]:
    """Every edge of the graph, branches expanded through their path maps."""
    out = [DrawnEdge(a, b) for a, b in graph.edges]
    for target, groups in sorted(graph.joins.items()):
        for sources in sorted(groups):
            out.extend(DrawnEdge(s, target) for s in sources)
    for source, branches in graph.branches.items():
        for branch in branches:
            if branch.path_map is not None:
                for key, target in branch.path_map.items():
                    label = None if key == target else str(key)
                    out.append(DrawnEdge(source, target, True, label))
            else:
                targets = [n for n in graph.nodes if n != source] + [END]
                out.extend(DrawnEdge(source, t, True) for t in targets)
    for name, node in graph.nodes.items():
        out.extend(DrawnEdge(name, t, True) for t in node.destinations)
    return out


def to_networkx(graph: StateGraph) -> nx.DiGraph:
    """The graph as a ``networkx.DiGraph`` with ``START``/``END`` and implicit end edges."""
    g = nx.DiGraph()
    g.add_nodes_from([START, *graph.nodes, END])
    for edge in graph_edges(graph):
        g.add_edge(edge.source, edge.target, conditional=edge.conditional)
    for name in graph.nodes:
        if g.out_degree(name) == 0:
            g.add_edge(name, END, conditional=False, implicit=True)
    return g


def validate(graph: StateGraph, interrupt_nodes: Iterable[str] = ()) -> None:
    """Check a graph before it runs.

    Raises:
        GraphValidationError: naming the node at fault.
    """
    known = set(graph.nodes) | {START, END}
    for edge in graph_edges(graph):
        for end in (edge.source, edge.target):
            if end not in known:
                where = "a conditional edge" if edge.conditional else "an edge"
                raise GraphValidationError(
                    f"{where} from {edge.source!r} to {edge.target!r} names unknown node "
                    f"{end!r}; known nodes: {sorted(graph.nodes)}",
                    node=end,
                )
    for name in interrupt_nodes:
        if name not in graph.nodes:
            raise GraphValidationError(
                f"interrupt_before/after names unknown node {name!r}", node=name
            )
    if not graph.nodes:
        raise GraphValidationError("the graph has no nodes")
    g = to_networkx(graph)
    if g.out_degree(START) == 0:
        raise GraphValidationError(
            "the graph has no entry point: add an edge from START, e.g. "
            f"add_edge(START, {next(iter(graph.nodes))!r})"
        )
    reachable = nx.descendants(g, START)
    for name in graph.nodes:
        if name not in reachable:
            raise GraphValidationError(
                f"node {name!r} cannot be reached from START; add an edge to it", node=name
            )
    ends = nx.ancestors(g, END)
    for name in graph.nodes:
        if name not in ends:
            raise GraphValidationError(
                f"node {name!r} can never reach END: every path from it loops forever. "
                "Add a conditional edge that can go to END.",
                node=name,
            )


class DrawableGraph:
    """A read-only view of a compiled graph for drawing.

    Attributes:
        nodes: node names, ``START`` and ``END`` included.
        edges: ``DrawnEdge`` items.
    """

    def __init__(self, graph: StateGraph, name: str = "graph") -> None:
        self.name = name
        self.nodes = [START, *graph.nodes, END]
        self.edges = graph_edges(graph)
        self._nx = to_networkx(graph)

    def to_networkx(self) -> nx.DiGraph:
        """The underlying ``networkx.DiGraph``."""
        return self._nx

    def draw_mermaid(self) -> str:
        """Mermaid ``graph TD`` text: solid arrows for edges, dotted for conditional ones."""
        lines = ["---", f"title: {self.name}", "---", "graph TD;"]
        ids = {n: _mermaid_id(n) for n in self.nodes}
        lines.append(f"\t{ids[START]}([<p>__start__</p>]):::first")
        for name in self.nodes[1:-1]:
            lines.append(f"\t{ids[name]}({name})")
        lines.append(f"\t{ids[END]}([<p>__end__</p>]):::last")
        seen: set[tuple[str, str, str | None]] = set()
        for e in self.edges:
            key = (e.source, e.target, e.label)
            if key in seen:
                continue
            seen.add(key)
            arrow = "-.->" if e.conditional else "-->"
            if e.label:
                arrow = f"-. &nbsp;{e.label}&nbsp; .->"
            lines.append(f"\t{ids[e.source]} {arrow} {ids[e.target]};")
        lines.append("\tclassDef default fill:#f2f0ff,line-height:1.2")
        lines.append("\tclassDef first fill-opacity:0")
        lines.append("\tclassDef last fill:#bfb6fc")
        return "\n".join(lines) + "\n"

    def draw_png(self, path: str | None = None) -> bytes:
        """Render a PNG offline with matplotlib (the ``draw`` extra); returns its bytes.

        Raises:
            ImportError: when matplotlib is not installed.
        """
        import io

        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        g = self._nx
        pos = _layered_layout(g)
        fig, ax = plt.subplots(figsize=(max(4.0, 1.8 * _width(pos)), 1.3 * (_depth(pos) + 1)))
        solid = [(a, b) for a, b, d in g.edges(data=True) if not d.get("conditional")]
        dotted = [(a, b) for a, b, d in g.edges(data=True) if d.get("conditional")]
        colors = ["#bfb6fc" if n in (START, END) else "#f2f0ff" for n in g.nodes]
        nx.draw_networkx_nodes(g, pos, ax=ax, node_color=colors, node_size=2600, edgecolors="#555")
        nx.draw_networkx_labels(g, pos, ax=ax, font_size=8)
        nx.draw_networkx_edges(g, pos, edgelist=solid, ax=ax, arrows=True, node_size=2600)
        nx.draw_networkx_edges(
            g,
            pos,
            edgelist=dotted,
            ax=ax,
            style="dashed",
            arrows=True,
            node_size=2600,
            connectionstyle="arc3,rad=0.2",
            edge_color="#777",
        )
        ax.set_title(self.name)
        ax.margins(x=0.25, y=0.12)  # room for the labels of the outermost nodes
        ax.axis("off")
        buf = io.BytesIO()
        fig.savefig(buf, format="png", bbox_inches="tight", dpi=120)
        plt.close(fig)
        data = buf.getvalue()
        if path is not None:
            with open(path, "wb") as fh:
                fh.write(data)
        return data


def _mermaid_id(name: str) -> str:
    return name if name.replace("_", "").isalnum() else "n" + str(abs(hash(name)))


def _layered_layout(g: nx.DiGraph) -> dict[Any, tuple[float, float]]:
    depth = {START: 0}
    for node in nx.bfs_tree(g, START):
        for succ in g.successors(node):
            depth.setdefault(succ, depth[node] + 1)
    last = max(depth.values(), default=0) + 1
    depth[END] = max(depth.get(END, last), last)
    layers: dict[int, list[Any]] = {}
    for node in g.nodes:
        layers.setdefault(depth.get(node, last), []).append(node)
    pos = {}
    for level, members in layers.items():
        for i, node in enumerate(members):
            pos[node] = (i - (len(members) - 1) / 2, -float(level))
    return pos


def _width(pos: dict[Any, tuple[float, float]]) -> float:
    xs = [x for x, _ in pos.values()]
    return max(xs) - min(xs) + 1


def _depth(pos: dict[Any, tuple[float, float]]) -> float:
    return -min(y for _, y in pos.values())
