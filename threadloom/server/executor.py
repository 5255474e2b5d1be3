"""Executing one run: the graph's ``astream`` on the thread, each event into the log.

The engine is used only through its public entry points (``astream``, ``aget_state``,
``aupdate_state``); the server adds the run's bookkeeping around it: the statuses of the
run and its thread, the ``metadata`` event first, the ``error`` event (naming the node
and super-step) when the graph raises, the thread's latest values and interrupts when the
run ends. A graph that raises leaves its thread resumable: the engine saved the steps
before the failure, and ``runs.wait(input=None)`` goes on from there.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from threadloom.engine.compiled import CompiledGraph
from threadloom.redact import mask_urls
from threadloom.server.eventlog import EventLog
from threadloom.server.graphs import Assistant
from threadloom.server.stream_events import EventsMapper
from threadloom.server.stream_map import StreamMapper, engine_modes
from threadloom.server.wire import dumps, interrupts_by_task, jsonable
from threadloom.types import Command

_NOTE = re.compile(r"while running node '(?P<node>[^']*)' at super-step (?P<step>-?\d+)")


@dataclass
class RunJob:
    """What one execution needs: the run's wire record, its owner and assistant."""

    run: dict[str, Any]
    owner: str
    assistant: Assistant
    resume: bool = False  # after a restart: go on from the last checkpoint (input None)


@dataclass
class Outcome:
    """How a run ended: its status, the output ``join``/``wait`` return, the thread's."""

    status: str
    output: Any
    thread_status: str
    values: Any = None
    interrupts: dict[str, Any] = dataclasses.field(default_factory=dict)
    error: dict[str, Any] | None = None


def describe_error(exc: BaseException) -> dict[str, Any]:
    """The ``error`` event body: ``{"error": type name, "message", "node", "step"}``
    (``node``/``step`` from the engine's note, None when it failed outside a node)."""
    node = step = None
    for note in getattr(exc, "__notes__", ()):
        found = _NOTE.search(str(note))
        if found:
            node, step = found["node"], int(found["step"])
    message = mask_urls(str(exc)) or type(exc).__name__  # stored in the event log
    if node is not None:
        message = f"{message} (in node {node!r} at step {step})"
    return {"error": type(exc).__name__, "message": message, "node": node, "step": step}


def run_config(job: RunJob, thread_id: str) -> dict[str, Any]:
    """The engine config of a run: the assistant's config, the run's, and the ids."""
    kwargs = job.run["kwargs"]
    config = {**job.assistant.config, **(kwargs.get("config") or {})}
    configurable = {**(job.assistant.config.get("configurable") or {}),
                    **(config.get("configurable") or {})}
    configurable.update(thread_id=thread_id, run_id=job.run["run_id"],
                        assistant_id=job.assistant.assistant_id,
                        graph_id=job.assistant.graph_id)
    configurable.pop("checkpoint_id", None)
    if kwargs.get("checkpoint_id") and not job.resume:
        configurable["checkpoint_id"] = kwargs["checkpoint_id"]
    config["configurable"] = configurable
    config["metadata"] = {**(config.get("metadata") or {}), **job.run["metadata"],
                          "run_id": job.run["run_id"], "thread_id": thread_id}
    return config


def run_input(kwargs: dict[str, Any], resume: bool) -> Any:
    """The graph input of a run: its ``input``, a ``Command`` built from ``command``, or
    None (go on from the last checkpoint) when resuming after a restart."""
    if resume:
        return None
    command = kwargs.get("command")
    if command:
        goto = command.get("goto")
        return Command(update=command.get("update"), resume=command.get("resume"),
                       goto=_goto(goto))
    return kwargs.get("input")


def _goto(goto: Any) -> Any:
    if goto is None:
        return ()
    if isinstance(goto, dict):
        from threadloom.types import Send
        return Send(goto["node"], goto.get("input"))
    if isinstance(goto, list):
        return [_goto(g) if isinstance(g, dict) else g for g in goto]
    return goto


def run_context(graph: CompiledGraph, context: Any) -> Any:
    """The run's ``context`` dict as the graph's ``context_schema`` (when it is a
    dataclass or a pydantic model), else as given."""
    schema = getattr(graph.builder, "context_schema", None)
    if not isinstance(context, dict) or schema is None or not isinstance(schema, type):
        return context
    if dataclasses.is_dataclass(schema):
        return schema(**context)
    if issubclass(schema, BaseModel):
        return schema.model_validate(context)
    return context


