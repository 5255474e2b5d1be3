"""From a finished super-step to the next one: edges, joins, branches, Commands, Sends.

Routing runs after the step's writes are applied, in task order, so the next step's
tasks (and their order, which fixes the order writes are applied in) never depend on
which task finished first.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from threadloom.checkpoint.base import FAILED, SCHEDULED, SPECIAL_WRITE_CHANNELS, CheckpointTuple
from threadloom.engine.command_writes import grouped as saved_commands
from threadloom.engine.command_writes import is_command_task
from threadloom.engine.managed import with_managed
from threadloom.engine.tasks import Failed, TaskResult
from threadloom.errors import InvalidRouteError
from threadloom.types import END, Command, Send

if TYPE_CHECKING:
    from threadloom.engine.graph import Branch, StateGraph
    from threadloom.engine.scheduler import RunLoop
    from threadloom.engine.tasks import Task


# The ``pending`` of a Planned made by routing (it has no saved writes): one shared
# read-only empty mapping instead of a new dict per super-step.
_NO_PENDING: Mapping[str, TaskResult] = MappingProxyType({})


@dataclass(slots=True)
class Planned:
    """The tasks of the next super-step.

    Attributes:
        tasks: node names triggered by edges, in order, each once.
        sends: ``Send`` packets, in the order they were emitted.
        pending: task id -> writes already saved for it (not run again).
    """

    tasks: list[str]
    sends: list[Send]
    pending: Mapping[str, TaskResult] = field(default_factory=dict)

    def node_names(self) -> list[str]:
        """Every node that would run, edge-triggered first."""
        return [*self.tasks, *(s.node for s in self.sends)]

    def with_command(self, loop: RunLoop, cmd: Command) -> Planned:
        """Apply a resume ``Command``'s ``update`` now and add its ``goto`` targets."""
        from threadloom.engine.command_writes import command_writes

        writes = command_writes(loop, cmd)[:-1]  # the update (the last is the goto)
        return self.with_command_writes(loop, writes, cmd.goto_list())

    def with_command_writes(self, loop: RunLoop, writes: list[tuple[str, Any]],
                            goto: list[Any]) -> Planned:
        """Apply a Command's update ``writes`` now and add its ``goto`` targets."""
        from threadloom.engine.command_writes import COMMAND_NODE, apply_command

        apply_command(loop, writes)
        names = dict.fromkeys(self.tasks)
        sends = list(self.sends)
        for target in goto:
            _add_target(loop, COMMAND_NODE, target, names, sends)
        return Planned(list(names), sends, self.pending)


def saved_next(planned: Planned) -> list[Any]:
    """``planned`` in the checkpoint's ``next`` form."""
    return [*planned.tasks, *({"node": s.node, "arg": s.arg} for s in planned.sends)]


def plan_from_saved(loop: RunLoop, saved: CheckpointTuple) -> Planned:
    """The tasks a saved checkpoint says come next, with writes already saved for them."""
    names: list[str] = []
    sends: list[Send] = []
    nodes = loop.graph.nodes
    for item in saved.checkpoint.get("next", []):
        if isinstance(item, str):
            if item not in nodes:
                raise _foreign_node(loop, saved, item)
            names.append(item)
        elif isinstance(item, Mapping):
            if item.get("node") not in nodes:
                raise _foreign_node(loop, saved, item.get("node"))
            sends.append(Send(item["node"], item.get("arg")))
    pending: dict[str, TaskResult] = {}
    replay = bool((loop.config.get("configurable") or {}).get("checkpoint_id"))
    if not replay:
        grouped: dict[str, list[tuple[str, Any]]] = {}
        done: dict[str, list[Any]] = {}
        for w in saved.pending_writes:
            if w.channel == SCHEDULED:
                done[w.task_id] = list(w.value or [])
            elif w.channel == FAILED:  # its error handler is due, unless it finished
                pending[w.task_id] = Failed([], [], w.value)
            elif w.channel not in SPECIAL_WRITE_CHANNELS:  # a task with writes is done
                grouped.setdefault(w.task_id, []).append((w.channel, w.value))
                done.setdefault(w.task_id, [])
        for tid, goto in done.items():
            if is_command_task(tid):
                continue
            targets = [g if isinstance(g, str) else Send(g["node"], g.get("arg")) for g in goto]
            pending[tid] = TaskResult(grouped.get(tid, []), targets)
        planned = Planned(names, sends, pending)
        for writes, goto_targets in saved_commands(saved.pending_writes):
            planned = planned.with_command_writes(loop, writes, goto_targets)
        return planned
    return Planned(names, sends, pending)


