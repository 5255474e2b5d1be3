"""The graph LangGraph's ``get_graph()`` returns: its nodes and its edges, in its order.

LangGraph finds a graph's edges by a dry run of its step loop over the node triggers
(no node runs): each step's nodes write their static edges (every step) and their
path-map or ``Command`` destinations (once), the nodes those writes trigger form the
next step, and an edge is kept from every node whose write triggered one. ``discover``
runs the same dry run over a ``StateGraph``'s edges, joins, branches and destinations,
so a drawing lists the same edges in the same order (sorted, then the edges into
``END`` of the nodes that lead nowhere). A branch without a path map (nor a
``Literal`` return hint) may lead to any node or ``END``, and is drawn so; LangGraph
draws no edge for it (README, "Differences on purpose"). With ``xray`` a subgraph's
own nodes take the place of its node, its ``START``/``END`` trimmed where LangGraph
trims them.
"""

from __future__ import annotations

import typing
from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from threadloom.types import END, START

if TYPE_CHECKING:
    from threadloom.engine.graph import StateGraph

__all__ = ["Drawn", "DrawnNode", "LgEdge", "lg_graph"]

_LIMIT = 250  # LangGraph's dry-run step limit
_FUNCTION_ID = ["langgraph", "_internal", "_runnable", "RunnableCallable"]
_GRAPH_ID = ["langgraph", "graph", "state", "CompiledStateGraph"]


@dataclass(frozen=True, slots=True)
class LgEdge:
    """An edge as LangGraph draws it: ``data`` is its label (None: none)."""

    source: str
    target: str
    data: str | None = None
    conditional: bool = False


@dataclass(slots=True)
class DrawnNode:
    """A node of a drawing: ``kind`` names what runs it the way LangGraph's JSON does
    (``None`` for ``END``, which runs nothing)."""

    id: str
    kind: list[str] | None
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class Drawn:
    """Nodes (insertion-ordered, by id) and edges of a drawing."""

    nodes: dict[str, DrawnNode] = field(default_factory=dict)
    edges: list[LgEdge] = field(default_factory=list)

    def add_edge(self, source: str, target: str, data: str | None = None,
                 conditional: bool = False) -> None:
        """Add an edge unless one already joins ``source`` to ``target``."""
        if any(e.source == source and e.target == target for e in self.edges):
            return
        if target == END and END not in self.nodes:
            self.nodes[END] = DrawnNode(END, None)
        self.edges.append(LgEdge(source, target, data, conditional))

    def first_node(self, exclude: tuple[str, ...] = ()) -> str | None:
        """The one node no edge enters (edges from ``exclude`` aside), else None."""
        targets = {e.target for e in self.edges if e.source not in exclude}
        found = [n for n in self.nodes if n not in exclude and n not in targets]
        return found[0] if len(found) == 1 else None

    def last_node(self, exclude: tuple[str, ...] = ()) -> str | None:
        """The one node no edge leaves (edges into ``exclude`` aside), else None."""
        sources = {e.source for e in self.edges if e.target not in exclude}
        found = [n for n in self.nodes if n not in exclude and n not in sources]
        return found[0] if len(found) == 1 else None

    def remove(self, node: str) -> None:
        """Drop a node and its edges."""
        self.nodes.pop(node, None)
        self.edges = [e for e in self.edges if node not in (e.source, e.target)]


def lg_graph(compiled: Any, xray: int | bool = False) -> Drawn:
    """The drawing of a compiled graph, subgraphs expanded ``xray`` levels deep
    (``True``: all levels)."""
    builder: StateGraph = compiled.builder
    edges, last_sources = discover(builder)
    drawn = Drawn()
    drawn.nodes[START] = DrawnNode(START, _FUNCTION_ID)
    before = _names(compiled.interrupt_before, builder.nodes)
    after = _names(compiled.interrupt_after, builder.nodes)
    for name, spec in builder.nodes.items():
        meta = dict(spec.metadata or {})
        marks = [w for w, names in (("before", before), ("after", after)) if name in names]
        if marks:
            meta["__interrupt"] = ",".join(marks)
        kind = _GRAPH_ID if spec.subgraph is not None else _FUNCTION_ID
        drawn.nodes[name] = DrawnNode(name, kind, meta)
    edges = _to_deferred(builder, edges)
    for src, dst, cond, label in sorted(edges, key=_edge_key):
        drawn.add_edge(src, dst, label if label != dst else None, cond)
    termini = {d for _, d, _, _ in edges if d != END} - {s for s, _, _, _ in edges}
    if termini:
        for src in sorted(termini):
            drawn.add_edge(src, END)
    elif len(last_sources) == 1 and not any(d == END for _, d, _, _ in edges):
        drawn.add_edge(next(iter(last_sources)), END, conditional=True)
    if xray:
        deeper = xray if isinstance(xray, bool) else xray - 1
        for name, spec in builder.nodes.items():
            if spec.subgraph is not None:
                _splice(drawn, name, lg_graph(spec.subgraph, deeper))
    return drawn


