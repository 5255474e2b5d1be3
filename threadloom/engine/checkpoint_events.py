"""The ``checkpoints`` and ``debug`` stream events of a saved checkpoint (``persistence``
sends one per save)."""

from __future__ import annotations

from typing import Any

from threadloom.checkpoint.base import checkpoint_ts, make_config, shown_metadata
from threadloom.engine.replay import with_checkpoint_map
from threadloom.engine.routing import Planned
from threadloom.engine.tasks import task_id

__all__ = ["emit_checkpoint"]


def emit_checkpoint(
    loop: Any, cid: str, metadata: dict[str, Any], planned: Planned, parent: dict[str, Any]
) -> None:
    """Send a saved checkpoint to the ``checkpoints`` and ``debug`` stream modes, as
    LangGraph: its ``config`` and ``parent_config``, values, metadata, next nodes and
    the next step's ``tasks`` (``id``, ``name``, ``interrupts``, ``state``)."""
    modes = loop.modes
    if "checkpoints" in modes or "debug" in modes:
        conf = loop.config["configurable"]
        thread, ns = conf.get("thread_id"), conf.get("checkpoint_ns", "")
        parent_id = (parent.get("configurable") or {}).get("checkpoint_id")
        names = planned.node_names()
        step = loop.step + 1
        event = {
            "id": cid,
            # a subgraph's, with its checkpoint_map, as get_state gives it (replay.py)
            "config": with_checkpoint_map(make_config(thread, ns, cid), metadata),
            "parent_config": with_checkpoint_map(make_config(thread, ns, parent_id), metadata)
            if parent_id else None,
            "metadata": shown_metadata(metadata),
            "next": names,
            "values": loop.output(),
            "tasks": [
                {"id": task_id(cid, step, i, name), "name": name, "interrupts": (),
                 "state": None}
                for i, name in enumerate(names)
            ],
        }
        if "checkpoints" in modes:
            loop.emit("checkpoints", event)
        if "debug" in modes:
            loop.emit("debug", {"type": "checkpoint", "timestamp": checkpoint_ts(cid),
                                "step": loop.step, "payload": event})
