"""Planning a super-step's tasks (split from ``tasks.py``): ``make_tasks`` builds them
from a routed ``Planned``, reusing writes saved for finished tasks; ``lone_task`` is its
first case, without the general loop."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from threadloom.engine.managed import with_managed
from threadloom.engine.tasks import Failed, Held, Task, task_id
from threadloom.errors import NodeError, RecordedNodeError

if TYPE_CHECKING:
    from threadloom.engine.routing import Planned
    from threadloom.engine.scheduler import RunLoop


def make_tasks(
    loop: RunLoop, planned: Planned, remaining: int, resume: dict[str, Any] | None
) -> list[Task]:
    """Build the tasks of the next super-step, reusing writes saved for finished tasks."""
    names = planned.tasks
    hashed = loop.cp is not None or loop.namespace
    if len(names) == 1 and not (hashed or planned.sends or planned.pending or resume):
        # one edge-triggered task, nothing saved or resumed: what the loop below builds
        return [lone_task(loop, names[0], remaining)]
    graph = loop.graph
    values = with_managed(loop.values, graph.managed, remaining) if graph.managed else (
        loop.values)
    base = (
        (loop.checkpoint_config.get("configurable") or {}).get("checkpoint_id") or ""
        if hashed
        else ""
    )
    step = loop.step
    build_state = None if graph.dict_state else graph.build_state
    tasks: list[Task] = []
    for index, name in enumerate(names):
        node = graph.nodes[name]
        if node.build_input is not None and node.input_keys is not None:  # set together
            keys = node.input_keys
            state = node.build_input({k: v for k, v in values.items() if k in keys})
        else:
            state = dict(values) if build_state is None else build_state(dict(values))
        tid = task_id(base, step, index, name) if hashed else f"{step}:{index}"
        tasks.append(Task(name, node, state, tid, index, remaining))
    offset = len(planned.tasks)
    for i, send in enumerate(planned.sends):
        index = offset + i
        node = graph.nodes[send.node]
        tid = task_id(base, loop.step, index, send.node) if hashed else f"{loop.step}:{index}"
        tasks.append(Task(send.node, node, send.arg, tid, index, remaining, pushed=True, packet=i))
    if planned.pending or resume:
        for task in tasks:
            done = planned.pending.get(task.id)
            if type(done) is Failed:
                _handler_due(graph, task, done.error or {})
            elif done is not None:
                task.result = done
                task.cached = True
            answers = resume.get(task.id) if resume else None
            if isinstance(answers, Held):
                task.held = answers.interrupts
            elif answers is not None:
                task.resume = answers
    return tasks


def _handler_due(graph: Any, task: Task, error: dict[str, Any]) -> None:
    """Make ``task`` (whose node failed in an earlier run) run its node's error handler
    with the saved error (``RecordedNodeError``)."""
    handler = task.node.error_handler if task.node is not None else None
    if handler is None or handler not in graph.nodes:
        return  # the graph changed since: the node runs again
    exc = RecordedNodeError(str(error.get("message", "")), str(error.get("type", "")))
    task.failure = NodeError(task.name, exc)
    task.name = handler
    task.node = graph.nodes[handler]


def lone_task(loop: RunLoop, name: str, remaining: int) -> Task:
    """The task of a step whose only task is node ``name``, triggered by edges, in a run
    whose task ids are not hashed (no checkpointer, no namespace): ``make_tasks``'s
    general loop gives the same ``Task`` (index 0, id ``"<step>:0"``)."""
    node = loop.graph.nodes[name]
    values = loop.values
    if loop.graph.managed:
        values = with_managed(values, loop.graph.managed, remaining)
    if node.build_input is not None and node.input_keys is not None:  # set together
        keys = node.input_keys
        state = node.build_input({k: v for k, v in values.items() if k in keys})
    elif loop.graph.dict_state:
        state = dict(values)
    else:
        state = loop.graph.build_state(dict(values))
    return Task(name, node, state, f"{loop.step}:0", 0, remaining)
