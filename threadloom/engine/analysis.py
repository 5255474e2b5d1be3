"""Compile-time checks, and the edge list and networkx view that drawings use (``drawing``).

``validate`` refuses what LangGraph's ``compile()`` refuses, naming the node: an edge,
path-map target or declared destination naming an unknown node, an ``interrupt_before``
/ ``interrupt_after`` name that is no node, and a graph with no way in from ``START``.
As in LangGraph it does not refuse a node that no static edge reaches (a
``Command(goto=...)`` or a ``Send`` may reach it) nor a cycle with no static way out
(it runs until ``recursion_limit`` raises ``GraphRecursionError``).
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
        labels = node.destination_labels or {}
        out.extend(DrawnEdge(name, t, True, labels.get(t)) for t in node.destinations)
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
        for end, side in ((edge.source, "starting"), (edge.target, "ending")):
            if end not in known:
                kind = "conditional edge" if edge.conditional else "edge"
                raise GraphValidationError(
                    f"Found {kind} {side} at unknown node {end!r} ({edge.source!r} -> "
                    f"{edge.target!r}); known nodes: {sorted(graph.nodes)}",
                    node=end,
                )
    for name in interrupt_nodes:
        if name not in graph.nodes:
            raise GraphValidationError(
                f"interrupt_before/after names unknown node {name!r}", node=name
            )
    if not any(edge.source == START for edge in graph_edges(graph)):
        hint = f"add_edge(START, {next(iter(graph.nodes))!r})" if graph.nodes else (
            "add_node(...) then add_edge(START, ...)"
        )
        raise GraphValidationError(
            f"the graph has no entry point: add an edge from START, e.g. {hint}"
        )


def validate_checkpointer(checkpointer: object) -> None:
    """Refuse, as LangGraph does, a ``checkpointer`` that is none of None, True, False
    (a subgraph's choices) or an object with a checkpointer's methods.

    Raises:
        TypeError: naming what was given.
    """
    if checkpointer is None or isinstance(checkpointer, bool):
        return
    missing = [m for m in ("get_tuple", "put", "put_writes") if not hasattr(checkpointer, m)]
    if missing:
        raise TypeError(
            f"Invalid checkpointer provided: {type(checkpointer).__name__} has no "
            f"{', '.join(missing)}; pass a checkpointer such as InMemoryCheckpointer(), "
            "None, or True/False for a subgraph"
        )
