"""``stream_mode: "events"``: LangChain's callback events (``astream_events`` v2 shapes),
each sent as SSE event ``events`` with the event dict as data; the events are the
engine's (``threadloom.engine.events``, also behind ``CompiledGraph.astream_events``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from threadloom.engine.events import MODEL_NAME, EventBuilder
from threadloom.server.wire import dumps


class EventsMapper:
    """The ``events`` of one server run, as ``("events", json)`` pairs.

    Args:
        run_id: the server run's id (the graph's ``run_id`` in its events).
        graph_name: the graph's name (LangGraph's default is ``LangGraph``).
        metadata: the run's metadata (copied into every event's ``metadata``).
    """

    def __init__(self, run_id: str, graph_name: str, metadata: dict[str, Any]) -> None:
        self.builder = EventBuilder(run_id, graph_name, metadata)

    def start(self, graph_input: Any) -> tuple[str, str]:
        """The graph's ``on_chain_start``."""
        return "events", dumps(self.builder.start(graph_input))

    def end(self, output: Any) -> tuple[str, str]:
        """The graph's ``on_chain_end``."""
        return "events", dumps(self.builder.end(output))

    def debug(self, payload: Any) -> Iterable[tuple[str, str]]:
        """The events of one engine ``debug`` event (see ``EventBuilder.debug``)."""
        return [("events", dumps(e)) for e in self.builder.debug(payload)]

    def token(self, chunk: Any, meta: dict[str, Any]) -> Iterable[tuple[str, str]]:
        """``on_chat_model_stream`` of one model chunk (other messages send none)."""
        return [("events", dumps(e)) for e in self.builder.token(chunk, meta)]


__all__ = ["MODEL_NAME", "EventsMapper"]
