"""LangChain's callback events in ``astream_events`` v2 shapes, built from the engine's
``debug`` and ``messages`` streams: ``CompiledGraph.astream_events`` and the server's
``stream_mode: "events"``.

Each event is ``{"event", "name", "run_id", "tags", "metadata", "data", "parent_ids"}``:

- ``on_chain_start`` / ``on_chain_end`` of the graph (``run_id``: the run's id,
  ``data.input`` / ``data.output`` the final values) around the whole run;
- ``on_chain_start`` / ``on_chain_end`` of each node's task (``data.input``: the state it
  read; ``data.output``: its writes), tagged ``graph:step:N``, the node's
  ``on_chain_stream`` (``data.chunk``: its writes) before its end and the graph's
  (``{node: writes}``) after it, with ``langgraph_node``,
  ``langgraph_step``, ``langgraph_triggers``, ``langgraph_path`` and
  ``langgraph_checkpoint_ns`` in ``metadata`` besides the run's metadata;
- ``on_chat_model_stream`` for each model token chunk (``data.chunk``), child of its
  node's task.

Only the root graph's nodes are reported (a subgraph's inner nodes are not), and the
chat model's own start/end events are not sent; a model's events are named
``ChatModel`` (LangChain names them after the model's class). Ids of tasks and model calls are
``uuid5`` of the run's id, so a replay gives the same ids.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Iterable
from typing import Any

from threadloom.messages.types import AIMessageChunk

_NS = uuid.UUID("8d5b1c8e-3a4e-4f8e-9b1e-6d0c5a7f2b10")
MODEL_NAME = "ChatModel"  # the engine's stream does not say which model class spoke


class EventBuilder:
    """The events of one run, as dicts.

    Args:
        run_id: the run's id (the graph's ``run_id`` in its events).
        graph_name: the graph's name (LangGraph's default is ``LangGraph``).
        metadata: the run's metadata (copied into every event's ``metadata``).
    """

    def __init__(self, run_id: str, graph_name: str, metadata: dict[str, Any]) -> None:
        self.run_id = run_id
        # the engine's default name is "graph"; LangGraph's, which its events carry
        self.graph_name = "LangGraph" if graph_name == "graph" else graph_name
        self.metadata = metadata
        self._ns = uuid.uuid5(_NS, run_id)
        self._tasks: dict[str, tuple[str, dict[str, Any], Any]] = {}  # task: id, meta, in
        self._input: Any = None

    def _id(self, kind: str, key: str) -> str:
        return str(uuid.uuid5(self._ns, f"{kind}:{key}"))

    def _event(self, event: str, name: str, run_id: str, tags: list[str],
               metadata: dict[str, Any], data: dict[str, Any], parents: list[str]
               ) -> dict[str, Any]:
        return {"event": event, "name": name, "run_id": run_id, "tags": tags,
                "metadata": metadata, "data": data, "parent_ids": parents}

    def start(self, graph_input: Any) -> dict[str, Any]:
        """The graph's ``on_chain_start``."""
        self._input = graph_input
        return self._event("on_chain_start", self.graph_name, self.run_id, [],
                           dict(self.metadata), {"input": graph_input}, [])

    def end(self, output: Any) -> dict[str, Any]:
        """The graph's ``on_chain_end``."""
        return self._event("on_chain_end", self.graph_name, self.run_id, [],
                           dict(self.metadata), {"input": self._input, "output": output}, [])

    def debug(self, payload: Any) -> Iterable[dict[str, Any]]:
        """A node task's ``on_chain_start`` (``task``), or its ``on_chain_stream``,
        ``on_chain_end`` and the graph's ``on_chain_stream`` (``task_result``), from one
        engine ``debug`` event."""
        if not isinstance(payload, dict) or payload.get("type") not in ("task", "task_result"):
            return
        task = payload.get("payload") or {}
        name, step, key = str(task.get("name")), payload.get("step"), str(task.get("id"))
        if name.startswith("__"):  # the input step (``__start__``): LangGraph reports none
            return
        if payload["type"] == "task":
            meta = {**self.metadata, "langgraph_step": step, "langgraph_node": name,
                    "langgraph_triggers": list(task.get("triggers") or ("branch:to:" + name,)),
                    "langgraph_path": ["__pregel_pull", name],
                    "langgraph_checkpoint_ns": f"{name}:{task.get('id')}"}
            task_id = self._id("task", key)
            self._tasks[key] = (task_id, meta, task.get("input"))
            yield self._event("on_chain_start", name, task_id, [f"graph:step:{step}"], meta,
                              {"input": task.get("input")}, [self.run_id])
            return
        task_id, meta, task_input = self._tasks.pop(key, (self._id("task", key),
                                                         dict(self.metadata), None))
        tags = [f"graph:step:{step}"]
        result = task.get("result")
        failed = bool(task.get("error"))
        if not failed:
            yield self._event("on_chain_stream", name, task_id, tags, meta, {"chunk": result},
                              [self.run_id])
        data: dict[str, Any] = {"input": task_input, "output": result}
        if failed:
            data["error"] = task["error"]
        yield self._event("on_chain_end", name, task_id, tags, meta, data, [self.run_id])
        if not failed:
            yield self._event("on_chain_stream", self.graph_name, self.run_id, [],
                              dict(self.metadata), {"chunk": {name: result}}, [])

    def token(self, chunk: Any, meta: dict[str, Any]) -> Iterable[dict[str, Any]]:
        """``on_chat_model_stream`` of one model chunk (other messages send none)."""
        if not isinstance(chunk, AIMessageChunk):
            return
        # the task's id: the last part of its namespace, ``"node:task_id"``
        task_key = str(meta.get("langgraph_checkpoint_ns", "")).rpartition("|")[2].partition(":")[2]
        parent = self._tasks.get(task_key)
        parents = [self.run_id] + ([parent[0]] if parent else [])
        yield self._event("on_chat_model_stream", MODEL_NAME,
                          self._id("model", f"{task_key}:{chunk.id}"), [],
                          {**self.metadata, **meta}, {"chunk": chunk}, parents)