def _to_deferred(builder: StateGraph, edges: Any) -> Any:
    """``edges`` plus, as LangGraph draws them, a dotted edge from each node that leads
    nowhere to each deferred node (``defer=True``), which runs once the others end."""
    deferred = [name for name, spec in builder.nodes.items() if spec.defer]
    if not deferred:
        return edges
    ends = {d for _, d, _, _ in edges if d != END} - {s for s, _, _, _ in edges}
    return [*edges, *((t, d, True, None) for t in sorted(ends - set(deferred)) for d in deferred)]


def _edge_key(edge: tuple[str, str, bool, str | None]) -> tuple[str, str, bool, bool, str]:
    src, dst, cond, label = edge
    return src, dst, cond, label is not None, label or ""


def _names(which: Any, nodes: Any) -> set[str]:
    if which == "*" or which == ["*"]:
        return set(nodes)
    return set(which or ())


def _splice(drawn: Drawn, name: str, sub: Drawn) -> None:
    """Put ``sub`` in place of node ``name``, its ids prefixed ``name:``."""
    first, last = sub.first_node(), sub.last_node()
    if len(sub.nodes) <= 1 or name not in drawn.nodes or first is None or last is None:
        return
    if sub.first_node((first,)) and sum(e.source == first for e in sub.edges) == 1:
        sub.remove(first)
    last = sub.last_node()
    if last and sub.last_node((last,)) and sum(e.target == last for e in sub.edges) == 1:
        sub.remove(last)
    first, last = sub.first_node(), sub.last_node()
    drawn.nodes.pop(name)
    for node in sub.nodes.values():
        drawn.nodes[f"{name}:{node.id}"] = DrawnNode(f"{name}:{node.id}", node.kind,
                                                     node.metadata)
    new_first, new_last = f"{name}:{first}", f"{name}:{last}"
    drawn.edges = [
        LgEdge(new_last if e.source == name else e.source,
               new_first if e.target == name else e.target, e.data, e.conditional)
        for e in drawn.edges
    ]
    drawn.edges += [LgEdge(f"{name}:{e.source}", f"{name}:{e.target}", e.data,
                           e.conditional) for e in sub.edges]


@dataclass(slots=True)
class _Plan:
    """What each node writes in the dry run, and which channels trigger it."""

    writes: dict[str, list[tuple[str, str | None]]]
    statics: dict[str, list[list[tuple[str, str | None]]]]
    triggers: dict[str, list[str]]
    barriers: dict[str, frozenset[str]]


def _plan(builder: StateGraph) -> _Plan:
    names = [START, *builder.nodes]
    writes: dict[str, list[tuple[str, str | None]]] = {n: [] for n in names}
    statics: dict[str, list[list[tuple[str, str | None]]]] = {n: [] for n in names}
    triggers = {n: [START] if n == START else [f"branch:to:{n}"] for n in names}
    barriers: dict[str, frozenset[str]] = {}
    for a, b in builder.edges:
        if b != END and a in writes:
            writes[a].append((f"branch:to:{b}", None))
    for target, groups in builder.joins.items():
        for sources in sorted(groups):
            if target == END or target not in triggers:
                continue
            chan = f"join:{'+'.join(sources)}:{target}"
            barriers[chan] = frozenset(sources)
            triggers[target].append(chan)
            for s in sources:
                writes.setdefault(s, []).append((chan, s))
    for source, branches in builder.branches.items():
        for branch in branches:
            path_map = branch.path_map or _literal_map(branch.path)
            if path_map is None:  # any node may be next, END too (threadloom's choice)
                path_map = {t: t for t in [*builder.nodes, END]}
            if source in statics:
                statics[source].append([(_chan(t), str(k)) for k, t in path_map.items()])
    for name, spec in builder.nodes.items():
        if spec.destinations:
            labels = spec.destination_labels or {}
            statics[name].append([(_chan(t), labels.get(t)) for t in spec.destinations])
    return _Plan(writes, statics, triggers, barriers)


def _literal_map(path: Any) -> dict[str, str] | None:
    """``{name: name}`` from a ``-> Literal["a", "b"]`` path, as LangGraph reads it."""
    try:
        hint = typing.get_type_hints(path).get("return")
    except Exception:  # noqa: BLE001 - an unresolvable annotation names no destination
        return None
    if typing.get_origin(hint) is typing.Literal:
        return {a: a for a in typing.get_args(hint) if isinstance(a, str)}
    return None


def _chan(target: str) -> str:
    return END if target == END else f"branch:to:{target}"


Edge = tuple[str, str, bool, "str | None"]


