"""Compile-time checks with networkx, and the edge list drawings use (``drawing``).

``validate`` refuses, naming the node: an edge to or from an unknown node, a node that
``START`` cannot reach, and a node from which ``END`` can never be reached. A node with
no outgoing edge, branch or declared destination ends its branch (as in LangGraph), so
it counts as reaching ``END``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import networkx as nx

from threadloom.errors import GraphValidationError
from threadloom.types import END, START

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
                targets = [*graph.nodes, END]  # any node, itself included
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