def _kept(include_names: Any = None, include_types: Any = None, include_tags: Any = None,
          exclude_names: Any = None, exclude_types: Any = None, exclude_tags: Any = None,
          ) -> Any:
    """LangChain's event filters as a predicate on an event dict: an event is kept when
    it matches an include filter (or none is given) and no exclude filter; its type is
    the middle of ``on_<type>_<phase>`` (``chain``, ``chat_model``)."""
    def kept(event: dict[str, Any]) -> bool:
        kind = event["event"][3:].rpartition("_")[0]
        tags = set(event["tags"])
        if include_names or include_types or include_tags:
            if not (event["name"] in (include_names or ()) or kind in (include_types or ())
                    or tags & set(include_tags or ())):
                return False
        return not (event["name"] in (exclude_names or ()) or kind in (exclude_types or ())
                    or tags & set(exclude_tags or ()))

    return kept


async def astream_events(graph: Any, input: Any, config: Any = None, *,
                         version: str = "v2", **kwargs: Any) -> AsyncIterator[dict[str, Any]]:
    """The events of one run of ``graph`` (see the module docstring), as LangChain's
    ``Runnable.astream_events(input, config, version="v2")`` gives them for a LangGraph
    graph: the graph's start, each node task's start, stream and end with the graph's
    stream of ``{node: writes}`` after it, model token chunks, the graph's end.

    ``include_names``/``include_types``/``include_tags`` and their ``exclude_`` twins
    filter the events as LangChain's do; other ``kwargs`` go to ``graph.astream``
    (``context``, ``durability``...). Closing the iterator (``aclosing``, ``break``
    inside ``async with``) stops the run.

    Raises:
        ValueError: a ``version`` other than ``"v2"``, or ``stream_mode``/``subgraphs``
            in ``kwargs`` (the events need their own modes).
    """
    if version != "v2":
        raise ValueError(f"astream_events: only version='v2' is supported, got {version!r}")
    if "stream_mode" in kwargs or "subgraphs" in kwargs:
        raise ValueError("astream_events: stream_mode and subgraphs are chosen by the events")
    kept = _kept(**{k: kwargs.pop(k) for k in list(kwargs)
                    if k.startswith(("include_", "exclude_"))})
    cfg = dict(config or {})
    run_id = str(cfg.get("run_id") or uuid.uuid4())
    builder = EventBuilder(run_id, getattr(graph, "name", "graph"), dict(cfg.get("metadata") or {}))
    if kept(first := builder.start(input)):
        yield first
    last: Any = None
    stream = graph.astream(input, config, stream_mode=["debug", "messages", "values"], **kwargs)
    async with contextlib.aclosing(stream) as events:
        async for mode, payload in events:
            if mode == "values":
                if not (isinstance(payload, dict) and "__interrupt__" in payload):
                    last = payload
            elif mode == "debug":
                for event in builder.debug(payload):
                    if kept(event):
                        yield event
            elif mode == "messages":
                for event in builder.token(*payload):
                    if kept(event):
                        yield event
    if kept(final := builder.end(last)):
        yield final