def _foreign_node(loop: RunLoop, saved: CheckpointTuple, name: Any) -> InvalidRouteError:
    """The error for a checkpoint whose next node this graph lacks: the thread was made
    by another graph (or by an older version of this one); continuing would silently
    drop that work."""
    thread = (saved.config.get("configurable") or {}).get("thread_id")
    step = int(saved.metadata.get("step", -1))
    return InvalidRouteError(
        f"thread {thread!r} was saved with node {name!r} to run next, but this graph has no "
        f"node of that name (nodes: {sorted(n for n in loop.graph.nodes if n[:2] != '__')}); "
        "continue the thread with the graph that made it, or start it over with new input",
        node=CHECKPOINT_ROUTE, target=name, step=step,
    )


CHECKPOINT_ROUTE = "__checkpoint__"
"""``InvalidRouteError.node`` when the route came from a saved checkpoint's next nodes."""


async def next_tasks(loop: RunLoop, tasks: list[Task], results: list[TaskResult]) -> Planned:
    """Route from the tasks that just ran to the next step's tasks."""
    graph = loop.graph
    if graph.deferred:
        return defer(loop, await route_all(loop, tasks, results))
    if len(tasks) == 1 and not results[0].goto:
        # One task that routed by edges only (the usual step): when its node has no join
        # and either no branch or exactly one branch and no static edge, route here with
        # fewer objects than the general loop below, which gives the same Planned.
        src = tasks[0].name
        branches = graph.branches.get(src)
        if src not in graph.join_index:
            if branches is None:
                targets = [t for t in graph.successors.get(src, ()) if t != END]
                return Planned(targets, [], _NO_PENDING)
            if len(branches) == 1 and src not in graph.successors:
                return await _lone_branch(loop, src, branches[0], tasks[0].remaining)
    return await route_all(loop, tasks, results)


DEFERRED = "__deferred__"
"""The key of ``RunLoop.barriers`` (saved with the checkpoint) holding the deferred nodes
triggered so far that wait for the run to have nothing else left to run."""


def defer(loop: RunLoop, planned: Planned) -> Planned:
    """``planned`` with its ``defer=True`` nodes held back until a step would have no other
    task: then they all run (as LangGraph runs a deferred node once the run would end)."""
    deferred = loop.graph.deferred
    waiting = loop.barriers.setdefault(DEFERRED, set())
    held = [name for name in planned.tasks if name in deferred]
    if held:
        waiting.update(held)
        planned.tasks = [name for name in planned.tasks if name not in deferred]
    if waiting and not (planned.tasks or planned.sends):
        planned.tasks = [name for name in loop.graph.nodes if name in waiting]
        waiting.clear()
    return planned


async def route_all(loop: RunLoop, tasks: list[Task], results: list[TaskResult]) -> Planned:
    """``next_tasks`` without its lone-task shortcuts: edges, joins, branches, gotos."""
    graph = loop.graph
    names: dict[str, None] = {}
    sends: list[Send] = []
    state = None
    if len(tasks) != len(results):
        raise ValueError(f"{len(tasks)} tasks but {len(results)} results")
    # lengths checked above: a keyword to zip() costs more than the rest of this line
    for task, result in zip(tasks, results):  # noqa: B905
        src = task.name
        for target in graph.successors.get(src, ()):
            if target != END:
                names[target] = None
        for target, sources, key in graph.join_index.get(src, ()):
            seen = loop.barriers.setdefault(key, set())
            seen.add(src)
            if seen.issuperset(sources):
                seen.clear()
                if target != END:  # add_edge([a, b], END): the join just ends them
                    names[target] = None
        for branch in graph.branches.get(src, ()):
            if branch.input_keys is not None:
                chosen = branch.path(_branch_input(loop, branch, task.remaining))
            else:
                if state is None:
                    state = _branch_state(loop, task.remaining)
                chosen = branch.path(state)
            if type(chosen) is str:  # the common case, in short (else the checks below)
                path_map = branch.path_map
                named: str | None = chosen if path_map is None else path_map.get(chosen)
                if named in graph.nodes:
                    names[named] = None  # type: ignore[index]  # in graph.nodes: a str
                    continue
                if named == END:
                    continue
            elif inspect.isawaitable(chosen):
                chosen = await chosen
            _add_chosen(loop, src, branch, chosen, names, sends)
        for goto in result.goto:
            _add_target(loop, src, goto, names, sends)
    return Planned(list(names), sends, _NO_PENDING)