class _DryRun:
    """LangGraph's step loop over triggers only: which writes wake which nodes."""

    def __init__(self, plan: _Plan) -> None:
        self.plan = plan
        self.versions: dict[str, int] = {}
        self.seen: dict[str, dict[str, int]] = {}
        self.values: set[str] = set()  # ephemeral channels holding a value
        self.arrived: dict[str, set[str]] = defaultdict(set)  # barrier -> names seen
        self.clock = 0

    def available(self, chan: str) -> bool:
        names = self.plan.barriers.get(chan)
        if names is None:
            return chan in self.values
        return self.arrived[chan] >= names

    def step(self, tasks: list[str], writes: dict[str, list[tuple[str, Any]]]) -> list[str]:
        """Apply one step's writes; the nodes they trigger (LangGraph's apply_writes)."""
        self.clock += 1
        for t in tasks:
            self.seen[t] = {c: self.versions[c] for c in self.plan.triggers[t]
                            if c in self.versions}
        for chan in {c for t in tasks for c in self.plan.triggers[t]}:
            if chan in self.plan.barriers and self.available(chan):
                self.arrived[chan].clear()
                self.versions[chan] = self.clock
        updated: set[str] = set()
        for t in tasks:
            for chan, value in writes[t]:
                if chan in self.plan.barriers:
                    if value in self.arrived[chan]:
                        continue
                    self.arrived[chan].add(value)
                else:
                    self.values.add(chan)
                self.versions[chan] = self.clock
                if self.available(chan):
                    updated.add(chan)
        for chan in list(self.values - updated):
            self.values.discard(chan)
            self.versions[chan] = self.clock
        return [n for n, trig in self.plan.triggers.items()
                if updated.intersection(trig) and any(
                    self.available(c)
                    and self.versions.get(c, 0) > self.seen.get(n, {}).get(c, -1)
                    for c in trig)]


def discover(builder: StateGraph) -> tuple[set[Edge], set[str]]:
    """The edges LangGraph's dry run finds, and the nodes of its last step."""
    plan = _plan(builder)
    run = _DryRun(plan)
    run.values.add(START)  # the input's write wakes START
    run.versions[START] = 0
    tasks = [START]
    edges: set[Edge] = set()
    sources: dict[str, set[tuple[str, bool, str | None]]] = {}
    declared: dict[str, set[tuple[str, bool, str | None]]] = defaultdict(set)
    done: set[tuple[str, int]] = set()
    step_sources: dict[str, set[tuple[str, bool, str | None]]] = {}
    for _ in range(-1, _LIMIT):
        if not tasks:
            break
        writes, step_sources = _run_tasks(plan, tasks, done, declared, edges)
        sources.update(step_sources)
        by_trigger: dict[str, set[tuple[str, bool, str | None]]] = defaultdict(set)
        for src, fired in sources.items():
            for chan, cond, label in fired:
                by_trigger[chan].add((src, cond, label))
        tasks = run.step(tasks, writes)
        for task in tasks:
            added = False
            for trig in sorted(plan.triggers[task]):
                for src, cond, label in list(by_trigger[trig]):
                    edges.add((src, task, cond, label))
                    if (trig, cond, label) in step_sources.get(src, ()):
                        added = True
                    else:
                        sources[src].discard((trig, cond, label))
            if not added:
                edges.update((src, task, True, None) for src in step_sources)
    return edges, set(step_sources)


def _run_tasks(
    plan: _Plan,
    tasks: list[str],
    done: set[tuple[str, int]],
    declared: dict[str, set[tuple[str, bool, str | None]]],
    edges: set[Edge],
) -> tuple[dict[str, list[tuple[str, Any]]], dict[str, set[tuple[str, bool, str | None]]]]:
    """One dry step: each task's writes, and what each of them fired."""
    conditionals: dict[tuple[str, str], str | None] = {}
    writes: dict[str, list[tuple[str, Any]]] = {}
    for t in tasks:
        out: list[tuple[str, Any]] = list(plan.writes.get(t, ()))
        for i, static in enumerate(plan.statics.get(t, ())):
            if (t, i) in done:
                continue
            done.add((t, i))
            edges.update((t, END, True, label) for chan, label in static if chan == END)
            rest = [(chan, label) for chan, label in static if chan != END]
            conditionals.update({(t, chan): label for chan, label in rest})
            declared[t].update((chan, True, label) for chan, label in rest)
            out.extend((chan, None) for chan, _ in rest)
        writes[t] = out
    fired: dict[str, set[tuple[str, bool, str | None]]] = {}
    for t in tasks:
        here = {(c, v is None and (t, c) in conditionals,
                 conditionals.get((t, c)) if v is None else None) for c, v in writes[t]}
        fired[t] = here | declared.get(t, set())
    return writes, fired
