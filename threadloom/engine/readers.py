"""What each node and conditional edge reads of the state (LangGraph's channel reads).

A node or a router annotated with a schema reads that schema's keys (``graph.py`` and
``add_conditional_edges`` record them). Without a hint, a node reads the keys of the
graph's ``state_schema``: keys only other schemas declare (the output schema's, a node's
private input) are left out, as in LangGraph; a router reads what its source node reads.
When every channel is a state key nothing is narrowed (the fast path: the whole state).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from threadloom.engine.node_info import Branch, NodeSpec
from threadloom.engine.schema import schema_keys, state_builder

__all__ = ["narrow_branches", "narrow_nodes"]


def narrow_nodes(nodes: dict[str, NodeSpec], state_keys: Sequence[str],
                 channels: Mapping[str, Any], build: Callable[[dict[str, Any]], Any]
                 ) -> dict[str, NodeSpec]:
    """``nodes`` with each unhinted, non-subgraph node reading the state keys only, when
    the graph has channels beyond them; else ``nodes`` unchanged."""
    if set(channels) <= set(state_keys):
        return nodes
    keys = tuple(state_keys)
    return {name: node if node.input_keys is not None or node.subgraph is not None
            else dataclasses.replace(node, input_keys=keys, build_input=build)
            for name, node in nodes.items()}


def narrow_branches(branches: dict[str, list[Branch]], nodes: Mapping[str, NodeSpec],
                    state_keys: Sequence[str], channels: Mapping[str, Any],
                    build: Callable[[dict[str, Any]], Any]) -> dict[str, list[Branch]]:
    """Each branch with the keys its router reads: its hint's, else its source node's
    (``nodes`` as ``narrow_nodes`` made them), else the state keys when the graph has
    other channels; a branch reading the whole state is left as it is."""
    extra = not set(channels) <= set(state_keys)
    out: dict[str, list[Branch]] = {}
    for source, items in branches.items():
        node = nodes.get(source)
        made: list[Branch] = []
        for branch in items:
            if branch.schema is not None:
                keys: tuple[str, ...] | None = schema_keys(branch.schema) or None
                builder = state_builder(branch.schema)
            elif node is not None and node.input_keys is not None and node.subgraph is None:
                keys, builder = node.input_keys, node.build_input or build
            elif extra:
                keys, builder = tuple(state_keys), build
            else:
                keys = None
            made.append(branch if keys is None else dataclasses.replace(
                branch, input_keys=keys, build_input=builder))
        out[source] = made
    return out