async def _lone_branch(loop: RunLoop, src: str, branch: Branch, remaining: int) -> Planned:
    """``next_tasks`` after a lone task of node ``src`` whose only route is ``branch``."""
    graph = loop.graph
    chosen = branch.path(_branch_state(loop, remaining) if branch.input_keys is None
                         else _branch_input(loop, branch, remaining))
    if type(chosen) is str:  # as in next_tasks: a node name or END, in short
        path_map = branch.path_map
        named = chosen if path_map is None else path_map.get(chosen)
        if named in graph.nodes:
            return Planned([named], [], _NO_PENDING)  # type: ignore[list-item]  # a str
        if named == END:
            return Planned([], [], _NO_PENDING)
    elif inspect.isawaitable(chosen):
        chosen = await chosen
    names: dict[str, None] = {}
    sends: list[Send] = []
    _add_chosen(loop, src, branch, chosen, names, sends)
    return Planned(list(names), sends, _NO_PENDING)


def _branch_state(loop: RunLoop, remaining: int) -> Any:
    """What branch functions receive: a copy of the state (built for a typed schema),
    with the managed values of the step (``engine.managed``) that just ran."""
    graph = loop.graph
    state = with_managed(loop.values, graph.managed, remaining) if graph.managed else dict(
        loop.values)
    return state if graph.dict_state else graph.build_state(state)


def _branch_input(loop: RunLoop, branch: Branch, remaining: int) -> Any:
    """What a branch that reads some keys receives (``engine.readers``)."""
    keys = branch.input_keys or ()
    managed = loop.graph.managed
    values = with_managed(loop.values, managed, remaining) if managed else loop.values
    picked = {k: values[k] for k in keys if k in values}
    return picked if branch.build_input is None else branch.build_input(picked)


def _add_chosen(
    loop: RunLoop,
    src: str,
    branch: Branch,
    chosen: Any,
    names: dict[str, None],
    sends: list[Send],
) -> None:
    """Add what a branch of node ``src`` chose (names, Sends, END) to the next step."""
    for target in _as_list(chosen, src, loop.step):
        if branch.path_map is not None and not isinstance(target, Send):
            if target not in branch.path_map:
                raise InvalidRouteError(
                    f"conditional edge after node {src!r} returned {target!r} at "
                    f"super-step {loop.step}, which is not a key of its path_map "
                    f"{sorted(map(str, branch.path_map))}",
                    node=src,
                    target=target,
                    step=loop.step,
                )
            target = branch.path_map[target]
        _add_target(loop, src, target, names, sends)


def _as_list(chosen: Any, src: str, step: int) -> list[Any]:
    if isinstance(chosen, str | Send):
        return [chosen]
    if isinstance(chosen, list | tuple | set | frozenset):
        return list(chosen)
    if chosen is None:
        raise InvalidRouteError(
            f"conditional edge after node {src!r} returned None at super-step {step}; "
            "return a node name, a list of names, Send packets or END",
            node=src,
            target=None,
            step=step,
        )
    return [chosen]


def _add_target(
    loop: RunLoop, src: str, target: Any, names: dict[str, None], sends: list[Send]
) -> None:
    nodes = loop.graph.nodes
    if isinstance(target, Send):
        if target.node not in nodes:
            raise InvalidRouteError(
                f"node {src!r} sent a packet to unknown node {target.node!r} at super-step "
                f"{loop.step}; known nodes: {sorted(nodes)}",
                node=src,
                target=target.node,
                step=loop.step,
            )
        sends.append(target)
        return
    if target == END:
        return
    if not isinstance(target, str) or target not in nodes:
        raise InvalidRouteError(
            f"node {src!r} routed to unknown node {target!r} at super-step {loop.step}; "
            f"known nodes: {sorted(nodes)}",
            node=src,
            target=target,
            step=loop.step,
        )
    names[target] = None


def edge_index(
    builder: StateGraph,
) -> tuple[dict[str, tuple[str, ...]], dict[str, list[tuple[str, frozenset[str], str]]]]:
    """The static edges as ``source -> targets``, and the joins (``add_edge([a, b], c)``)
    as ``source -> [(target, all its sources, barrier key)]``."""
    successors: dict[str, list[str]] = {}
    for a, b in builder.edges:
        successors.setdefault(a, []).append(b)
    joins: dict[str, list[tuple[str, frozenset[str], str]]] = {}
    for target, groups in builder.joins.items():
        for sources in groups:
            key = f"{target}<{'+'.join(sources)}"
            for src in sources:
                joins.setdefault(src, []).append((target, frozenset(sources), key))
    return {k: tuple(v) for k, v in successors.items()}, joins