class Executor:
    """Runs jobs against their graphs and writes their events to ``log``."""

    def __init__(self, log: EventLog) -> None:
        self.log = log
        self._variants: dict[tuple[int, Any, Any], CompiledGraph] = {}

    def graph_for(self, job: RunJob) -> CompiledGraph:
        """The assistant's graph, recompiled (once, then cached) when the run asks for
        other ``interrupt_before``/``interrupt_after`` nodes."""
        graph = job.assistant.graph
        kwargs = job.run["kwargs"]
        before, after = kwargs.get("interrupt_before"), kwargs.get("interrupt_after")
        if before is None and after is None:
            return graph
        key = (id(graph), _key(before), _key(after))
        variant = self._variants.get(key)
        if variant is None:
            variant = graph.builder.compile(
                graph.checkpointer,
                interrupt_before=before if before is not None else sorted(graph.interrupt_before),
                interrupt_after=after if after is not None else sorted(graph.interrupt_after),
                durability=graph.durability, name=graph.name, busy_timeout=graph.busy_timeout)
            self._variants[key] = variant
        return variant

    async def execute(self, job: RunJob) -> Outcome:
        """Run the job to its end; ``CancelledError`` passes through (the manager
        records a cancelled run).

        Returns:
            The outcome; a graph that raised gives status ``error`` (never raises).
        """
        run_id, thread_id = job.run["run_id"], job.run["thread_id"]
        kwargs = job.run["kwargs"]
        graph = job.assistant.graph
        try:  # preparing is inside: nothing raised here may leave the run running
            graph = self.graph_for(job)
            config = run_config(job, thread_id)
            modes = kwargs.get("stream_mode") or ["values"]
            events = EventsMapper(run_id, graph.name, config["metadata"]) \
                if "events" in modes else None
            mapper = StreamMapper(modes, events)
            subgraphs = bool(kwargs.get("subgraphs"))
            graph_input = run_input(kwargs, job.resume)
            context = run_context(graph, {**job.assistant.context,
                                          **(kwargs.get("context") or {})})
            if events is not None:
                self.log.append(run_id, *events.start(kwargs.get("input")))
            stream = graph.astream(
                graph_input, config, stream_mode=engine_modes(modes),
                subgraphs=subgraphs, durability=kwargs.get("durability"), context=context)
            async for item in stream:
                namespace, mode, payload = item if subgraphs else ((), *item)
                for event, data in mapper.map(namespace, mode, payload):
                    self.log.append(run_id, event, data)
        except Exception as exc:
            error = describe_error(exc)
            self.log.append(run_id, "error", dumps(error))
            snap = await _state(graph, thread_id)
            return Outcome("error", {"__error__": error}, "error",
                           values=jsonable(snap.values) if snap else None,
                           interrupts=interrupts_by_task(snap) if snap else {}, error=error)
        return await self._succeeded(run_id, thread_id, graph, mapper, events)

    async def timed_out(self, job: RunJob, limit_s: float) -> Outcome:
        """The outcome of a run stopped after ``limit_s`` seconds: status ``timeout``
        (as LangGraph's server), an ``error`` event saying so, the thread ``error`` with
        the steps it saved (resumable, as after a graph that raised)."""
        run_id, thread_id = job.run["run_id"], job.run["thread_id"]
        error = {"error": "TimeoutError", "node": None, "step": None,
                 "message": f"run {run_id} exceeded the server's run timeout of "
                            f"{limit_s:g} s (threadloom serve --run-timeout)"}
        self.log.append(run_id, "error", dumps(error))
        snap = await _state(job.assistant.graph, thread_id)
        return Outcome("timeout", {"__error__": error}, "error",
                       values=jsonable(snap.values) if snap else None,
                       interrupts=interrupts_by_task(snap) if snap else {}, error=error)

    async def _succeeded(self, run_id: str, thread_id: str, graph: CompiledGraph,
                         mapper: StreamMapper, events: EventsMapper | None) -> Outcome:
        snap = await _state(graph, thread_id)
        interrupts = list(snap.interrupts) if snap else []
        final = mapper.final_values(interrupts)
        if final is not None:
            self.log.append(run_id, *final)
        output = jsonable(mapper.last_values) if mapper.last_values is not None else None
        if interrupts and isinstance(output, dict):
            output["__interrupt__"] = [jsonable(i) for i in interrupts]
        if events is not None:
            self.log.append(run_id, *events.end(mapper.last_values))
        status = "interrupted" if (snap and snap.next) else "idle"
        return Outcome("success", output, status,
                       values=jsonable(snap.values) if snap else None,
                       interrupts=interrupts_by_task(snap) if snap else {})


async def _state(graph: CompiledGraph, thread_id: str) -> Any:
    try:
        return await graph.aget_state({"configurable": {"thread_id": thread_id}})
    except Exception:
        return None


def _key(nodes: Any) -> Any:
    return tuple(nodes) if isinstance(nodes, list) else nodes
