"""From the engine's stream to SSE events, in LangGraph's server's names and shapes.

The wire modes a run asks for map onto the engine's: ``messages-tuple`` is the engine's
``messages`` and arrives as event ``messages`` with data ``[chunk, metadata]``;
``messages`` (LangChain's accumulated form) arrives as ``messages/metadata`` (once per
message), then ``messages/partial`` with the message so far; ``tasks`` is the engine's
own (LangGraph's shapes); ``debug`` is built as LangGraph's: each ``checkpoints`` and
``tasks`` event wrapped as ``{step, timestamp, type, payload}`` (the task's step read
from the engine's ``debug``). A subgraph's event is named ``mode|ns1|ns2``
(``stream_subgraphs``). An interrupt is an ``updates`` event ``{"__interrupt__": [...]}``,
and the run's last ``values`` event carries it too.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from threadloom.messages.types import AIMessageChunk, BaseMessage
from threadloom.server.stream_events import EventsMapper
from threadloom.server.wire import dumps, jsonable, message_json, now_iso

WIRE_TO_ENGINE = {"values": "values", "updates": "updates", "messages-tuple": "messages",
                  "messages": "messages", "custom": "custom", "debug": "debug",
                  "tasks": "tasks", "checkpoints": "checkpoints"}
DEBUG_MODES = ("debug", "tasks", "checkpoints")  # the engine's, for the wire's ``debug``


def engine_modes(wire: Sequence[str]) -> list[str]:
    """The engine modes a run streams with: those ``wire`` needs, plus ``values`` and
    ``updates`` (the run's output and interrupts come from them); ``events`` needs
    ``debug`` and ``messages``."""
    modes = {"values", "updates"}
    modes.update(WIRE_TO_ENGINE[m] for m in wire if m in WIRE_TO_ENGINE)
    if "debug" in wire:
        modes.update(DEBUG_MODES)
    if "events" in wire:
        modes.update(("debug", "messages"))
    return sorted(modes)


class StreamMapper:
    """Turns engine events into ``(event name, JSON data)`` pairs for one run.

    Args:
        wire_modes: the modes the client asked for.
    """

    def __init__(self, wire_modes: Sequence[str], events: EventsMapper | None = None) -> None:
        self.wire = frozenset(wire_modes)
        self.last_values: Any = None
        self._seen_messages: dict[str, BaseMessage] = {}
        self.events = events if "events" in self.wire else None
        self._steps: dict[tuple[str, ...], int] = {}  # each namespace's task step (debug)

    def map(self, namespace: tuple[str, ...], mode: str, payload: Any
            ) -> Iterable[tuple[str, str]]:
        """The SSE events of one engine event (none when the client did not ask)."""
        suffix = "|" + "|".join(namespace) if namespace else ""
        if mode == "values":
            if isinstance(payload, dict) and "__interrupt__" in payload:
                if not namespace and self.last_values is None:  # a replay that pauses
                    self.last_values = {k: v for k, v in payload.items()
                                        if k != "__interrupt__"}
                return  # the engine's pause event: final_values sends it in the wire form
            if not namespace:
                self.last_values = payload
            if "values" in self.wire:
                yield "values" + suffix, dumps(payload)
        elif mode == "updates":
            if "updates" in self.wire:
                yield "updates" + suffix, dumps(payload)
        elif mode == "messages":
            if self.events is not None and not namespace:
                yield from self.events.token(*payload)
            yield from self._messages(suffix, payload)
        elif mode == "debug":
            if self.events is not None and not namespace:
                yield from self.events.debug(payload)
            if isinstance(payload, dict) and payload.get("type") != "checkpoint":
                self._steps[namespace] = payload.get("step", 0)
        elif mode in ("tasks", "checkpoints"):
            if mode in self.wire:
                yield mode + suffix, dumps(payload)
            if "debug" in self.wire:
                yield "debug" + suffix, dumps(self._debug(namespace, mode, payload))
        elif mode in self.wire:  # custom
            yield mode + suffix, dumps(payload)

    def _debug(self, namespace: tuple[str, ...], mode: str, payload: Any) -> dict[str, Any]:
        """A ``debug`` event as LangGraph's: a checkpoint at its step, a task (``task``
        or ``task_result``) at the step it runs in."""
        if mode == "checkpoints":
            step = (payload.get("metadata") or {}).get("step", -1)
            kind = "checkpoint"
            payload = {k: v for k, v in payload.items() if k != "id"}
        else:
            step = self._steps.get(namespace, 0)
            kind = "task_result" if "result" in payload else "task"
        return {"step": step, "timestamp": now_iso(), "type": kind, "payload": payload}

    def _messages(self, suffix: str, payload: Any) -> Iterable[tuple[str, str]]:
        chunk, meta = payload
        if "messages-tuple" in self.wire:
            yield "messages" + suffix, dumps([chunk, meta])
        if "messages" not in self.wire or not isinstance(chunk, BaseMessage):
            return
        key = chunk.id or ""
        so_far = self._seen_messages.get(key)
        if so_far is None:
            yield "messages/metadata" + suffix, dumps({key: {"metadata": meta}})
            merged: BaseMessage = chunk
        elif isinstance(so_far, AIMessageChunk) and isinstance(chunk, AIMessageChunk):
            merged = so_far + chunk
        else:
            merged = chunk
        self._seen_messages[key] = merged
        body = message_json(merged)
        if body.get("type") == "AIMessageChunk":
            body["type"] = "ai"
        # as LangGraph's server: token chunks so far as "partial", a whole message (a tool
        # result, a reply a node returned without streaming it) as "complete"
        event = "messages/partial" if isinstance(chunk, AIMessageChunk) else "messages/complete"
        yield event + suffix, dumps([body])

    def final_values(self, interrupts: Sequence[Any]) -> tuple[str, str] | None:
        """The last ``values`` event of an interrupted run (state plus ``__interrupt__``),
        as LangGraph's server sends it; None when the client asked no ``values``."""
        if "values" not in self.wire or not interrupts:
            return None
        values = dict(self.last_values) if isinstance(self.last_values, dict) else {}
        values["__interrupt__"] = [jsonable(i) for i in interrupts]
        return "values", dumps(values)
